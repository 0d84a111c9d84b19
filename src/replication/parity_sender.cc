// parity_sender.cc — see parity_sender.h.
#include "replication/parity_sender.h"

#include <algorithm>
#include <thread>

#include "common/log.h"

namespace tierckpt::agent {
namespace {

// fn(holder) for each holder, in parallel; the results in holder order.
template <typename T, typename Fn>
std::vector<T> EachHolder(const std::vector<std::string>& holders, Fn fn) {
  std::vector<T> out(holders.size(), T(Internal("not asked")));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < holders.size(); ++i) {
    threads.emplace_back([&, i] { out[i] = fn(holders[i]); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace

bool ParityReport::redundant() const {
  if (holders.empty()) return false;
  return std::all_of(holders.begin(), holders.end(),
                     [](const ParityAck& a) { return a.status.ok() && a.state.sealed; });
}

std::string ParityReport::Describe() const {
  std::string out;
  for (const ParityAck& a : holders) {
    out += (out.empty() ? "" : "; ") + a.holder + ": ";
    if (!a.status.ok()) {
      out += a.status.ToString();
    } else if (a.state.sealed) {
      out += "sealed";
    } else {
      out += std::to_string(a.state.folded) + " of " + std::to_string(a.state.members) + " folded";
    }
  }
  return out;
}

Result<ParitySender> ParitySender::Create(Replicator* replicator, cluster::ParityLayout layout,
                                          std::string node_id) {
  const cluster::ParityGroup* g = layout.GroupOf(node_id);
  if (g == nullptr) {
    return InvalidArgument("node " + node_id + " has no group in the rs:" + std::to_string(layout.k) + "+" +
                           std::to_string(layout.m) + " layout; it must be in the peer list (--peers)");
  }
  const uint32_t index =
      static_cast<uint32_t>(std::find(g->data.begin(), g->data.end(), node_id) - g->data.begin());
  const uint32_t group = g->index;
  return ParitySender(replicator, std::move(layout), std::move(node_id), group, index);
}

ParityReport ParitySender::SendParity(std::string_view ns, uint64_t step, std::chrono::milliseconds wait) const {
  ParityReport report = Ask(ns, step, wait);
  Log(report.redundant() ? LogLevel::kInfo : LogLevel::kWarn, "parity_sent")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("group", group_)
      .Kv("redundant", report.redundant())
      .Kv("holders", report.Describe());
  return report;
}

ParityReport ParitySender::Ask(std::string_view ns, uint64_t step, std::chrono::milliseconds wait) const {
  peer::FoldParityRequest r;
  r.ns = std::string(ns);
  r.step = step;
  r.k = layout_.k;
  r.m = layout_.m;
  r.group = group_;
  r.index = index_;
  r.wait_ms = static_cast<uint32_t>(std::clamp<int64_t>(wait.count(), 0, peer::kMaxParityWaitMs));
  const std::string payload = r.Encode();
  // The holder pulls the part before it answers, then may wait for the
  // group: as generous as a replica's pull, plus the wait.
  const peer::Millis reply_timeout(3600 * 1000 + static_cast<int64_t>(r.wait_ms));
  const std::vector<std::string>& holders = group().parity;
  std::vector<Result<std::string>> answers = EachHolder<Result<std::string>>(holders, [&](const std::string& h) {
    return replicator_->Call(h, PeerMsg::kFoldParity, payload, PeerMsg::kParityFolded, reply_timeout);
  });
  ParityReport report;
  for (size_t i = 0; i < holders.size(); ++i) {
    ParityAck ack{holders[i], Status::Ok(), {}};
    if (!answers[i].ok()) {
      ack.status = answers[i].status();
    } else {
      Result<peer::ParityFolded> a = peer::ParityFolded::Decode(*answers[i]);
      if (!a.ok()) {
        ack.status = a.status().WithContext("the answer of node " + holders[i]);
      } else {
        ack.state = ParityFoldState{a->folded, a->members, a->sealed};
      }
    }
    report.holders.push_back(std::move(ack));
  }
  return report;
}

Status ParitySender::MakeRedundant(std::string_view ns, uint64_t step, std::chrono::milliseconds wait) const {
  return Outcome(ns, step, SendParity(ns, step, wait));
}

Status ParitySender::Outcome(std::string_view ns, uint64_t step, const ParityReport& report) const {
  if (report.redundant()) return Status::Ok();
  Code code = Code::kUnavailable;
  for (const ParityAck& a : report.holders) {
    if (!a.status.ok()) {
      code = a.status.code();
      break;
    }
  }
  return Status(code, "the parity of " + std::string(ns) + " step " + std::to_string(step) + " of node " +
                          node_id_ + " (group " + std::to_string(group_) + ") is not complete: " +
                          report.Describe() + "; the step is committed in this node's memory, but not redundant "
                          "until every member's part is folded on every holder");
}

Result<std::vector<std::string>> ParitySender::DropParity(std::string_view ns, uint64_t step) const {
  const std::string request = EncodePeerRequest(PeerMsg::kDropParity, {"", std::string(ns), step, ""});
  const std::vector<std::string>& holders = group().parity;
  std::vector<Result<std::string>> answers = EachHolder<Result<std::string>>(holders, [&](const std::string& h) {
    return replicator_->Call(h, PeerMsg::kDropParity, request, PeerMsg::kDone, replicator_->timeout());
  });
  std::vector<std::string> held;
  std::string failed;
  Code code = Code::kOk;
  for (size_t i = 0; i < holders.size(); ++i) {
    Result<DropReplicaAnswer> a =
        answers[i].ok() ? DropReplicaAnswer::Decode(*answers[i]) : Result<DropReplicaAnswer>(answers[i].status());
    if (!a.ok()) {
      if (code == Code::kOk) code = a.status().code();
      failed += (failed.empty() ? "" : "; ") + holders[i] + ": " + a.status().ToString();
    } else if (a->held == 1) {
      held.push_back(holders[i]);
    }
  }
  if (!failed.empty()) {
    return Status(code, "dropping the parity of " + std::string(ns) + " step " + std::to_string(step) +
                            " failed on " + failed + "; their pieces stay until asked again");
  }
  return held;
}

}  // namespace tierckpt::agent
