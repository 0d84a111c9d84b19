// peer_part_source.cc — see peer_part_source.h.
#include "replication/peer_part_source.h"

#include <algorithm>
#include <cstring>

namespace tierckpt::agent {

PeerPartSource::PeerPartSource(PeerObjectStore* store, const Manifest& part, BufferCache* buffers)
    : store_(store), part_(part), buffers_(buffers) {}

Status PeerPartSource::Fetch(std::string_view name, uint64_t offset, size_t len) {
  if (name != current_ || offset == 0) {
    const ObjectEntry* entry = nullptr;
    for (const ObjectEntry& o : part_.objects) {
      if (o.name == name) entry = &o;
    }
    if (entry == nullptr) return NotFound("object " + std::string(name) + " is not in the part of node " + part_.node);
    current_.clear();
    verified_.clear();
    if (entry->size > capacity_) {
      // Once per part: as long as its largest object, so the next objects
      // fit (and the pages the first one faulted in are reused).
      uint64_t largest = 0;
      for (const ObjectEntry& o : part_.objects) largest = std::max(largest, o.size);
      buffer_ = nullptr;
      lease_ = BufferCache::Lease();
      own_.reset();
      if (buffers_ != nullptr) {
        lease_ = buffers_->Take(static_cast<size_t>(largest));
        buffer_ = lease_.data();
      } else {
        own_.reset(new uint8_t[static_cast<size_t>(largest)]);
        buffer_ = own_.get();
      }
      capacity_ = largest;
    }
    TC_ASSIGN_OR_RETURN(Checksum sum, store_->ReadObjectVerified(part_.ns, part_.step, name, buffer_,
                                                                 static_cast<size_t>(entry->size)));
    current_ = std::string(name);
    verified_ = sum.ToString();
    size_ = entry->size;
  }
  if (offset > size_ || len > size_ - offset) {
    return IoError("object " + std::string(name) + " of node " + part_.node + " is " + std::to_string(size_) +
                   " bytes; read of " + std::to_string(len) + " at " + std::to_string(offset) +
                   " is past its end");
  }
  return Status::Ok();
}

Status PeerPartSource::Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) {
  TC_RETURN_IF_ERROR(Fetch(name, offset, len));
  if (len > 0) std::memcpy(buf, buffer_ + offset, len);
  return Status::Ok();
}

Result<const uint8_t*> PeerPartSource::View(std::string_view name, uint64_t offset, size_t len) {
  TC_RETURN_IF_ERROR(Fetch(name, offset, len));
  return static_cast<const uint8_t*>(buffer_ + offset);
}

std::string PeerPartSource::VerifiedChecksum(std::string_view name) const {
  return name == current_ ? verified_ : std::string();
}

}  // namespace tierckpt::agent
