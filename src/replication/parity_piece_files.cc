// parity_piece_files.cc — see parity_piece_files.h.
#include "replication/parity_piece_files.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "os/beneath.h"
#include "os/files.h"
#include "os/mapping.h"
#include "tier/layout.h"

namespace tierckpt::agent {

// One held piece's file, mapped while it is folded.
class ParityPieceFiles::PieceFile final : public ec::PieceMemory {
 public:
  explicit PieceFile(ParityPieceFiles* files) : files_(files) {}
  ~PieceFile() override {
    map_.Reset();
    fd_.Reset();
    if (id_.has_value()) files_->Return(*id_, size_);
  }

  Status Resize(uint64_t length) override {
    if (length == size_) return Status::Ok();
    uint64_t recycled = 0;
    if (!id_.has_value()) {
      if (length == 0) return Status::Ok();
      TC_ASSIGN_OR_RETURN(Taken t, files_->Take(length));
      id_ = t.id;
      fd_ = std::move(t.fd);
      recycled = t.recycled;
      size_ = std::min(recycled, length);  // Take truncated it to length
    }
    const std::string what = "parity piece file " + JoinPath(files_->dir(), files_->SegName(*id_));
    map_.Reset();
    const uint64_t before = size_;
    if (::ftruncate(fd_.get(), static_cast<off_t>(length)) != 0) {
      const Status cut = ErrnoStatus("resize " + what + " to " + std::to_string(length) + " bytes");
      return WithRemap(cut, what);
    }
    size_ = length;
    // The bytes added get their pages now: a full mount is an error here,
    // not a SIGBUS in the fold.
    Status grown = length > before ? AllocateFileRange(fd_.get(), before, length - before,
                                                       "reserving " + std::to_string(length) + " bytes for " + what)
                                   : Status::Ok();
    if (!grown.ok()) {
      if (::ftruncate(fd_.get(), static_cast<off_t>(before)) == 0) size_ = before;
      if (grown.code() == Code::kResourceExhausted) {
        grown = ResourceExhausted("the filesystem of " + files_->dir() + " has no room left to grow " + what +
                                  " to " + std::to_string(length) +
                                  " bytes; free space on the agent's mount or lower --memory-budget to what it "
                                  "can hold (" + grown.message() + ")");
      }
      return WithRemap(grown, what);
    }
    TC_RETURN_IF_ERROR(Remap(what));
    // A recycled file's old bytes: zero them in place (its pages are
    // resident; the bytes it grew by read as zero already).
    if (recycled > 0) std::memset(map_.data(), 0, static_cast<size_t>(std::min(recycled, length)));
    return Status::Ok();
  }

  uint8_t* data() override { return map_.data(); }
  uint64_t size() const override { return size_; }

  Status Publish(int dir_fd, const std::string& name, const std::string& path) override {
    if (!id_.has_value()) {
      // Nothing folded (a piece of length 0): an empty file.
      TC_ASSIGN_OR_RETURN(UniqueFd made, OpenFileAt(dir_fd, name, O_RDWR | O_CREAT | O_TRUNC, 0600, path, path));
      return Status::Ok();
    }
    map_.Reset();
    Status moved = files_->PublishTaken(*id_, dir_fd, name, path);
    if (!moved.ok()) {
      Remap("parity piece file for " + path).IgnoreError();  // the bytes stay; a later Publish may map again
      return moved;
    }
    id_.reset();
    fd_.Reset();
    size_ = 0;
    return Status::Ok();
  }

 private:
  // A failed resize leaves the piece as before: mapped again at size_. The
  // cause stays the error; a failed remap is added to it, never in its place.
  Status WithRemap(const Status& cause, const std::string& what) {
    Status mapped = Remap(what);
    return mapped.ok() ? cause
                       : Status(cause.code(), cause.message() + "; mapping it again failed too: " + mapped.ToString());
  }
  Status Remap(const std::string& what) {
    map_.Reset();
    // Populated: one pass maps every page, where faulting them one at a time
    // as the memset and the fold first touch them took ~5x as long (64 MiB
    // of resident tmpfs pages on the bench VM: 7-10 ms against 46 ms).
    TC_ASSIGN_OR_RETURN(map_, Mapping::Map(fd_.get(), static_cast<size_t>(size_), Mapping::Access::kReadWrite,
                                           /*populate=*/true, what));
    return Status::Ok();
  }

