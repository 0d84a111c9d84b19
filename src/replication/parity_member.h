// parity_member.h — a data member's side of the erasure-coded memory tier in
// the agent (issue 23, decision 135): after each memory commit of this node's
// part it asks its group's M parity holders to fold the part
// (ParitySender::MakeRedundant, on a queue of its own; the commit waits for
// the outcome only with --parity-ack all, AwaitSent), and remembers, per
// step, whether the step is redundant: only when every holder answered that
// the group is sealed (every member's part folded and verified there, pieces
// and record written). Anything else is reported as not redundant, with why.
//
// "Redundant" means a lost part of the step can be rebuilt from its group's
// survivors (RestoreFromParity, decisions 139 and 141); with --replicas 1
// (accepted since decision 142) a step is protected on peers only once it
// is redundant, which the commit waits for with --parity-ack all (decision
// 146) and not with none (decision 136).
//
// Retention and deletes reach the holders: Drop asks them to forget the
// step's parity of this node's group (DropParity, decision 131), and after
// each send every remembered step this node's tier no longer holds committed
// (evicted by retention or the budget, deleted) is dropped the same way.
// Steps committed before a restart are remembered as "unknown" (reported not
// redundant) so that they are dropped too, until the next commit asks again.
// A step reported redundant is asked again after each later commit of this
// node (Recheck), so a holder that lost its pieces is noticed at the next
// save, not never.
//
// With --parity-ack all (decision 146) a commit also waits for its own
// send's outcome (AwaitSent): the send still runs on the queue, beside the
// replicas, and the committing thread waits on a condition variable (mu_
// released), bounded by the same wait plus one slice.
//
// A send waits for its group in slices of at most kParityWaitSlice (each a
// FoldParity asked again, which a holder answers from its state without
// reading the part again), so Stop ends it within one slice rather than
// after the whole wait.
//
// Thread-safe: the state map under mu_; sends and drops run without it.
// The sender's replicator, the tier and the queue must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/work_queue.h"
#include "replication/parity_sender.h"
#include "replication/parity_state.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {

inline constexpr std::chrono::milliseconds kParityWaitSlice{1000};

class ParityMember {
 public:
  // wait: how long a holder may wait for the rest of the group before it
  // answers (the members of a group commit the same step at about the same
  // time). tier: this node's memory tier (retention is read from it).
  ParityMember(ParitySender sender, MemoryTier* tier, WorkQueue* queue, std::chrono::milliseconds wait);
  ParityMember(const ParityMember&) = delete;
  ParityMember& operator=(const ParityMember&) = delete;

  // Remembers every step the tier holds committed now as kUnknown (after a
  // restart), so retention drops their parity too. Call once at start.
  void AdoptCommitted();
  // After the memory commit of this node's part of (ns, step): the step is
  // kPending, and a send is queued; its outcome becomes kRedundant or
  // kIncomplete. Then every remembered step the tier no longer holds is
  // dropped from the holders, and every other step still reported
  // redundant is asked again without waiting (Recheck). Returns at once.
  void Committed(std::string_view ns, uint64_t step);
  // With --parity-ack all, after Committed(ns, step) on the committing
  // thread: blocks, holding no lock (the condition variable releases mu_),
  // until that send has its outcome or wait + kParityWaitSlice passed.
  // Ok when every holder sealed the group (kRedundant). Otherwise the step
  // stays committed in this node's memory and the error says it is not
  // redundant: the send's (ParitySender::Outcome: each holder's answer,
  // the first failure's code, else kUnavailable; the step is kIncomplete),
  // or, when the holders did not answer in time, kTimeout (as a replica
  // that does not answer under --replica-ack all) naming them and the wait
  // (logged as parity_ack_timeout; the step stays kPending, its detail
  // saying the commit stopped waiting, until the send ends). kAborted when
  // the step was dropped meanwhile.
  Status AwaitSent(std::string_view ns, uint64_t step) EXCLUDES(mu_);
  // Asks the group's holders to forget (ns, step) and forgets it here (a
  // delete). The error names each holder that failed (the state stays, so a
  // delete run again asks again).
  Status Drop(std::string_view ns, uint64_t step);
  // The state of (ns, step); kNotFound when never committed here this run
  // nor adopted.
  Result<ParityStepState> State(std::string_view ns, uint64_t step) const;
  // For status.
  ParityStatsInput Stats() const;
  // This node's group, layout and requests (a rebuild of its part from the
  // group's survivors: parity_restore.h).
  const ParitySender& sender() const { return sender_; }
  // How long AwaitSent waits at most (wait + kParityWaitSlice).
  std::chrono::milliseconds await_limit() const { return wait_ + kParityWaitSlice; }
  // Blocks until every queued send has run (tests).
  void Drain() { queue_->Drain(); }
  // Ends the sends in flight within one slice of their wait (at shutdown,
  // before the queue is stopped): their steps stay as the last answer left
  // them (incomplete unless redundant).
  void Stop();

 private:
  using Key = std::pair<std::string, uint64_t>;
  void Send(const std::string& ns, uint64_t step);
  // Drops the parity of each remembered step the tier no longer holds committed.
  void DropRetired();
  // Asks the holders again (wait 0) about each remembered step other than
  // `except` that is reported redundant or unknown (adopted at start: it
  // becomes redundant when every holder still has the group sealed, else
  // kIncomplete). For a redundant step, a holder that lost the group since
  // (restarted and found a piece damaged, its memory gone) makes it
  // kIncomplete (and, as any fold, has that holder fold this part again).
  // "Redundant" is thus as of this node's last commit.
  void Recheck(const Key& except);

  // Const after construction.
  const ParitySender sender_;
  MemoryTier* const tier_;
  WorkQueue* const queue_;
  const std::chrono::milliseconds wait_;

  mutable Mutex mu_;
  std::map<Key, ParityStepState> steps_ GUARDED_BY(mu_);
  // The error of each step's last send that did not make it redundant
  // (what AwaitSent answers); erased with the step.
  std::map<Key, Status> failed_ GUARDED_BY(mu_);
  // Signalled whenever a step leaves kPending or is forgotten (AwaitSent).
  CondVar sent_{&mu_};
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace tierckpt::agent
