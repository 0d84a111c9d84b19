#include "tier/read_mappings.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <utility>

#include "common/checksum.h"
#include "os/fd.h"
#include "os/files.h"
#include "os/fs_stat.h"

namespace tierckpt::agent {

FileKey KeyOf(const struct stat& st) {
  return FileKey{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

FileKey KeyOf(const FileStat& st) { return FileKey{st.dev, st.ino}; }

Result<ReadView> ReadMappings::Open(const std::string& path) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDONLY));
  TC_ASSIGN_OR_RETURN(FileStat st, StatOpenFd(fd.get(), "stat " + path));
  ReadView view;
  view.key_ = KeyOf(st);
  view.size_ = st.size;
  const uint64_t size = view.size_;
  if (size == 0) return view;
  if (size < options_.min_file_bytes) {
    std::shared_ptr<uint8_t[]> buf(new uint8_t[size]);
    TC_RETURN_IF_ERROR(PreadExact(fd.get(), buf.get(), size, 0, path));
    view.data_ = buf.get();
    view.owner_ = std::move(buf);
    return view;
  }
  {
    MutexLock lock(&mu_);
    auto it = entries_.find(view.key_);
    if (it != entries_.end() && it->second.mapping->size() >= size) {
      ++counters_.hits;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      view.data_ = it->second.mapping->data();
      view.owner_ = it->second.mapping;
      view.kept_ = true;
      return view;
    }
  }
  // Map outside the lock: populating the page tables is the slow part.
  TC_ASSIGN_OR_RETURN(Mapping fresh, Mapping::Map(fd.get(), size, Mapping::Access::kReadOnly,
                                                  /*populate=*/true, path));
  std::shared_ptr<const Mapping> mapping = std::make_shared<const Mapping>(std::move(fresh));
  std::vector<std::shared_ptr<const Mapping>> dropped;  // unmapped after the lock is released
  {
    MutexLock lock(&mu_);
    ++counters_.maps;
    auto it = entries_.find(view.key_);
    if (it != entries_.end() && it->second.mapping->size() >= size) {
      // Another thread mapped the file meanwhile: share its mapping.
      dropped.push_back(std::move(mapping));
      mapping = it->second.mapping;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      view.kept_ = true;
    } else {
      if (it != entries_.end()) {  // the file grew past its mapping
        mapped_bytes_ -= it->second.mapping->size();
        dropped.push_back(std::move(it->second.mapping));
        lru_.erase(it->second.lru);
        entries_.erase(it);
      }
      if (MakeRoomLocked(size, &dropped)) {
        lru_.push_front(view.key_);
        entries_.emplace(view.key_, Entry{mapping, lru_.begin()});
        mapped_bytes_ += size;
        view.kept_ = true;
      }
    }
  }
  view.data_ = mapping->data();
  view.owner_ = std::move(mapping);
  return view;
}

bool ReadMappings::MakeRoomLocked(uint64_t bytes, std::vector<std::shared_ptr<const Mapping>>* dropped) {
  if (bytes > options_.max_bytes || options_.max_mappings == 0) return false;
  while (!lru_.empty() &&
         (mapped_bytes_ + bytes > options_.max_bytes || entries_.size() + 1 > options_.max_mappings)) {
    auto it = entries_.find(lru_.back());
    mapped_bytes_ -= it->second.mapping->size();
    dropped->push_back(std::move(it->second.mapping));
    entries_.erase(it);
    lru_.pop_back();
    ++counters_.evictions;
  }
  return true;
}

void ReadMappings::Forget(FileKey key) {
  std::shared_ptr<const Mapping> dropped;  // unmapped after the lock is released
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  mapped_bytes_ -= it->second.mapping->size();
  dropped = std::move(it->second.mapping);
  lru_.erase(it->second.lru);
  entries_.erase(it);
  ++counters_.forgotten;
}

void ReadMappings::ForgetPath(const std::string& path) {
  Result<FileStat> st = StatFile(path, Follow::kNo, IfMissing::kOk);
  if (!st.ok() || st->type != EntryType::kRegular) return;
  Forget(KeyOf(*st));
}

ReadMappingsStats ReadMappings::Stats() const {
  MutexLock lock(&mu_);
  ReadMappingsStats s = counters_;
  s.mappings = entries_.size();
  s.mapped_bytes = mapped_bytes_;
  return s;
}

Result<std::string> HashObjectFile(ReadMappings& mappings, const std::string& path, uint64_t size) {
  TC_ASSIGN_OR_RETURN(ReadView view, mappings.Open(path));
  if (view.size() != size) {
    return Corruption(path + " holds " + std::to_string(view.size()) + " bytes, expected " +
                      std::to_string(size) + " (it was resized after sealing)");
  }
  return ComputeChecksum(view.data(), view.size()).ToString();
}

}  // namespace tierckpt::agent
