// fs_store.h — the ObjectStore on a local directory or an NFS mount: the step
// layout (layout_store.h) over an FsBlobStore (fs_blob_store.h).
//
// Layout under the base directory (docs/format.md):
//     <base>/<ns>/step_<10 digits>/<object name>      one file per object;
//                                                     '/' in names = subdirs
//     <base>/<ns>/step_<10 digits>/_tierckpt_manifest.json    written last
// A step directory is what stock DCP FileSystemReader loads.
//
// Durability (options.fsync): every object file is fsynced at put (written
// as "<path>.tmp.<pid>.<n>" and renamed into place); CommitStep fsyncs the
// step's directories up to the base, then links the manifest in exclusively
// and fsyncs its directory; DeleteStep removes the manifest and fsyncs the
// step directory before removing the rest. SweepUncommitted also removes, in
// committed steps, leftover "*.tmp.<pid>.<n>" files the manifest does not
// list. Reads of whole objects into a file use sendfile(2).
//
// Thread safety and errors: layout_store.h; file-system errors name the path.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/fs_blob_store.h"
#include "store/layout_store.h"

namespace tierckpt {

struct FsStoreOptions {
  // fsync every object file at put, and the step's directories before the
  // manifest is linked in (and the manifest with its directory after), so a
  // committed step survives power loss. Default true: durable tiers need it.
  // Turn off only for scratch stores (tests, tmpfs) where it buys nothing.
  bool fsync = true;
};

class FsObjectStore final : public LayoutStore {
 public:
  // Opens the store rooted at `base` (FsBlobStore::Open's rules: absolute,
  // created if missing; kInvalidArgument / kFailedPrecondition otherwise).
  static Result<std::unique_ptr<FsObjectStore>> Open(std::string_view base, FsStoreOptions options = {});

  const std::string& base() const { return fs_->base(); }

 private:
  explicit FsObjectStore(std::shared_ptr<FsBlobStore> fs) : LayoutStore(fs), fs_(std::move(fs)) {}

  const std::shared_ptr<FsBlobStore> fs_;
};

}  // namespace tierckpt
