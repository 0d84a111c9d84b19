#include "tier/segment_pool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "os/fd.h"
#include "os/files.h"
#include "tier/layout.h"

namespace tierckpt::agent {

std::string SegmentAffinity(std::string_view ns, std::string_view name) {
  std::string out(ns);
  out.push_back('/');
  out.append(name);
  return out;
}

void SegmentPool::Insert(uint64_t size, uint64_t id, std::string affinity) {
  segs_.insert({size, id});
  bytes_ += size;
  if (affinity.empty()) return;
  by_affinity_.insert({affinity, size, id});
  affinity_of_[id] = std::move(affinity);
}

std::string SegmentPool::Erase(std::set<Seg>::const_iterator it) {
  const auto [size, id] = *it;
  segs_.erase(it);
  bytes_ -= size;
  auto a = affinity_of_.find(id);
  if (a == affinity_of_.end()) return {};
  std::string affinity = std::move(a->second);
  affinity_of_.erase(a);
  by_affinity_.erase({affinity, size, id});
  return affinity;
}

std::string SegmentPool::SegPath(uint64_t id) const {
  return JoinPath(dir_, std::string(kPoolSegmentPrefix) + std::to_string(id));
}

Status SegmentPool::Load() {
  // The pool dir and what is in it are opened without following links: a
  // link planted as the pool or as a segment is removed as a link and never
  // leads the pool to adopt (and later truncate, hand out or unlink) a file
  // outside the root.
  const std::string parent = DirName(dir_);
  TC_ASSIGN_OR_RETURN(UniqueFd parent_fd, OpenDirNoFollow(parent));
  TC_ASSIGN_OR_RETURN(UniqueFd dir, OpenLayoutDir(parent_fd.get(), BaseName(dir_), dir_));
  TC_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(dir.get(), dir_));
  for (const DirEntry& e : entries) {
    const std::string path = JoinPath(dir_, e.name);
    bool ours = e.name.rfind(kPoolSegmentPrefix, 0) == 0 && e.type == EntryType::kRegular && e.size > 0;
    uint64_t id = 0;
    if (ours) {
      std::string digits = e.name.substr(kPoolSegmentPrefix.size());
      char* end = nullptr;
      id = std::strtoull(digits.c_str(), &end, 10);
      ours = !digits.empty() && end != nullptr && *end == '\0';
    }
    if (!ours) {
      if (e.type == EntryType::kSymlink) {
        RemovePlantedEntry(dir.get(), e.name, path, "a pool segment").IgnoreError();
        continue;
      }
      TC_RETURN_IF_ERROR(RemoveTreeAt(dir.get(), e.name, path));
      continue;
    }
    Insert(e.size, id, {});
    if (id >= next_id_) next_id_ = id + 1;
  }
  return Status::Ok();
}

Result<uint64_t> SegmentPool::Put(const std::string& path) {
  Result<DirEntry> entry = StatNoFollow(path);
  if (!entry.ok()) return entry.status().WithContext("recycling into the segment pool");
  // Nothing there is an error: the caller hands in a file it made.
  if (entry->type == EntryType::kMissing) return ErrnoStatus("stat " + path + " to recycle it", ENOENT);
  if (entry->type != EntryType::kRegular || entry->size == 0) {
    TC_RETURN_IF_ERROR(RemoveTree(path));
    return uint64_t{0};
  }
  uint64_t id = next_id_++;
  TC_RETURN_IF_ERROR(RenamePath(path, SegPath(id)));
  const uint64_t size = entry->size;
  Insert(size, id, {});
  return size;
}

std::set<SegmentPool::Seg>::const_iterator SegmentPool::Pick(uint64_t size) const {
  auto it = segs_.lower_bound({size, 0});
  if (it != segs_.end()) return it;
  return segs_.empty() ? segs_.end() : std::prev(segs_.end());
}

std::optional<uint64_t> SegmentPool::BestFit(uint64_t size) const {
  auto it = Pick(size);
  if (it == segs_.end()) return std::nullopt;
  return it->first;
}

Result<uint64_t> SegmentPool::Take(uint64_t size, const std::string& dest) {
  auto it = Pick(size);
  if (it == segs_.end()) return Internal("SegmentPool::Take on an empty pool " + dir_);
  Seg seg = *it;
  std::string src = SegPath(seg.second);
  if (seg.first != size) {
    // O_NOFOLLOW: resize the segment, never what a link in its place names.
    Result<UniqueFd> fd = OpenFile(src, O_WRONLY | O_NOFOLLOW);
    if (!fd.ok()) return fd.status().WithContext("resize pool segment " + src);
    TC_RETURN_IF_ERROR(
        TruncateFd(fd->get(), size, "resize pool segment " + src + " to " + std::to_string(size) + " bytes"));
  }
  Status moved = RenamePath(src, dest);
  if (!moved.ok()) {
    if (seg.first != size) {
      // Keep the index true to the file on disk.
      std::string affinity = Erase(segs_.find(seg));
      Insert(size, seg.second, std::move(affinity));
    }
    return moved;
  }
  Erase(segs_.find(seg));
  return seg.first;
}

std::optional<SegmentPool::Segment> SegmentPool::Reserve(uint64_t size, std::string_view affinity) {
  auto it = Pick(size);
  if (it == segs_.end()) return std::nullopt;
  if (!affinity.empty()) {
    // The same object's last segment, if one of the best fit's size is here.
    const uint64_t fit = it->first;
    auto a = by_affinity_.lower_bound({std::string(affinity), fit, 0});
    if (a != by_affinity_.end() && std::get<0>(*a) == affinity && std::get<1>(*a) == fit) {
      it = segs_.find({fit, std::get<2>(*a)});
    }
  }
  Segment seg{it->second, it->first, SegPath(it->second), {}};
  seg.affinity = Erase(it);
  return seg;
}

void SegmentPool::Return(const Segment& seg, uint64_t size_now) {
  if (size_now == 0) return;
  Insert(size_now, seg.id, seg.affinity);
}

void SegmentPool::Adopt(uint64_t id, uint64_t size, std::string affinity) {
  Insert(size, id, std::move(affinity));
  if (id >= next_id_) next_id_ = id + 1;
}

std::optional<SegmentPool::Segment> SegmentPool::PickRelease(std::optional<uint64_t> keep_for) {
  if (segs_.empty()) return std::nullopt;
  auto keep = keep_for ? Pick(*keep_for) : segs_.end();
  auto it = std::prev(segs_.end());
  if (it == keep) {
    if (it == segs_.begin()) return std::nullopt;
    it = std::prev(it);
  }
  Segment seg{it->second, it->first, SegPath(it->second), {}};
  seg.affinity = Erase(it);
  return seg;
}

Result<uint64_t> SegmentPool::ReleaseOne(std::optional<uint64_t> keep_for) {
  if (segs_.empty()) return uint64_t{0};
  auto keep = keep_for ? Pick(*keep_for) : segs_.end();
  auto it = std::prev(segs_.end());
  if (it == keep) {
    if (it == segs_.begin()) return uint64_t{0};
    it = std::prev(it);
  }
  Seg seg = *it;
  std::string path = SegPath(seg.second);
  if (mappings_ != nullptr) mappings_->ForgetPath(path);
  TC_RETURN_IF_ERROR(RemoveFile(path, IfMissing::kOk, "unlink pool segment"));
  Erase(segs_.find(seg));
  return seg.first;
}

}  // namespace tierckpt::agent
