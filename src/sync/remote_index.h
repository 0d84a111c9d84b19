// remote_index.h — the modification times `tierckpt sync` records on the
// remote, so that a pull gives each file the time it had where it was
// written (the Hugging Face Trainer orders checkpoints by modification time;
// decision 89, docs/sync.md "Modification times").
//
// One object per instance in the remote's state directory, which is never
// mirrored (IsSyncOwn): "<remote>/.tierckpt-sync/index" without an instance,
// "<remote>/.tierckpt-sync/index-<instance>" with one. Format (text):
//   tierckpt-sync-index 1\n                 magic and version
//   <size> <mtime ns> <path>\n ...          one line per file, paths relative
//                                           to the instance's scope
// The path rule (blob_store.h) keeps '\n' out of paths. An entry holds for
// the remote file of that size only: a file replaced since by one of another
// size gets no time from it.
//
// Old remotes have no index: they load as empty, and a pull gives their
// files the time of the pull (no error). A header of another version or a
// damaged line is reported in *warning and skipped in the same way. The index
// is written whole (a PUT; a temporary and rename on a filesystem remote), so
// a reader sees one version of it. Not thread-safe: the caller serializes.
#pragma once

#include <map>
#include <string>

#include "sync/blob_store.h"
#include "sync/journal.h"
#include "tierckpt/status.h"

namespace tierckpt::sync {

// path (relative to the instance's scope) → the version pushed: its size on
// the remote and the local modification time it had when it was pushed.
using RemoteIndex = std::map<std::string, FileVersion>;

// The index object's path on the remote for instance ("" for none).
std::string IndexPath(const std::string& instance);

// Parses an index; lines it cannot read are skipped and counted in
// *warning (set, when not empty, to a sentence naming what was skipped).
RemoteIndex ParseIndex(std::string_view text, const std::string& where, std::string* warning);
std::string EncodeIndex(const RemoteIndex& index);

// Reads the index of instance from remote: empty when it is absent (a remote
// written before sync recorded times). Errors: the store's (unavailable...),
// with the index's path as context.
Result<RemoteIndex> LoadIndex(BlobStore& remote, const std::string& instance, std::string* warning);
// Writes it whole, replacing the previous one.
Status StoreIndex(BlobStore& remote, const std::string& instance, const RemoteIndex& index);

}  // namespace tierckpt::sync
