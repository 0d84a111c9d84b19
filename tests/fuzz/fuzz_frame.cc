// fuzz_frame.cc — fuzz target for the frame header and every payload decoder.
//
// Input layout: the first 16 bytes are a frame header (DecodeHeader runs on
// them); the rest is a payload. The header's type field picks the decoder,
// exactly as the agent and the client would: a request type runs that
// request's Decode, a type with kResponseBit runs DecodeResponse and then the
// body decoder of that response. Valid frames written by make_corpus are
// therefore meaningful seeds. A type that is not a known message still runs
// every decoder, chosen by the low byte of the type, so no input is wasted.
//
// Properties checked (abort() on violation, besides the sanitizers):
//   - a request that decodes re-encodes to exactly the same bytes (the
//     encoding is canonical: lengths exact, bools 0/1, no trailing bytes);
//   - a response that decodes to a body round-trips through EncodeResponse;
//   - DecodeHeader accepts a header only if EncodeHeader reproduces it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "wire/protocol.h"

namespace tierckpt::wire {
namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

template <typename T>
void DecodeAndReencode(std::string_view payload) {
  auto r = T::Decode(payload);
  if (!r.ok()) {
    Check(r.status().code() == Code::kProtocolError);
    return;
  }
  Check(r->Encode() == payload);
}

void DecodeRequest(uint16_t type, std::string_view payload) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello:
      return DecodeAndReencode<HelloRequest>(payload);
    case MsgType::kBeginStep:
    case MsgType::kBeginSave:
    case MsgType::kAbortStep:
    case MsgType::kShow:
    case MsgType::kRestore:
    case MsgType::kVerify:
    case MsgType::kPersist:
      return DecodeAndReencode<StepRequest>(payload);
    case MsgType::kCreateObject:
      return DecodeAndReencode<CreateObjectRequest>(payload);
    case MsgType::kCreateNextObject:
      return DecodeAndReencode<CreateNextObjectRequest>(payload);
    case MsgType::kSealObject:
      return DecodeAndReencode<SealObjectRequest>(payload);
    case MsgType::kCommitStep:
      return DecodeAndReencode<CommitStepRequest>(payload);
    case MsgType::kList:
      return DecodeAndReencode<ListRequest>(payload);
    case MsgType::kOpenObject:
      return DecodeAndReencode<OpenObjectRequest>(payload);
    case MsgType::kDeleteStep:
      return DecodeAndReencode<DeleteStepRequest>(payload);
    case MsgType::kPrune:
      return DecodeAndReencode<PruneRequest>(payload);
    case MsgType::kWaitDurable:
      return DecodeAndReencode<WaitDurableRequest>(payload);
    case MsgType::kStats:
    case MsgType::kShutdown: {
      Decoder d(payload);  // no fields: the payload must be empty
      Check(d.Finish().ok() == payload.empty());
      return;
    }
  }
}

void DecodeResponseFrame(uint16_t type, std::string_view payload) {
  auto body = DecodeResponse(payload);
  if (!body.ok()) {
    Check(body.status().code() != Code::kOk);
    return;
  }
  auto again = DecodeResponse(EncodeResponse(Status::Ok(), *body));
  Check(again.ok() && *again == *body);
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello:
      return DecodeAndReencode<HelloResponse>(*body);
    case MsgType::kOpenObject:
      return DecodeAndReencode<OpenObjectResponse>(*body);
    case MsgType::kCreateNextObject:
      return DecodeAndReencode<CreateNextObjectResponse>(*body);
    case MsgType::kList:
    case MsgType::kShow:
    case MsgType::kStats:
    case MsgType::kVerify:
    case MsgType::kPrune:
    case MsgType::kDeleteStep:
    case MsgType::kCommitStep:
      return DecodeAndReencode<JsonBody>(*body);
    default:
      return;
  }
}

void FuzzOne(const uint8_t* data, size_t size) {
  if (size < kFrameHeaderSize) return;
  auto header = DecodeHeader(data);
  if (header.ok()) {
    uint8_t again[kFrameHeaderSize];
    EncodeHeader(*header, again);
    Check(std::memcmp(again, data, kFrameHeaderSize) == 0);
  }
  uint16_t type = static_cast<uint16_t>(data[6] | (data[7] << 8));
  std::string_view payload(reinterpret_cast<const char*>(data + kFrameHeaderSize),
                           size - kFrameHeaderSize);
  uint16_t request_type = static_cast<uint16_t>(type & ~kResponseBit);
  if (!IsKnownRequestType(request_type)) {
    // Not a message type: pick one from the low byte so the input is still
    // exercised against a decoder.
    request_type = static_cast<uint16_t>(1 + (data[6] % 17));
  }
  if ((type & kResponseBit) != 0) {
    DecodeResponseFrame(request_type, payload);
  } else {
    DecodeRequest(request_type, payload);
  }
  Check(MsgTypeName(request_type) != "unknown");
}

}  // namespace
}  // namespace tierckpt::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tierckpt::wire::FuzzOne(data, size);
  return 0;
}
