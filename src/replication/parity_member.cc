// parity_member.cc — see parity_member.h.
#include "replication/parity_member.h"

#include <algorithm>

#include "common/log.h"

namespace tierckpt::agent {

std::string_view ParityStepState::Name(Kind k) {
  switch (k) {
    case Kind::kPending:
      return "pending";
    case Kind::kRedundant:
      return "redundant";
    case Kind::kIncomplete:
      return "incomplete";
    case Kind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

ParityMember::ParityMember(ParitySender sender, MemoryTier* tier, WorkQueue* queue,
                           std::chrono::milliseconds wait)
    : sender_(std::move(sender)), tier_(tier), queue_(queue), wait_(wait) {}

void ParityMember::AdoptCommitted() {
  const std::vector<StepInfo> steps = tier_->ListSteps("");
  MutexLock l(&mu_);
  for (const StepInfo& s : steps) {
    if (!s.committed) continue;
    steps_.try_emplace(Key{s.ns, s.step}, ParityStepState{s.ns, s.step, ParityStepState::Kind::kUnknown,
                                                          "committed before this agent started; asked again "
                                                          "after its next commit"});
  }
}

void ParityMember::Committed(std::string_view ns, uint64_t step) {
  {
    MutexLock l(&mu_);
    steps_[Key{std::string(ns), step}] =
        ParityStepState{std::string(ns), step, ParityStepState::Kind::kPending, "folding on the holders"};
  }
  const bool queued = queue_->Submit([this, ns = std::string(ns), step] {
    Send(ns, step);
    DropRetired();
    Recheck(Key{ns, step});
  });
  if (!queued) {
    MutexLock l(&mu_);
    const Key key{std::string(ns), step};
    ParityStepState& s = steps_[key];
    s.kind = ParityStepState::Kind::kIncomplete;
    s.detail = "the agent is stopping; the parity was not sent";
    failed_[key] = Aborted("the parity of " + StepLabel(ns, step) +
                           " was not sent: the agent is stopping; the step "
                           "is committed in this node's memory, but not redundant");
    sent_.SignalAll();
  }
}

Status ParityMember::AwaitSent(std::string_view ns, uint64_t step) {
  const Key key{std::string(ns), step};
  const auto deadline = std::chrono::steady_clock::now() + wait_ + kParityWaitSlice;
  {
    MutexLock l(&mu_);
    for (;;) {
      auto it = steps_.find(key);
      if (it == steps_.end()) {
        return Aborted("the parity of " + StepLabel(ns, step) +
                       " was dropped (the step deleted) while its commit "
                       "waited for it (--parity-ack all)");
      }
      if (it->second.kind == ParityStepState::Kind::kRedundant) return Status::Ok();
      if (it->second.kind != ParityStepState::Kind::kPending) {
        auto f = failed_.find(key);
        return f != failed_.end() ? f->second : FailedPrecondition(it->second.detail);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        it->second.detail = "folding on the holders; the commit stopped waiting after " +
                            std::to_string((wait_ + kParityWaitSlice).count()) + " ms (--parity-ack all)";
        break;
      }
      sent_.WaitUntil(deadline);
    }
  }
  std::string holders;
  for (const std::string& h : sender_.group().parity) holders += (holders.empty() ? "" : ", ") + h;
  Log(LogLevel::kWarn, "parity_ack_timeout")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("group", sender_.group().index)
      .Kv("holders", holders)
      .Kv("ms", static_cast<uint64_t>((wait_ + kParityWaitSlice).count()));
  return Timeout("the parity of " + std::string(ns) + " step " + std::to_string(step) + " of node " +
                 sender_.node_id() + " (group " + std::to_string(sender_.group().index) +
                 ") was not sealed by its holders " + holders + " within " +
                 std::to_string((wait_ + kParityWaitSlice).count()) +
                 " ms (--peer-timeout-ms and one more second); the step is committed in this node's memory, "
                 "but not redundant until every member's part is folded on every holder (`tierckpt agent "
                 "status` shows its state)");
}

void ParityMember::Stop() {
  MutexLock l(&mu_);
  stopping_ = true;
}

void ParityMember::Send(const std::string& ns, uint64_t step) {
  using std::chrono::milliseconds;
  const auto deadline = std::chrono::steady_clock::now() + wait_;
  ParityReport report;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    report = sender_.Ask(ns, step, std::clamp(left, milliseconds(0), kParityWaitSlice));
    const bool failed = std::any_of(report.holders.begin(), report.holders.end(),
                                    [](const ParityAck& a) { return !a.status.ok(); });
    if (report.redundant() || failed || std::chrono::steady_clock::now() >= deadline) break;
    MutexLock l(&mu_);
    if (stopping_) break;
  }
  Log(report.redundant() ? LogLevel::kInfo : LogLevel::kWarn, "parity_sent")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("group", sender_.group().index)
      .Kv("redundant", report.redundant())
      .Kv("holders", report.Describe());
  const Status st = sender_.Outcome(ns, step, report);
  const Key key{ns, step};
  MutexLock l(&mu_);
  sent_.SignalAll();
  auto it = steps_.find(key);
  if (it == steps_.end()) return;  // dropped meanwhile
  it->second.kind = st.ok() ? ParityStepState::Kind::kRedundant : ParityStepState::Kind::kIncomplete;
  it->second.detail = st.ok() ? "every holder sealed the group" : st.message();
  if (st.ok()) {
    failed_.erase(key);
  } else {
    failed_[key] = st;
  }
}

void ParityMember::DropRetired() {
  std::vector<Key> retired;
  {
    MutexLock l(&mu_);
    for (const auto& [key, state] : steps_) retired.push_back(key);
  }
  // HasCommitted takes the tier's lock: asked outside mu_.
  std::erase_if(retired, [this](const Key& k) { return tier_->HasCommitted(k.first, k.second); });
  for (const Key& k : retired) {
    Status st = Drop(k.first, k.second);
    if (!st.ok()) Log(LogLevel::kWarn, "parity_retire_failed").Kv("ns", k.first).Kv("step", k.second).Err(st);
  }
}

void ParityMember::Recheck(const Key& except) {
  std::vector<Key> redundant;
  {
    MutexLock l(&mu_);
    if (stopping_) return;
    for (const auto& [key, state] : steps_) {
      const bool ask = state.redundant() || state.kind == ParityStepState::Kind::kUnknown;
      if (key != except && ask) redundant.push_back(key);
    }
  }
  for (const Key& k : redundant) {
    const ParityReport report = sender_.Ask(k.first, k.second, std::chrono::milliseconds(0));
    if (report.redundant()) {
      MutexLock l(&mu_);
      auto it = steps_.find(k);
      if (it != steps_.end() && it->second.kind == ParityStepState::Kind::kUnknown) {
        it->second.kind = ParityStepState::Kind::kRedundant;
        it->second.detail = "every holder sealed the group (asked again after this agent started)";
      }
      continue;
    }
    const Status st = sender_.Outcome(k.first, k.second, report);
    {
      MutexLock l(&mu_);
      auto it = steps_.find(k);
      if (it == steps_.end() || it->second.kind == ParityStepState::Kind::kPending ||
          it->second.kind == ParityStepState::Kind::kIncomplete) {
        continue;  // dropped, or being sent again, meanwhile: nothing was lost
      }
      it->second.kind = ParityStepState::Kind::kIncomplete;
      it->second.detail = "asked again after a later commit: " + st.message();
    }
    Log(LogLevel::kWarn, "parity_lost")
        .Kv("ns", k.first)
        .Kv("step", k.second)
        .Kv("group", sender_.group().index)
        .Kv("holders", report.Describe());
  }
}

Status ParityMember::Drop(std::string_view ns, uint64_t step) {
  Result<std::vector<std::string>> dropped = sender_.DropParity(ns, step);
  if (!dropped.ok()) return dropped.status();
  MutexLock l(&mu_);
  steps_.erase(Key{std::string(ns), step});
  failed_.erase(Key{std::string(ns), step});
  sent_.SignalAll();
  return Status::Ok();
}

Result<ParityStepState> ParityMember::State(std::string_view ns, uint64_t step) const {
  MutexLock l(&mu_);
  auto it = steps_.find(Key{std::string(ns), step});
  if (it == steps_.end()) {
    return NotFound("no parity state for " + StepLabel(ns, step) + " on this node (not committed here)");
  }
  return it->second;
}

ParityStatsInput ParityMember::Stats() const {
  ParityStatsInput s;
  s.scheme = "rs:" + std::to_string(sender_.layout().k) + "+" + std::to_string(sender_.layout().m);
  s.group = sender_.group().index;
  s.index = sender_.index();
  s.holders = sender_.group().parity;
  MutexLock l(&mu_);
  for (const auto& [key, state] : steps_) s.steps.push_back(state);
  return s;
}

}  // namespace tierckpt::agent
