// read_path.h — the one place that decides which tier serves a read: "open
// object X of committed step S, verified". Handlers decode the request and
// call Open; no caller chooses a tier (leveldb's DBImpl::Get).
//
// Open(ns, step, name) tries, in this fixed order:
//   1. this node's memory tier;
//   2. when memory lacks the step: the holders of this node's replicas, then
//      (with --redundancy rs:K+M) this node's part rebuilt from its group's
//      survivors (Cluster::RestoreFromParity; logged `parity_restore_failed`
//      with the group, how many pieces are gone and M when more than M are),
//      then the durable tier, restoring the step into memory (every object
//      verified on the way in) and serving it from there;
//   3. when the step spans nodes and this node's part lacks the object: the
//      copy of the member's part this node keeps (replicas/<member>), fetched
//      first from the member or its holders when absent (docs/multinode.md);
//   4. when neither the member nor its holders can serve it (all gone, or
//      across a partition): that member's part from the durable tier, when
//      the durable copy is this save of the step, restored (verified) into
//      the same copy (decision 120).
//
// Open with repair = true is what a client asks when the copy it was handed
// failed its checksum. The client's word alone is never trusted: the copy
// Open would hand out is re-hashed here. One that matches its manifest is
// handed out again (repaired stays ""). A corrupt one is dropped, this
// node's copy only (the holders' replicas are verified copies to restore
// from), and the step is brought back from the next tier as in 2 (another
// member's part: fetched again as in 3); `repaired` then says which copy was
// corrupt and where the step was read from instead. When no other tier holds
// the step the answer is kCorruption naming the object and saying so, and
// the corrupt copy stays (Verify and `tierckpt rm` still see it).
//
// Concurrent repairs of one step are serialized: the first re-hashes, drops
// and restores; the others wait for it, then re-hash the fresh copy (which
// matches) and read it, so no reader fails because another was repairing.
// Plain readers meanwhile get the old copy (its files live while mapped) or
// wait in MemoryTier::Restore for the restore under way.
//
// The holders and the other members' parts are the cluster's
// (replication/cluster.h): on a single node it has neither, and the order
// above is memory, then durable.
//
// Thread safety: thread-safe. The collaborators are shared with the rest of
// the agent and must outlive the ReadPath.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "common/mutex.h"
#include "replication/cluster.h"
#include "store/object_store.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {

struct ReadPathDeps {
  std::string node_id;
  MemoryTier* tier = nullptr;        // this node's memory tier (required)
  ObjectStore* store = nullptr;      // the durable tier; nullptr without one
  // The replica holders and the other members' parts (a single node has none).
  Cluster* cluster = SingleNodeCluster();
};

// An object handed out by ReadPath::Open.
struct ServedObject {
  OpenedObject object;
  // "" unless a repair replaced a corrupt copy: what was found and where the
  // step was read from instead (for the client's log).
  std::string repaired;
};

// kNotFound "step ns/step is in no tier; `tierckpt ls ns` lists what exists".
Status StepInNoTier(std::string_view ns, uint64_t step);

class ReadPath {
 public:
  explicit ReadPath(ReadPathDeps deps) : d_(std::move(deps)) {}
  ReadPath(const ReadPath&) = delete;
  ReadPath& operator=(const ReadPath&) = delete;

  // The object, from the first tier in the order above that holds it; with
  // repair, re-hashed and replaced first if corrupt. Errors: kNotFound when
  // no tier holds the step or the object (the message names what was tried);
  // kCorruption for a corrupt copy no other tier can replace, or a step whose
  // other copies failed verification too; kUnavailable while shutting down.
  Result<ServedObject> Open(const std::string& ns, uint64_t step, const std::string& name, bool repair);

  // Brings a step missing from memory back from the replica holders, then
  // its group's parity, then the durable tier (logging when the holders had
  // nothing and when the parity could not rebuild it). On success *from (if
  // not null) names where it came from; the error names every tier tried.
  Status RestoreStep(const std::string& ns, uint64_t step, std::string* from = nullptr);

 private:
  // A copy found by OpenAnyTier: from this node's tier (member "") or the
  // copy of member's part.
  struct Found {
    OpenedObject object;
    MemoryTier* tier = nullptr;
    std::string member;
    bool restored = false;  // brought in (and verified) by this call
  };
  // A step not committed in memory is restored under the step's repair turn
  // (taken here unless turn_held), so a reader that meets a repair between
  // its drop and its restore waits for it and reads the restored copy.
  Result<Found> OpenAnyTier(const std::string& ns, uint64_t step, const std::string& name, bool turn_held);
  // not_here: why this node's part does not serve the object, the answer
  // when the step does not span nodes.
  Result<Found> OpenFromOtherParts(const std::string& ns, uint64_t step, const std::string& name,
                                   const Status& not_here);
  // Another member's part of the step `own` is part of, from the durable
  // tier when neither the member nor its holders could serve it: the part
  // restored (every object verified) into this node's copy of that member's
  // parts. Refused when the durable copy is another save of the step number.
  Result<Found> OpenFromDurablePart(const Manifest& own, const std::string& name);
  // The durable manifest of the step `own` (this node's part) is part of,
  // when it is this save of it (it holds own's objects with their sizes and
  // checksums); kFailedPrecondition naming the object that differs.
  Result<Manifest> DurableOfThisSave(const Manifest& own);
  // Restores member's part of own's step from the durable tier into copy
  // (this node's copy of member's parts); the caller checked the durable copy
  // with DurableOfThisSave first.
  Status RestorePartFromDurable(MemoryTier* copy, const Manifest& own, const std::string& member);
  Result<ServedObject> Repair(const std::string& ns, uint64_t step, const std::string& name);
  // Replaces the corrupt copy `found` ("damage" says how it is corrupt).
  Result<ServedObject> Replace(const std::string& ns, uint64_t step, const std::string& name,
                               const Found& found, const std::string& damage);
  // A step restored from a replica holder or rebuilt from parity is
  // published as restores are (durable); it stays so only if the durable
  // tier holds this save of it, else it goes back to never persisted, so
  // that status, `ls` and verify do not report a durable copy that is not
  // there.
  void DurableOnlyIfPersisted(const std::string& ns, uint64_t step);
  // "" when another tier holds this node's (ns, step); else why none does.
  std::string WhyNoOtherCopy(const std::string& ns, uint64_t step);

  // Serializes repairs of one step (RAII turn).
  class RepairTurn;

  // Const after construction.
  const ReadPathDeps d_;

  Mutex mu_;
  CondVar cv_{&mu_};  // a repair of a step ended
  std::set<std::pair<std::string, uint64_t>> repairing_ GUARDED_BY(mu_);
};

}  // namespace tierckpt::agent
