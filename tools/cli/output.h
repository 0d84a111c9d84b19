// output.h — how the CLI prints: human sizes, aligned tables, JSON documents
// and rate-limited progress lines.
//
// Everything but Progress is single-threaded. Progress::Add may be called
// from several copy threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tierckpt::cli {

// 1536 → "1.5 KiB", 1 << 30 → "1.0 GiB", 12 → "12 B".
std::string HumanSize(uint64_t bytes);
// Bytes per second as "812 MB/s" (decimal megabytes; "-" when seconds == 0).
std::string HumanRate(uint64_t bytes, double seconds);
// Milliseconds since the epoch as "2026-11-29T07:15:18Z" (UTC); "-" for 0.
std::string FormatUnixMs(uint64_t unix_ms);
// "" → "-".
std::string OrDash(const std::string& s);

// Writes j to stdout as one pretty document and a newline; invalid UTF-8 in
// strings is replaced rather than thrown on.
void PrintJson(const nlohmann::json& j);
// Parses text (no exceptions); a discarded value when it is not JSON.
nlohmann::json ParseJson(const std::string& text);

// Columns separated by two spaces; columns marked numeric are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::vector<bool> numeric = {});
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;
  void Print() const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> numeric_;
  std::vector<std::vector<std::string>> rows_;
};

// "<verb> 512.0 MiB / 1.0 GiB (50%) 812 MB/s" on stderr, at most twice a
// second; on a TTY the line is rewritten in place. Disabled progress prints
// nothing.
class Progress {
 public:
  Progress(std::string verb, uint64_t total_bytes, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Add(uint64_t bytes);
  // Ends the progress display (clears the TTY line).
  void Finish();
  uint64_t done() const { return done_.load(); }
  double Seconds() const;

  // Progress goes to stderr when it is a TTY or when forced (--progress).
  static bool ShouldShow(bool forced);

 private:
  void Print(bool final_line);

  const std::string verb_;
  const uint64_t total_;
  const bool enabled_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_print_;  // guarded by mu_
  bool printed_ = false;                               // guarded by mu_
  bool finished_ = false;                              // guarded by mu_
};

}  // namespace tierckpt::cli
