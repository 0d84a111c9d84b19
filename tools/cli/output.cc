#include "output.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>

namespace tierckpt::cli {

std::string HumanSize(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string HumanRate(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f MB/s", static_cast<double>(bytes) / seconds / 1e6);
  return buf;
}

std::string FormatUnixMs(uint64_t unix_ms) {
  if (unix_ms == 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm {};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

void PrintJson(const nlohmann::json& j) {
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  std::cout.flush();
}

nlohmann::json ParseJson(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

Table::Table(std::vector<std::string> headers, std::vector<bool> numeric)
    : headers_(std::move(headers)), numeric_(std::move(numeric)) {
  numeric_.resize(headers_.size(), false);
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& r : rows_) {
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t c = 0; c < cells.size(); ++c) {
      const bool last = c + 1 == cells.size();
      std::string pad(width[c] - cells[c].size(), ' ');
      if (numeric_[c]) {
        l += pad + cells[c];
      } else {
        l += cells[c];
        if (!last) l += pad;
      }
      if (!last) l += "  ";
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(headers_);
  for (const auto& r : rows_) line(r);
  return out;
}

void Table::Print() const { std::cout << Render() << std::flush; }

Progress::Progress(std::string verb, uint64_t total_bytes, bool enabled)
    : verb_(std::move(verb)),
      total_(total_bytes),
      enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

Progress::~Progress() { Finish(); }

bool Progress::ShouldShow(bool forced) { return forced || ::isatty(STDERR_FILENO) == 1; }

double Progress::Seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Add(uint64_t bytes) {
  done_.fetch_add(bytes, std::memory_order_relaxed);
  if (!enabled_) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_print_ < std::chrono::milliseconds(500)) return;
  last_print_ = now;
  Print(false);
}

void Progress::Print(bool final_line) {
  const uint64_t done = done_.load(std::memory_order_relaxed);
  const int pct = total_ == 0 ? 100 : static_cast<int>(done * 100 / total_);
  std::string l = verb_ + " " + HumanSize(done) + " / " + HumanSize(total_) + " (" + std::to_string(pct) +
                  "%) " + HumanRate(done, Seconds());
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", l.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", l.c_str());
  }
  std::fflush(stderr);
  printed_ = true;
}

void Progress::Finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (printed_ && tty_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

}  // namespace tierckpt::cli
