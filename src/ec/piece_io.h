// piece_io.h — where the parity tier's byte layer reads a member's objects
// and pieces from, and where a rebuild writes a lost member's objects to
// (issue 23, decision 123). Interfaces, so the accumulator and the rebuild
// run the same over tmpfs files, peer streams and memory (tests).
//
// ObjectSource: the objects of one part, by name. PieceSource: one parity
// piece's bytes. ObjectSink: a rebuilt part's objects. Reads and writes come
// in bounded chunks (the callers' chunk size), in increasing offset order
// within an object or piece, so a streaming implementation may rely on it.
//
// Thread safety: one caller at a time per instance (the implementations
// here are thread-compatible).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt::ec {

class ObjectSource {
 public:
  virtual ~ObjectSource() = default;
  // Fills buf with len bytes of object `name` from `offset`. An error
  // (kNotFound for an unknown object, kIoError for a short object or a
  // failed read) names the object and what failed.
  virtual Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) = 0;
  // Optional (decision 149): the bytes Read would copy, in place, valid
  // until the next call on this source; nullptr (Ok) when this source keeps
  // no such bytes, and the caller Reads instead. Errors as Read's.
  virtual Result<const uint8_t*> View(std::string_view name, uint64_t offset, size_t len);
  // Optional (decision 149): the checksum ("xxh3-64:<16 hex>") the whole
  // object's bytes were verified to have on their way here (a peer stream
  // checked on arrival against the sender's), once they are in hand (after
  // a Read or View of the object); "" when this source did not verify them.
  // A caller expecting that very checksum need not hash the bytes again. A
  // source that vouches for an object serves it from those verified bytes,
  // so its later reads of the object fail only past the object's end.
  virtual std::string VerifiedChecksum(std::string_view name) const;
};

class PieceSource {
 public:
  virtual ~PieceSource() = default;
  // Fills buf with len bytes of the piece from `offset`; an error names the
  // piece and what failed.
  virtual Status Read(uint64_t offset, uint8_t* buf, size_t len) = 0;
};

class ObjectSink {
 public:
  virtual ~ObjectSink() = default;
  // Writes bytes at `offset` of object `name`. Every object gets at least
  // one call (one with no bytes for an empty object). A rebuild that fails
  // may have written some bytes: they mean nothing and the caller discards
  // them; a rebuild that retries writes every object again from offset 0.
  virtual Status Write(std::string_view name, uint64_t offset, std::span<const uint8_t> bytes) = 0;
};

// Objects held in memory (tests, and parts that arrived in buffers).
class MemoryObjectSource : public ObjectSource {
 public:
  void Put(std::string name, std::vector<uint8_t> bytes) { objects_[std::move(name)] = std::move(bytes); }
  // The stored bytes, for a test to corrupt; nullptr when absent.
  std::vector<uint8_t>* Find(std::string_view name);
  Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) override;
  Result<const uint8_t*> View(std::string_view name, uint64_t offset, size_t len) override;

 private:
  std::map<std::string, std::vector<uint8_t>, std::less<>> objects_;
};

// One piece held in memory; the span must outlive the source.
class MemoryPieceSource : public PieceSource {
 public:
  explicit MemoryPieceSource(std::span<const uint8_t> bytes, std::string what = "parity piece")
      : bytes_(bytes), what_(std::move(what)) {}
  Status Read(uint64_t offset, uint8_t* buf, size_t len) override;

 private:
  std::span<const uint8_t> bytes_;
  std::string what_;
};

// Objects written to memory (tests).
class MemoryObjectSink : public ObjectSink {
 public:
  Status Write(std::string_view name, uint64_t offset, std::span<const uint8_t> bytes) override;
  const std::map<std::string, std::vector<uint8_t>, std::less<>>& objects() const { return objects_; }

 private:
  std::map<std::string, std::vector<uint8_t>, std::less<>> objects_;
};

// Objects of a part as open files (a memory tier's tmpfs files): owns one fd
// per object and reads them with pread, so it never maps or copies a part.
class FdObjectSource : public ObjectSource {
 public:
  // `path` is for error messages. kAlreadyExists when name was added.
  Status Add(std::string name, UniqueFd fd, std::string path);
  Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) override;

 private:
  struct File {
    UniqueFd fd;
    std::string path;
  };
  std::map<std::string, File, std::less<>> files_;
};

// A piece held in one open file (a parity holder's piece on tmpfs).
class FdPieceSource : public PieceSource {
 public:
  FdPieceSource(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Status Read(uint64_t offset, uint8_t* buf, size_t len) override;

 private:
  UniqueFd fd_;
  std::string path_;
};

}  // namespace tierckpt::ec
