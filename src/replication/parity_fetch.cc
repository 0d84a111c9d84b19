// parity_fetch.cc — see parity_fetch.h.
#include "replication/parity_fetch.h"

#include <cstring>
#include <span>
#include <utility>

#include "peer/peer_messages.h"

namespace tierckpt::agent {

ParityFetch::ParityFetch(peer::Transport* transport, std::string holder, std::string address,
                         peer::Millis timeout)
    : transport_(transport), holder_(std::move(holder)), address_(std::move(address)), timeout_(timeout) {}

std::string ParityFetch::Describe(std::string_view ns, uint64_t step, uint32_t group) const {
  return "group " + std::to_string(group) + " of " + std::string(ns) + " step " + std::to_string(step) +
         " from parity holder " + holder_ + " at " + address_;
}

Result<ec::ParityRecord> ParityFetch::Record(std::string_view ns, uint64_t step, uint32_t group) {
  const std::string what = "reading the parity record of " + Describe(ns, step, group);
  Result<std::unique_ptr<peer::Connection>> conn = transport_->Connect(address_, timeout_, holder_);
  if (!conn.ok()) return conn.status().WithContext(what);
  peer::Frame f;
  f.type = static_cast<uint16_t>(peer::PeerMsg::kGetParityRecord);
  f.request_id = 1;
  f.payload = peer::GetParityRequest{std::string(ns), step, group, 0}.Encode();
  TC_RETURN_IF_ERROR((*conn)->Send(f).WithContext(what));
  Result<peer::Message> m = (*conn)->Receive(timeout_);
  if (!m.ok()) return m.status().WithContext(what);
  if (m->kind != peer::Message::Kind::kControl || m->frame.request_id != f.request_id) {
    return ProtocolError(what + ": the holder answered with a stream or another request's reply");
  }
  if (m->frame.type == static_cast<uint16_t>(peer::PeerMsg::kError)) {
    return peer::DecodePeerError(m->frame.payload).WithContext(what);
  }
  if (m->frame.type != static_cast<uint16_t>(peer::PeerMsg::kParityRecord)) {
    return ProtocolError(what + ": the holder answered " + std::string(peer::PeerMsgName(m->frame.type)));
  }
  TC_ASSIGN_OR_RETURN(ec::ParityRecord record,
                      ec::ParityRecord::Parse(m->frame.payload, "parity holder " + holder_));
  if (record.ns != ns || record.step != step || record.group != group) {
    return Corruption(what + ": the holder sent the record of group " + std::to_string(record.group) +
                      " of " + record.ns + " step " + std::to_string(record.step));
  }
  return record;
}

Result<std::vector<uint8_t>> ParityFetch::Piece(std::string_view ns, uint64_t step, uint32_t group,
                                                uint32_t piece, uint64_t length) {
  const std::string what =
      "reading parity piece " + std::to_string(piece) + " of " + Describe(ns, step, group);
  Result<std::unique_ptr<peer::Connection>> conn = transport_->Connect(address_, timeout_, holder_);
  if (!conn.ok()) return conn.status().WithContext(what);
  peer::Frame f;
  f.type = static_cast<uint16_t>(peer::PeerMsg::kGetParityPiece);
  f.request_id = 1;
  f.payload = peer::GetParityRequest{std::string(ns), step, group, piece}.Encode();
  TC_RETURN_IF_ERROR((*conn)->Send(f).WithContext(what));
  Result<peer::Message> m = (*conn)->Receive(timeout_);
  if (!m.ok()) return m.status().WithContext(what);
  if (m->kind == peer::Message::Kind::kControl) {
    if (m->frame.type == static_cast<uint16_t>(peer::PeerMsg::kError)) {
      return peer::DecodePeerError(m->frame.payload).WithContext(what);
    }
    return ProtocolError(what + ": the holder answered " + std::string(peer::PeerMsgName(m->frame.type)));
  }
  if (m->stream.request_id != f.request_id || m->stream.size != length) {
    return Corruption(what + ": the holder sent " + std::to_string(m->stream.size) +
                      " bytes where its record says " + std::to_string(length));
  }
  std::vector<uint8_t> bytes(length);
  Result<Checksum> got = (*conn)->ReceiveStreamBody(std::span<uint8_t>(bytes.data(), bytes.size()));
  if (!got.ok()) return got.status().WithContext(what);
  return bytes;
}

Status PeerPieceSource::Read(uint64_t offset, uint8_t* buf, size_t len) {
  if (!fetched_ || offset == 0) {
    fetched_ = false;
    TC_ASSIGN_OR_RETURN(bytes_, fetch_->Piece(ns_, step_, group_, piece_, length_));
    fetched_ = true;
  }
  if (offset > bytes_.size() || len > bytes_.size() - offset) {
    return IoError("parity piece " + std::to_string(piece_) + " from holder " + fetch_->holder() + " is " +
                   std::to_string(bytes_.size()) + " bytes; read of " + std::to_string(len) + " at " +
                   std::to_string(offset) + " is past its end");
  }
  if (len > 0) std::memcpy(buf, bytes_.data() + offset, len);
  return Status::Ok();
}

}  // namespace tierckpt::agent
