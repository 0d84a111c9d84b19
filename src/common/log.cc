#include "common/log.h"

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <ctime>

#include "common/mutex.h"

namespace tierckpt {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_fd{2};
Mutex g_file_mu;  // guards replacing g_fd

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

void AppendValue(std::string* out, std::string_view v) {
  if (!NeedsQuotes(v)) {
    out->append(v);
    return;
  }
  out->push_back('"');
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

Result<LogLevel> ParseLogLevel(std::string_view text) {
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "warn") return LogLevel::kWarn;
  if (text == "error") return LogLevel::kError;
  return InvalidArgument("log level \"" + std::string(text.substr(0, 20)) +
                         "\" is unknown; use debug, info, warn or error");
}

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

Status SetLogFile(const std::string& path) {
  MutexLock lock(&g_file_mu);
  int fd = 2;
  if (!path.empty()) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return IoError("open log file " + path + " failed; check the directory exists and is writable");
  }
  int old = g_fd.exchange(fd);
  if (old > 2) ::close(old);
  return Status::Ok();
}

Log::Log(LogLevel level, std::string_view event) : enabled_(static_cast<int>(level) >= g_level.load()) {
  if (!enabled_) return;
  struct timeval tv;
  ::gettimeofday(&tv, nullptr);
  struct tm tm;
  ::gmtime_r(&tv.tv_sec, &tm);
  char ts[96];
  std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(tv.tv_usec / 1000));
  line_ = "ts=";
  line_ += ts;
  line_ += " level=";
  line_ += LevelName(level);
  line_ += " event=";
  AppendValue(&line_, event);
}

Log::~Log() {
  if (!enabled_) return;
  line_.push_back('\n');
  const char* p = line_.data();
  size_t n = line_.size();
  int fd = g_fd.load();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w <= 0) break;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

Log& Log::Kv(std::string_view key, std::string_view value) {
  if (!enabled_) return *this;
  line_.push_back(' ');
  line_.append(key);
  line_.push_back('=');
  AppendValue(&line_, value);
  return *this;
}

Log& Log::Kv(std::string_view key, int64_t value) { return Kv(key, std::string_view(std::to_string(value))); }
Log& Log::Kv(std::string_view key, uint64_t value) { return Kv(key, std::string_view(std::to_string(value))); }
Log& Log::Kv(std::string_view key, double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", value);
  return Kv(key, std::string_view(buf));
}

Log& Log::Err(const Status& status) { return Kv("error", status.ToString()); }

}  // namespace tierckpt
