// piece_io.cc — see piece_io.h.
#include "ec/piece_io.h"

#include <cstring>

#include "os/files.h"

namespace tierckpt::ec {
namespace {

Status ReadSpan(std::span<const uint8_t> bytes, uint64_t offset, uint8_t* buf, size_t len,
                std::string_view what) {
  if (offset > bytes.size() || len > bytes.size() - offset) {
    return IoError(std::string(what) + ": reading " + std::to_string(len) + " bytes at offset " +
                   std::to_string(offset) + " of " + std::to_string(bytes.size()) + " bytes held");
  }
  if (len > 0) std::memcpy(buf, bytes.data() + offset, len);
  return Status::Ok();
}

}  // namespace

std::vector<uint8_t>* MemoryObjectSource::Find(std::string_view name) {
  auto it = objects_.find(name);
  return it == objects_.end() ? nullptr : &it->second;
}

Status MemoryObjectSource::Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) {
  auto it = objects_.find(name);
  if (it == objects_.end())
    return NotFound("object " + std::string(name) + " is not among the part's objects");
  return ReadSpan(it->second, offset, buf, len, "object " + std::string(name));
}

Result<const uint8_t*> ObjectSource::View(std::string_view, uint64_t, size_t) {
  return static_cast<const uint8_t*>(nullptr);
}

std::string ObjectSource::VerifiedChecksum(std::string_view) const { return ""; }

Result<const uint8_t*> MemoryObjectSource::View(std::string_view name, uint64_t offset, size_t len) {
  auto it = objects_.find(name);
  if (it == objects_.end())
    return NotFound("object " + std::string(name) + " is not among the part's objects");
  if (offset > it->second.size() || len > it->second.size() - offset) {
    return IoError("object " + std::string(name) + " is " + std::to_string(it->second.size()) +
                   " bytes; a view of " + std::to_string(len) + " at " + std::to_string(offset) +
                   " is past its end");
  }
  return it->second.data() + offset;
}

Status MemoryPieceSource::Read(uint64_t offset, uint8_t* buf, size_t len) {
  return ReadSpan(bytes_, offset, buf, len, what_);
}

Status MemoryObjectSink::Write(std::string_view name, uint64_t offset, std::span<const uint8_t> bytes) {
  std::vector<uint8_t>& obj = objects_[std::string(name)];
  if (obj.size() < offset + bytes.size()) obj.resize(offset + bytes.size());
  if (!bytes.empty()) std::memcpy(obj.data() + offset, bytes.data(), bytes.size());
  return Status::Ok();
}

Status FdObjectSource::Add(std::string name, UniqueFd fd, std::string path) {
  if (files_.count(name) != 0)
    return AlreadyExists("object " + name + " was added to the part's source twice");
  files_.emplace(std::move(name), File{std::move(fd), std::move(path)});
  return Status::Ok();
}

Status FdObjectSource::Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) {
  auto it = files_.find(name);
  if (it == files_.end())
    return NotFound("object " + std::string(name) + " is not among the part's open files");
  return PreadExact(it->second.fd.get(), buf, len, offset,
                    "object " + std::string(name) + " (" + it->second.path + ")");
}

Status FdPieceSource::Read(uint64_t offset, uint8_t* buf, size_t len) {
  return PreadExact(fd_.get(), buf, len, offset, "parity piece " + path_);
}

}  // namespace tierckpt::ec
