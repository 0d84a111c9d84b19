// sweeper.h — releases mappings of deleted shared-memory files while the
// client is idle.
//
// The agent may unlink segments at any time (to free budget for another
// writer, on prune or delete). Their tmpfs pages stay allocated as long as
// this process maps them, so a client that saves and then trains for an hour
// without calling the agent would pin memory the agent believes is free.
// A Sweeper runs MappingCache::SweepDeleted() every `interval` on its own
// thread, from construction until destruction (which joins the thread).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "client/mapping_cache.h"
#include "common/mutex.h"

namespace tierckpt::client {

class Sweeper {
 public:
  Sweeper(std::shared_ptr<MappingCache> cache, std::chrono::milliseconds interval);
  ~Sweeper();
  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

 private:
  void Run();

  // Const after construction.
  const std::shared_ptr<MappingCache> cache_;
  const std::chrono::milliseconds interval_;

  Mutex mu_;
  CondVar cv_{&mu_};
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tierckpt::client
