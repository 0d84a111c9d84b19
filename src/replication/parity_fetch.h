// parity_fetch.h — a parity holder's sealed record and pieces read over the
// peer transport (kGetParityRecord, kGetParityPiece: peer/peer_messages.h,
// decision 138), for a node rebuilding its part of a step from its group's
// survivors (replication/parity_restore.h).
//
// ParityFetch asks one holder; each call opens its own connection (checked
// in the handshake against the holder's node id) and closes it after. A
// piece comes whole, one stream, its XXH3 checked on arrival against the
// holder's record (a piece damaged at rest is kCorruption naming it).
// PeerPieceSource is an ec::PieceSource over it: the piece is fetched at the
// first read from offset 0 into one buffer that later reads are served from,
// so a rebuild that never uses a piece never transfers it.
//
// Errors name the holder, the group, the step and what failed; a holder's
// kError comes back as its Status. Thread-compatible: one caller at a time
// per instance.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ec/parity_record.h"
#include "ec/piece_io.h"
#include "peer/transport.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

class ParityFetch {
 public:
  // transport must outlive the fetch.
  ParityFetch(peer::Transport* transport, std::string holder, std::string address, peer::Millis timeout);

  // The record of group `group` of (ns, step) the holder keeps sealed.
  // kCorruption when it does not parse or names another group or step.
  Result<ec::ParityRecord> Record(std::string_view ns, uint64_t step, uint32_t group);
  // Parity piece `piece` of that group, whole: `length` bytes (the record's
  // piece length); another length is kCorruption.
  Result<std::vector<uint8_t>> Piece(std::string_view ns, uint64_t step, uint32_t group, uint32_t piece,
                                     uint64_t length);

  const std::string& holder() const { return holder_; }

 private:
  std::string Describe(std::string_view ns, uint64_t step, uint32_t group) const;

  peer::Transport* const transport_;
  const std::string holder_;
  const std::string address_;
  const peer::Millis timeout_;
};

class PeerPieceSource final : public ec::PieceSource {
 public:
  // fetch must outlive the source.
  PeerPieceSource(ParityFetch* fetch, std::string ns, uint64_t step, uint32_t group, uint32_t piece,
                  uint64_t length)
      : fetch_(fetch), ns_(std::move(ns)), step_(step), group_(group), piece_(piece), length_(length) {}
  Status Read(uint64_t offset, uint8_t* buf, size_t len) override;

 private:
  ParityFetch* const fetch_;
  const std::string ns_;
  const uint64_t step_;
  const uint32_t group_;
  const uint32_t piece_;
  const uint64_t length_;
  bool fetched_ = false;
  std::vector<uint8_t> bytes_;
};

}  // namespace tierckpt::agent
