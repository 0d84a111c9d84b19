// fuzz_s3_xml.cc — fuzz target for the parsers of S3's XML bodies
// (src/s3/s3_xml.h): error documents, InitiateMultipartUpload,
// ListObjectsV2, DeleteObjects results, ListMultipartUploads, URL decoding.
//
// These bodies come from the network (a server, a proxy, anything answering
// on the endpoint), so every input must give either a value or an error
// Status — never a crash, a hang or undefined behaviour. Where a parser
// accepts, its output must be consistent: a truncated listing has a
// continuation token, and URL-decoding never grows a string. The first input
// byte picks the parser, so one corpus covers them all.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "s3/s3_xml.h"

namespace tierckpt::s3 {
namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

void FuzzOne(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0: {
      auto e = ParseErrorBody(body);
      if (e.has_value()) Check(e->code.size() <= body.size());
      break;
    }
    case 1: {
      auto id = ParseInitiateMultipartUpload(body);
      if (id.ok()) Check(!id->empty());
      break;
    }
    case 2: {
      auto page = ParseListObjectsV2(body);
      if (page.ok() && page->truncated) Check(!page->next_continuation_token.empty());
      break;
    }
    case 3: {
      auto errors = ParseDeleteResult(body);
      (void)errors;
      break;
    }
    case 4: {
      auto uploads = ParseListMultipartUploads(body);
      (void)uploads;
      break;
    }
    default: {
      auto decoded = UrlDecode(body);
      if (decoded.ok()) Check(decoded->size() <= body.size());
      break;
    }
  }
}

}  // namespace
}  // namespace tierckpt::s3

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tierckpt::s3::FuzzOne(data, size);
  return 0;
}
