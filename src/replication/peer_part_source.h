// peer_part_source.h — a member's committed part read from its agent over
// the peer transport, as the ec::ObjectSource a parity holder folds from
// (replication/parity_holder.h; decision 126).
//
// Each object is fetched whole through a PeerObjectStore (one stream,
// checked against the sender's XXH3 on arrival; a damaged stream is
// kCorruption) into one buffer, which the reads of that object are served
// from: memory is bounded by the part's largest object, not by a chunk (a
// ranged GetObject would bound it by the chunk; left for later). Reading an
// object again from offset 0 fetches it again, so the accumulator's second
// reading of a refused part (decision 123) is a second transfer.
//
// Thread-compatible: one caller at a time (ObjectSource's contract).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ec/piece_io.h"
#include "replication/peer_store.h"
#include "tierckpt/manifest.h"

namespace tierckpt::agent {

class PeerPartSource final : public ec::ObjectSource {
 public:
  // store must outlive the source; part names the objects and their sizes.
  PeerPartSource(PeerObjectStore* store, const Manifest& part);
  Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) override;

 private:
  PeerObjectStore* const store_;
  const Manifest& part_;
  std::string current_;  // the object buffer_ holds ("" = none)
  std::vector<uint8_t> buffer_;
};

}  // namespace tierckpt::agent
