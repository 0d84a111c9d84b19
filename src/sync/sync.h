// sync.h — one pass of `tierckpt sync`: a local directory and its remote
// (blob_store.h) made to agree, as a training job's checkpoint directory is
// mirrored to S3 (seed 003; docs/sync.md).
//
// SyncOnce, in order:
//   pull  every remote file (below the instance prefix) absent locally is
//         downloaded (temporary name, then rename: the trainer never sees a
//         partial file), with the modification time the remote's index
//         (remote_index.h) recorded for it at push, or the time of the pull
//         where it has none (an older remote). Then each directory the pull
//         wrote into (the local root excepted) gets the newest time among
//         what it holds. A local file of another size is kept (the trainer
//         wrote it; push uploads it) and reported as a conflict.
//   push  every local regular file absent remotely, or of another size, or
//         rewritten since the journal's record (journal.h), is uploaded
//         (multipart above the S3 threshold); one that changed while it was
//         uploaded is uploaded again (3 tries, then an error). Files named
//         *.tierckpt-partial* (our own temporaries) are skipped; other names
//         that break the path rule are reported and skipped. Then the
//         index is rewritten (when it changed): each pushed file with its
//         local modification time; entries of files the remote no longer
//         holds at that size dropped; a file the journal knows as on the
//         remote but the index lacks is recorded with its local time.
// Never deletes anything, local or remote: a crash or an empty local
// directory at start can therefore never remove remote data. Mirroring
// deletions needs the journal of the watch mode (not built yet).
//
// Instance prefix: with options.instance = "host-a", remote paths are
// "host-a/<path>", and only those are pulled: instances never overwrite or
// download each other's files ("run-1" never matches "run-10/...").
//
// Files move options.concurrency at a time (many small files are bound by
// round trips). Comparison is by path and size: checkpoint files are written
// once. The first error stops the pass (files in flight finish) and names the
// file and the store. progress is called from the worker threads, one call at
// a time. One pass at a time per directory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sync/blob_store.h"
#include "tierckpt/status.h"

namespace tierckpt::sync {

struct SyncOptions {
  std::string local;     // the directory (created if missing)
  std::string instance;  // "" or one path component of [A-Za-z0-9_.-]
  bool pull = true;
  bool push = true;
  int concurrency = 8;   // files moved at once (large files also split into parallel parts)
};

struct SyncReport {
  size_t pulled = 0, pushed = 0, unchanged = 0;
  uint64_t pulled_bytes = 0, pushed_bytes = 0;
  std::vector<std::string> conflicts;    // local and remote sizes differ; the local file wins
  std::vector<std::string> bad_names;    // local or remote names not mirrored (path rule)
  std::vector<std::string> warnings;     // e.g. a damaged index: pulled files got the time of the pull
};

// Called after each file moved: (what: "pull"|"push", path, bytes).
using SyncProgress = std::function<void(std::string_view what, const std::string& path, uint64_t bytes)>;

Result<SyncReport> SyncOnce(BlobStore& remote, const SyncOptions& options, const SyncProgress& progress = {});

}  // namespace tierckpt::sync
