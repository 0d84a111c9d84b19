// log.h — structured log lines (logfmt) for the agent and tools.
//
//   ts=2026-11-29T07:15:18.123Z level=info event=commit ns=job1 step=42 bytes=1048576 ms=3.1
//
// One line per event, written with a single write(2) so concurrent lines do
// not interleave. Values with spaces, quotes or '=' are quoted and escaped.
// The sink is stderr unless SetLogFile() names a file (opened O_APPEND).
//
// Thread-safe. Usage:
//   Log(LogLevel::kInfo, "commit").Kv("ns", ns).Kv("step", step).Kv("ms", 3.1);
// The line is emitted when the temporary is destroyed.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Parses "debug|info|warn|error"; kInvalidArgument otherwise.
Result<LogLevel> ParseLogLevel(std::string_view text);
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Appends to path (created 0600). Empty path = stderr.
Status SetLogFile(const std::string& path);

class Log {
 public:
  Log(LogLevel level, std::string_view event);
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  Log& Kv(std::string_view key, std::string_view value);
  Log& Kv(std::string_view key, const std::string& value) { return Kv(key, std::string_view(value)); }
  Log& Kv(std::string_view key, const char* value) { return Kv(key, std::string_view(value)); }
  Log& Kv(std::string_view key, int64_t value);
  Log& Kv(std::string_view key, uint64_t value);
  Log& Kv(std::string_view key, int value) { return Kv(key, static_cast<int64_t>(value)); }
  Log& Kv(std::string_view key, unsigned value) { return Kv(key, static_cast<uint64_t>(value)); }
  Log& Kv(std::string_view key, double value);
  Log& Kv(std::string_view key, bool value) { return Kv(key, std::string_view(value ? "true" : "false")); }
  // error="<code>: <message>"
  Log& Err(const Status& status);

 private:
  bool enabled_;
  std::string line_;
};

}  // namespace tierckpt
