// mem_store.h — an ObjectStore held in process memory: the step layout
// (layout_store.h) over a MemBlobStore (mem_blob_store.h), so it has the
// exact semantics of the file and S3 stores (same validation, commit rule,
// error codes) without a disk: unit tests use it, and FaultInjectingStore
// wraps it to script failures.
//
// "mem://name" URLs (OpenObjectStore) resolve through a process-wide
// registry: the same name yields the same instance for the life of the
// process, until ForgetNamedMemStore(name).
//
// Thread safety and errors: layout_store.h; messages name "mem://<name>".
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/layout_store.h"
#include "store/mem_blob_store.h"

namespace tierckpt {

class MemObjectStore final : public LayoutStore {
 public:
  // `name` only shows in Describe() ("mem://<name>") and messages.
  explicit MemObjectStore(std::string name = "anonymous")
      : LayoutStore(std::make_shared<MemBlobStore>(std::move(name))) {}
};

// The process-wide MemObjectStore called `name` ([A-Za-z0-9_.-]{1,128}),
// created on first use. kInvalidArgument for other names.
Result<std::shared_ptr<MemObjectStore>> NamedMemStore(std::string_view name);
// Drops `name` from the registry; holders keep their instance, the next
// NamedMemStore(name) creates a fresh, empty one. No-op if absent.
void ForgetNamedMemStore(std::string_view name);

}  // namespace tierckpt
