// Scrubber: the periodic re-hash of committed memory steps, and the repair
// of what it finds corrupt.
#include "agent/scrubber.h"

#include <utility>

#include "common/checksum.h"
#include "common/log.h"
#include "replication/parity_holder.h"
#include "replication/replica_tiers.h"
#include "tier/step_state.h"

namespace tierckpt::agent {

Scrubber::Scrubber(ScrubberOptions options, ScrubberDeps deps) : options_(options), d_(deps) {}

Scrubber::~Scrubber() { Stop(); }

void Scrubber::Start() {
  if (options_.interval.count() <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Scrubber::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

bool Scrubber::stopping() const {
  MutexLock lock(&mu_);
  return stopping_;
}

void Scrubber::Loop() {
  LowerThisThreadForBackgroundWork(options_.priority, "scrub");
  for (;;) {
    {
      MutexLock lock(&mu_);
      const auto next = std::chrono::steady_clock::now() + options_.interval;
      while (!stopping_ && std::chrono::steady_clock::now() < next) cv_.WaitUntil(next);
      if (stopping_) return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ScrubReport r = ScrubOnce();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Log(r.corrupt > 0 ? LogLevel::kWarn : LogLevel::kDebug, "scrub")
        .Kv("steps", static_cast<uint64_t>(r.steps))
        .Kv("objects", static_cast<uint64_t>(r.objects))
        .Kv("corrupt", static_cast<uint64_t>(r.corrupt))
        .Kv("repaired", static_cast<uint64_t>(r.repaired))
        .Kv("replicas_dropped", static_cast<uint64_t>(r.replicas_dropped))
        .Kv("parity_groups", static_cast<uint64_t>(r.parity_groups))
        .Kv("parity_dropped", static_cast<uint64_t>(r.parity_dropped))
        .Kv("ms", ms);
  }
}

ScrubReport Scrubber::ScrubOnce() {
  ScrubReport report;
  for (const StepInfo& info : d_.tier->ListSteps("")) {
    if (!info.committed) continue;
    ++report.steps;
    if (!ScrubStep(info.ns, info.step, &report)) return report;
  }
  const std::vector<std::string> origins = d_.replicas != nullptr ? d_.replicas->Origins() : std::vector<std::string>{};
  for (const std::string& origin : origins) {
    Result<MemoryTier*> tier = d_.replicas->Get(origin, /*create=*/false);
    if (!tier.ok()) continue;
    for (const StepInfo& info : (*tier)->ListSteps("")) {
      if (!info.committed) continue;
      ++report.steps;
      if (!ScrubReplicaStep(origin, *tier, info.ns, info.step, &report)) return report;
    }
  }
  if (d_.parity != nullptr) ScrubParity(&report);
  if (stopping()) return report;
  MutexLock lock(&mu_);
  ++counters_.passes;
  counters_.last_pass_unix_ms = NowUnixMs();
  counters_.objects += report.objects;
  counters_.corrupt += report.corrupt;
  counters_.repaired += report.repaired;
  return report;
}

bool Scrubber::ScrubStep(const std::string& ns, uint64_t step, ScrubReport* report) {
  Result<Manifest> manifest = d_.tier->GetManifest(ns, step);
  if (!manifest.ok()) return true;  // dropped since the listing
  const std::string label = StepLabel(ns, step);
  for (const ObjectEntry& e : manifest->objects) {
    if (stopping()) return false;
    const std::string what = label + "/" + e.name;
    const auto began = std::chrono::steady_clock::now();
    Result<PinnedObject> pinned = d_.tier->ReadCommittedObject(ns, step, e.name);
    if (!pinned.ok()) {
      if (pinned.status().code() == Code::kNotFound) return true;  // dropped meanwhile
      d_.errors->Add("scrub", pinned.status().WithContext("scrub: reading object " + what));
      continue;
    }
    // Hashed with the tier's mutex released: the pin keeps the files.
    const std::string actual = ComputeChecksum(pinned->view.data(), pinned->view.size()).ToString();
    d_.metrics->scrub_objects.fetch_add(1, std::memory_order_relaxed);
    ++report->objects;
    if (actual == pinned->checksum) {
      d_.tier->MarkVerified(ns, step, pinned->instance, e.name, began);
      continue;
    }
    const std::string expected = pinned->checksum;
    d_.tier->MarkMismatch(ns, step, pinned->instance, e.name, began);
    *pinned = PinnedObject();  // unpinned before a repair drops the copy
    ++report->corrupt;
    d_.metrics->scrub_corrupt.fetch_add(1, std::memory_order_relaxed);
    Log(LogLevel::kWarn, "scrub_corrupt")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("object", e.name)
        .Kv("actual", actual)
        .Kv("manifest", expected);
    // The client's repair: re-hashed, dropped only if another tier holds the
    // step, restored from there (read_path.h).
    Result<ServedObject> served = d_.read_path->Open(ns, step, e.name, /*repair=*/true);
    std::string finding;
    if (!served.ok()) {
      finding = "scrub: object " + what + " hashes to " + actual + " but its manifest says " + expected +
                "; not repaired: " + served.status().message();
      d_.errors->Add("scrub", Status(served.status().code(), finding));
    } else if (served->repaired.empty()) {
      finding = "scrub: object " + what + " hashed to " + actual +
                " but matched on a second hash (replaced "
                "meanwhile); nothing to do";
    } else {
      ++report->repaired;
      d_.metrics->scrub_repaired.fetch_add(1, std::memory_order_relaxed);
      finding = "scrub: " + served->repaired;
      d_.errors->Add("scrub", Corruption(finding));
      report->findings.push_back(std::move(finding));
      return true;  // the step was restored, every object verified on the way in
    }
    report->findings.push_back(std::move(finding));
  }
  return true;
}

namespace {

// The bytes of a pinned object hashed with the tier's mutex released.
std::string HashOf(const PinnedObject& p) { return ComputeChecksum(p.view.data(), p.view.size()).ToString(); }

}  // namespace

bool Scrubber::ScrubReplicaStep(const std::string& origin, MemoryTier* tier, const std::string& ns,
                                uint64_t step, ScrubReport* report) {
  Result<Manifest> manifest = tier->GetManifest(ns, step);
  if (!manifest.ok()) return true;  // dropped since the listing
  const std::string label = StepLabel(ns, step);
  for (const ObjectEntry& e : manifest->objects) {
    if (stopping()) return false;
    const std::string what = "the replica of " + label + "/" + e.name + " held for node " + origin;
    const auto began = std::chrono::steady_clock::now();
    Result<PinnedObject> pinned = tier->ReadCommittedObject(ns, step, e.name);
    if (!pinned.ok()) {
      if (pinned.status().code() == Code::kNotFound) return true;  // dropped meanwhile
      d_.errors->Add("scrub_replica", pinned.status().WithContext("scrub: reading " + what));
      continue;
    }
    const std::string actual = HashOf(*pinned);
    d_.metrics->scrub_objects.fetch_add(1, std::memory_order_relaxed);
    ++report->objects;
    if (actual == pinned->checksum) {
      tier->MarkVerified(ns, step, pinned->instance, e.name, began);
      continue;
    }
    const std::string expected = pinned->checksum;
    const uint64_t instance = pinned->instance;
    tier->MarkMismatch(ns, step, instance, e.name, began);
    *pinned = PinnedObject();
    ++report->corrupt;
    d_.metrics->scrub_corrupt.fetch_add(1, std::memory_order_relaxed);
    Log(LogLevel::kWarn, "scrub_replica_corrupt")
        .Kv("origin", origin)
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("object", e.name)
        .Kv("actual", actual)
        .Kv("manifest", expected);
    // Re-checked before the drop: the same life of the step (a replica that
    // replaced it is not dropped) and still mismatching. A committed replica
    // is replaced only after it is dropped, so the window between this check
    // and DeleteStep is a drop and a whole new replication.
    Result<PinnedObject> again = tier->ReadCommittedObject(ns, step, e.name);
    if (!again.ok() || again->instance != instance || HashOf(*again) == again->checksum) {
      report->findings.push_back("scrub: " + what + " hashed to " + actual + " but its manifest says " +
                                 expected + "; replaced or gone on a second look, nothing dropped");
      return true;
    }
    *again = PinnedObject();
    Result<bool> dropped = tier->DeleteStep(ns, step);
    std::string finding = "scrub: " + what + " hashes to " + actual + " but its manifest says " + expected;
    if (!dropped.ok()) {
      finding += "; not dropped: " + dropped.status().message() + " (the next pass retries)";
    } else {
      ++report->replicas_dropped;
      finding += "; the replica step " + label + " was dropped (node " + origin +
                 " or the durable tier holds the step; this node no longer holds a replica of it)";
    }
    d_.errors->Add("scrub_replica", Corruption(finding));
    report->findings.push_back(std::move(finding));
    return true;
  }
  return true;
}

void Scrubber::ScrubParity(ScrubReport* report) {
  Result<ParityScrubReport> held = d_.parity->Scrub([this] { return stopping(); });
  if (!held.ok()) {
    d_.errors->Add("scrub_parity", held.status().WithContext("scrub: the parity pieces held here"));
    return;
  }
  report->parity_groups += held->groups;
  for (const Status& dropped : held->dropped) {
    ++report->corrupt;
    ++report->parity_dropped;
    d_.metrics->scrub_corrupt.fetch_add(1, std::memory_order_relaxed);
    d_.errors->Add("scrub_parity", dropped.WithContext("scrub"));
    report->findings.push_back("scrub: " + dropped.message());
  }
}

}  // namespace tierckpt::agent
