// peer_part_source.h — a member's committed part read from its agent over
// the peer transport, as the ec::ObjectSource a parity holder folds from
// (replication/parity_holder.h; decision 126).
//
// Each object is fetched whole through a PeerObjectStore (one stream,
// checked against the sender's XXH3 on arrival; a damaged stream is
// kCorruption) into one buffer, which the reads of that object are served
// from: memory is bounded by the part's largest object, not by a chunk (a
// ranged GetObject would bound it by the chunk; left for later). The buffer
// is made once per part, as long as its largest object, and not zero-filled
// (each object's bytes are received into it before any is served). Reading
// an object again from offset 0 fetches it again, so the accumulator's
// second reading of a refused part (decision 123) is a second transfer.
//
// Decision 149: View serves the buffer in place (no copy into the
// accumulator's chunk), and VerifiedChecksum names the checksum the stream
// was checked against, so the accumulator does not hash the bytes a second
// time when it is the manifest's.
//
// Decision 164: given a BufferCache, the buffer is leased from it (and given
// back when the source goes), so a holder's folds receive into pages faulted
// in by earlier folds.
//
// Thread-compatible: one caller at a time (ObjectSource's contract).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/buffer_cache.h"
#include "ec/piece_io.h"
#include "replication/peer_store.h"
#include "tierckpt/manifest.h"

namespace tierckpt::agent {

class PeerPartSource final : public ec::ObjectSource {
 public:
  // store (and buffers, when given) must outlive the source; part names the
  // objects and their sizes.
  PeerPartSource(PeerObjectStore* store, const Manifest& part, BufferCache* buffers = nullptr);
  Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) override;
  Result<const uint8_t*> View(std::string_view name, uint64_t offset, size_t len) override;
  std::string VerifiedChecksum(std::string_view name) const override;

 private:
  // Brings object `name` into buffer_ (again when offset is 0) and checks
  // that [offset, offset + len) lies in it.
  Status Fetch(std::string_view name, uint64_t offset, size_t len);

  PeerObjectStore* const store_;
  const Manifest& part_;
  std::string current_;   // the object buffer_ holds ("" = none)
  std::string verified_;  // its stream's checksum
  BufferCache* const buffers_;
  BufferCache::Lease lease_;             // from buffers_, when given
  std::unique_ptr<uint8_t[]> own_;       // otherwise
  uint8_t* buffer_ = nullptr;            // lease_'s or own_'s bytes
  uint64_t capacity_ = 0;  // buffer_'s length
  uint64_t size_ = 0;      // current_'s length
};

}  // namespace tierckpt::agent
