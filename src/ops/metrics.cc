// metrics.cc — see metrics.h.
#include "ops/metrics.h"

#include <cstdio>

namespace tierckpt::agent {
namespace {

std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

void Family(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void Sample(std::string* out, std::string_view name, const std::vector<std::pair<std::string, std::string>>& labels,
            double value) {
  *out += name;
  if (!labels.empty()) {
    *out += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) *out += ',';
      *out += labels[i].first + "=\"" + Escape(labels[i].second) + "\"";
    }
    *out += '}';
  }
  *out += ' ';
  *out += Number(value);
  *out += '\n';
}

void RenderOp(std::string* out, std::string_view op, const OpMetrics& m) {
  const std::string base = "tierckpt_" + std::string(op);
  Family(out, base + "_total", "counter", std::string(op) + " operations by result");
  Sample(out, base + "_total", {{"result", "ok"}}, static_cast<double>(m.ok.load()));
  Sample(out, base + "_total", {{"result", "error"}}, static_cast<double>(m.failed.load()));
  Family(out, base + "_bytes_total", "counter", "bytes moved by successful " + std::string(op) + " operations");
  Sample(out, base + "_bytes_total", {}, static_cast<double>(m.bytes.load()));
  std::array<uint64_t, kLatencyBuckets.size()> cumulative{};
  uint64_t count = 0;
  double sum = 0;
  m.seconds.Read(&cumulative, &count, &sum);
  Family(out, base + "_seconds", "histogram", "latency of successful " + std::string(op) + " operations");
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    Sample(out, base + "_seconds_bucket", {{"le", Number(kLatencyBuckets[i])}}, static_cast<double>(cumulative[i]));
  }
  Sample(out, base + "_seconds_bucket", {{"le", "+Inf"}}, static_cast<double>(count));
  Sample(out, base + "_seconds_sum", {}, sum);
  Sample(out, base + "_seconds_count", {}, static_cast<double>(count));
}

}  // namespace

void Histogram::Observe(double seconds) {
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    if (seconds <= kLatencyBuckets[i]) {
      buckets_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(&mu_);
  sum_ += seconds;
}

void Histogram::Read(std::array<uint64_t, kLatencyBuckets.size()>* cumulative, uint64_t* count, double* sum) const {
  MutexLock lock(&mu_);
  uint64_t running = 0;
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    (*cumulative)[i] = running;
  }
  *count = count_.load(std::memory_order_relaxed);
  if (*count < running) *count = running;
  *sum = sum_;
}

void OpMetrics::Succeeded(uint64_t bytes_moved, double secs) {
  ok.fetch_add(1, std::memory_order_relaxed);
  bytes.fetch_add(bytes_moved, std::memory_order_relaxed);
  seconds.Observe(secs);
}

std::string_view DropReason(std::string_view why) {
  if (why.find("retention") != std::string_view::npos) return "retention";
  if (why.find("budget") != std::string_view::npos) return "budget";
  if (why.find("deleted") != std::string_view::npos) return "deleted";
  if (why.find("abort") != std::string_view::npos || why.find("disconnected") != std::string_view::npos) {
    return "aborted";
  }
  return "other";
}

void Metrics::Dropped(std::string_view why) {
  MutexLock lock(&mu_);
  ++evictions_[std::string(DropReason(why))];
}

void Metrics::CommittedStep(std::string_view ns) {
  MutexLock lock(&mu_);
  auto it = commits_.find(ns);
  if (it == commits_.end()) it = commits_.emplace(std::string(ns), 0).first;
  ++it->second;
}

void Metrics::Error(std::string_view kind) {
  MutexLock lock(&mu_);
  auto it = errors_.find(kind);
  if (it == errors_.end()) it = errors_.emplace(std::string(kind), 0).first;
  ++it->second;
}

std::string Metrics::Render(const std::vector<Gauge>& gauges) const {
  std::string out;
  RenderOp(&out, "commit", commit);
  RenderOp(&out, "restore", restore);
  RenderOp(&out, "replicate", replicate);
  RenderOp(&out, "persist", persist);
  Family(&out, "tierckpt_persist_retries_total", "counter", "persist attempts retried after a retriable error");
  Sample(&out, "tierckpt_persist_retries_total", {}, static_cast<double>(persist_retries.load()));
  Family(&out, "tierckpt_scrub_objects_total", "counter", "committed memory objects the scrub re-hashed");
  Sample(&out, "tierckpt_scrub_objects_total", {}, static_cast<double>(scrub_objects.load()));
  Family(&out, "tierckpt_scrub_corrupt_total", "counter",
         "objects the scrub found not matching their manifest checksum");
  Sample(&out, "tierckpt_scrub_corrupt_total", {}, static_cast<double>(scrub_corrupt.load()));
  Family(&out, "tierckpt_scrub_repaired_total", "counter",
         "corrupt objects the scrub replaced from a replica holder or the durable tier");
  Sample(&out, "tierckpt_scrub_repaired_total", {}, static_cast<double>(scrub_repaired.load()));
  {
    MutexLock lock(&mu_);
    Family(&out, "tierckpt_steps_committed_total", "counter", "steps committed in memory, by namespace");
    for (const auto& [ns, n] : commits_) Sample(&out, "tierckpt_steps_committed_total", {{"namespace", ns}}, n);
    Family(&out, "tierckpt_steps_dropped_total", "counter",
           "committed steps dropped from memory, by reason (retention and budget are evictions)");
    for (const auto& [why, n] : evictions_) Sample(&out, "tierckpt_steps_dropped_total", {{"reason", why}}, n);
    Family(&out, "tierckpt_errors_total", "counter", "errors the agent recorded, by kind (see `agent status`)");
    for (const auto& [kind, n] : errors_) Sample(&out, "tierckpt_errors_total", {{"kind", kind}}, n);
  }
  std::string last;
  for (const Gauge& g : gauges) {
    if (g.name != last) Family(&out, g.name, "gauge", g.help);
    last = g.name;
    Sample(&out, g.name, g.labels, g.value);
  }
  return out;
}

void Metrics::ResetForTest() {
  MutexLock lock(&mu_);
  evictions_.clear();
  commits_.clear();
  errors_.clear();
}

}  // namespace tierckpt::agent
