// peer_part_source.cc — see peer_part_source.h.
#include "replication/peer_part_source.h"

#include <cstring>

namespace tierckpt::agent {

PeerPartSource::PeerPartSource(PeerObjectStore* store, const Manifest& part) : store_(store), part_(part) {}

Status PeerPartSource::Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) {
  if (name != current_ || offset == 0) {
    const ObjectEntry* entry = nullptr;
    for (const ObjectEntry& o : part_.objects) {
      if (o.name == name) entry = &o;
    }
    if (entry == nullptr) return NotFound("object " + std::string(name) + " is not in the part of node " + part_.node);
    current_.clear();
    buffer_.assign(entry->size, 0);
    TC_RETURN_IF_ERROR(store_->ReadObject(part_.ns, part_.step, name, 0, buffer_.data(), buffer_.size()));
    current_ = std::string(name);
  }
  if (offset > buffer_.size() || len > buffer_.size() - offset) {
    return IoError("object " + std::string(name) + " of node " + part_.node + " is " +
                   std::to_string(buffer_.size()) + " bytes; read of " + std::to_string(len) + " at " +
                   std::to_string(offset) + " is past its end");
  }
  if (len > 0) std::memcpy(buf, buffer_.data() + offset, len);
  return Status::Ok();
}

}  // namespace tierckpt::agent