  ParityPieceFiles* const files_;
  std::optional<uint64_t> id_;  // its file is seg_<id> in the pool dir, out of the pool's index
  UniqueFd fd_;
  Mapping map_;
  uint64_t size_ = 0;
};

ParityPieceFiles::ParityPieceFiles(std::string dir) : dir_(std::move(dir)), pool_(dir_) {}

std::string ParityPieceFiles::SegName(uint64_t id) const {
  return std::string(kPoolSegmentPrefix) + std::to_string(id);
}

Status ParityPieceFiles::LoadLocked() {
  if (loaded_) return Status::Ok();
  pool_ = SegmentPool(dir_);  // a load that failed half-way starts again from nothing
  TC_RETURN_IF_ERROR(pool_.Load().WithContext("loading the parity pool " + dir_));
  TC_ASSIGN_OR_RETURN(UniqueFd parent, OpenDirNoFollow(DirName(dir_)));
  TC_ASSIGN_OR_RETURN(dir_fd_, OpenLayoutDir(parent.get(), BaseName(dir_), dir_));
  loaded_ = true;
  return Status::Ok();
}

Status ParityPieceFiles::Load() {
  MutexLock lock(&mu_);
  return LoadLocked();
}

std::unique_ptr<ec::PieceMemory> ParityPieceFiles::Make() { return std::make_unique<PieceFile>(this); }

Result<ParityPieceFiles::Taken> ParityPieceFiles::Take(uint64_t size) {
  MutexLock lock(&mu_);
  TC_RETURN_IF_ERROR(LoadLocked());
  Taken t;
  std::optional<SegmentPool::Segment> seg = pool_.Reserve(size);
  t.id = seg.has_value() ? seg->id : pool_.NewId();
  const std::string name = SegName(t.id);
  const std::string path = JoinPath(dir_, name);
  const int flags = seg.has_value() ? O_RDWR : (O_RDWR | O_CREAT | O_EXCL);
  Result<UniqueFd> fd = OpenFileAt(dir_fd_.get(), name, flags, 0600, path, dir_);
  if (!fd.ok()) {
    if (seg.has_value()) pool_.Return(*seg, seg->size);
    return fd.status().WithContext("a parity piece file");
  }
  if (seg.has_value() && seg->size != size) {
    Status cut = TruncateFd(fd->get(), size, "resize parity pool file " + path + " to " + std::to_string(size) + " bytes");
    if (!cut.ok()) {
      pool_.Return(*seg, seg->size);
      return cut;
    }
  }
  t.fd = std::move(fd).value();
  t.recycled = seg.has_value() ? seg->size : 0;
  return t;
}

void ParityPieceFiles::Return(uint64_t id, uint64_t size) {
  MutexLock lock(&mu_);
  if (size == 0) {
    UnlinkAt(dir_fd_.get(), SegName(id), "removing the empty parity pool file", JoinPath(dir_, SegName(id)))
        .IgnoreError();  // Load removes an empty one after a restart anyway
    return;
  }
  pool_.Adopt(id, size);
}

Status ParityPieceFiles::PublishTaken(uint64_t id, int dir_fd, const std::string& name, const std::string& path) {
  MutexLock lock(&mu_);
  if (::renameat(dir_fd_.get(), SegName(id).c_str(), dir_fd, name.c_str()) != 0) {
    return ErrnoStatus("rename " + JoinPath(dir_, SegName(id)) + " to " + path);
  }
  return Status::Ok();
}

Result<uint64_t> ParityPieceFiles::Recycle(int dir_fd, const std::string& name, const std::string& path) {
  MutexLock lock(&mu_);
  TC_RETURN_IF_ERROR(LoadLocked());
  TC_ASSIGN_OR_RETURN(DirEntry e, StatAt(dir_fd, name, path));
  if (e.type != EntryType::kRegular || e.size == 0) return uint64_t{0};
  const uint64_t id = pool_.NewId();
  if (::renameat(dir_fd, name.c_str(), dir_fd_.get(), SegName(id).c_str()) != 0) {
    return ErrnoStatus("rename " + path + " into the parity pool " + dir_);
  }
  pool_.Adopt(id, e.size);
  return e.size;
}

uint64_t ParityPieceFiles::Release(uint64_t bytes) {
  MutexLock lock(&mu_);
  uint64_t freed = 0;
  while (freed < bytes) {
    Result<uint64_t> one = pool_.ReleaseOne(std::nullopt);
    if (!one.ok() || *one == 0) break;
    freed += *one;
  }
  return freed;
}

uint64_t ParityPieceFiles::pool_bytes() const {
  MutexLock lock(&mu_);
  return pool_.bytes();
}

}  // namespace tierckpt::agent
