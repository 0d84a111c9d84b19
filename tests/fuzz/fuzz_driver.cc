// fuzz_driver.cc — a small standalone driver for LLVMFuzzerTestOneInput
// targets, used where libFuzzer is not available (GCC builds).
//
// It is not coverage-guided: it runs every seed of the corpus once, then
// mutates seeds at random (bit flips, byte sets, inserts, deletes, chunk
// copies, splices of two seeds, interesting integers for length fields and
// dictionary tokens for JSON and frames) until a limit is reached. The
// targets are built with ASan+UBSan, so a memory error, undefined behaviour
// or an abort() in the target stops the run; the input that did it is
// written to <artifact_prefix>crash-<seed> first, and the process dies with
// a non-zero status.
//
// Flags, spelled like libFuzzer's (other -flags are ignored with a note):
//   -max_total_time=N  stop after N seconds (0 = no limit)
//   -runs=N            stop after N executions (-1 = no limit)
//   -seed=N            random seed (0 = pick one; it is printed)
//   -max_len=N         longest generated input (default 4096, or twice the
//                      largest seed if that is more)
//   -artifact_prefix=P where crash inputs go (default "./")
//   -dict=FILE         extra tokens, in libFuzzer's dictionary format
//                      (one "quoted" token per line, optionally name="...",
//                      with \\, \" and \xNN escapes; # starts a comment)
// Positional arguments: corpus directories (every regular file in them is a
// seed), or files — given only files, the driver runs each once and exits,
// which is how a crash input is reproduced.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define TC_FUZZ_HAVE_DEATH_CALLBACK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_FUZZ_HAVE_DEATH_CALLBACK 1
#endif
#endif
#ifdef TC_FUZZ_HAVE_DEATH_CALLBACK
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

struct Options {
  long long max_total_time = 0;
  long long runs = -1;
  unsigned long long seed = 0;
  size_t max_len = 0;
  std::string artifact_prefix = "./";
  std::string dict;
  std::vector<std::string> paths;
};

// The input being executed, and where to save it if the process dies. Plain
// globals: the signal handler and the sanitizer death callback read them.
const std::string* g_current = nullptr;
char g_crash_path[4096] = {};

void SaveCurrentInput() {
  static volatile sig_atomic_t saved = 0;
  if (saved || g_current == nullptr || g_crash_path[0] == '\0') return;
  saved = 1;
  int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const char* p = g_current->data();
    size_t left = g_current->size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n <= 0) break;
      p += n;
      left -= static_cast<size_t>(n);
    }
    ::close(fd);
  }
  const char msg1[] = "\n==fuzz_driver== crash: input saved to ";
  const char msg2[] = "\n";
  (void)!::write(2, msg1, sizeof(msg1) - 1);
  (void)!::write(2, g_crash_path, std::strlen(g_crash_path));
  (void)!::write(2, msg2, sizeof(msg2) - 1);
}

void OnFatalSignal(int sig) {
  SaveCurrentInput();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

bool ParseFlag(const std::string& arg, const char* name, std::string* value) {
  std::string prefix = std::string("-") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  *value = arg.substr(prefix.size());
  return true;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string v;
    if (ParseFlag(arg, "max_total_time", &v)) {
      o.max_total_time = std::atoll(v.c_str());
    } else if (ParseFlag(arg, "runs", &v)) {
      o.runs = std::atoll(v.c_str());
    } else if (ParseFlag(arg, "seed", &v)) {
      o.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (ParseFlag(arg, "max_len", &v)) {
      o.max_len = static_cast<size_t>(std::atoll(v.c_str()));
    } else if (ParseFlag(arg, "artifact_prefix", &v)) {
      o.artifact_prefix = v;
    } else if (ParseFlag(arg, "dict", &v)) {
      o.dict = v;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "fuzz_driver: ignoring flag %s (not supported by this driver)\n",
                   arg.c_str());
    } else {
      o.paths.push_back(arg);
    }
  }
  return o;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Parses a libFuzzer dictionary; false (with the line number) on a bad line.
bool ReadDict(const std::string& path, std::vector<std::string>* tokens, int* bad_line) {
  std::string text;
  if (!ReadFile(path, &text)) {
    *bad_line = 0;
    return false;
  }
  std::istringstream lines(text);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    size_t open = line.find('"', start);
    size_t close = line.rfind('"');
    if (open == std::string::npos || close == open) {
      *bad_line = line_no;
      return false;
    }
    std::string token;
    for (size_t i = open + 1; i < close; ++i) {
      if (line[i] != '\\') {
        token.push_back(line[i]);
        continue;
      }
      if (i + 1 >= close) {
        *bad_line = line_no;
        return false;
      }
      char e = line[++i];
      if (e == 'x' && i + 2 < close && HexDigit(line[i + 1]) >= 0 && HexDigit(line[i + 2]) >= 0) {
        token.push_back(static_cast<char>(HexDigit(line[i + 1]) * 16 + HexDigit(line[i + 2])));
        i += 2;
      } else if (e == '\\' || e == '"') {
        token.push_back(e);
      } else {
        *bad_line = line_no;
        return false;
      }
    }
    tokens->push_back(std::move(token));
  }
  return true;
}

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Every regular file directly inside dir, sorted by name for determinism.
std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string path = dir + "/" + e->d_name;
    struct stat st {};
    if (e->d_name[0] != '.' && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      out.push_back(path);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void Run(const std::string& input) {
  g_current = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  g_current = nullptr;
}

class Mutator {
 public:
  Mutator(unsigned long long seed, const std::vector<std::string>* corpus, size_t max_len,
          std::vector<std::string> dict)
      : rng_(seed), corpus_(corpus), max_len_(max_len), dict_(std::move(dict)) {}

  std::string Next() {
    std::string s = corpus_->empty() ? std::string() : (*corpus_)[Below(corpus_->size())];
    size_t count = 1 + Below(5);
    for (size_t i = 0; i < count; ++i) MutateOnce(&s);
    if (s.size() > max_len_) s.resize(max_len_);
    return s;
  }

 private:
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

  void PutInt(std::string* s, size_t pos, uint64_t v, size_t width) {
    for (size_t i = 0; i < width && pos + i < s->size(); ++i) {
      (*s)[pos + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    }
  }

  void MutateOnce(std::string* s) {
    static const uint64_t kInteresting[] = {0,          1,          2,          0x7f,
                                            0x80,       0xff,       0x100,      0x7fff,
                                            0x8000,     0xffff,     0x10000,    16,
                                            1u << 20,   (1u << 20) + 1,       0x7fffffff,
                                            0x80000000, 0xffffffff, 9999999999ULL,
                                            10000000000ULL,         ~0ULL};
    static const char* const kTokens[] = {
        "{",        "}",        "[",        "]",          ":",        ",",      "\"",
        "null",     "true",     "false",    "-1",         "0",        "1e400",
        "18446744073709551616", "\\u0000", "\\ud800", "\xff",   "..",     "/",
        "_tierckpt",
        "\"format\"", "\"version\"", "\"namespace\"", "\"step\"", "\"objects\"", "\"name\"",
        "\"size\"", "\"checksum\"", "\"total_bytes\"", "xxh3-64:", "TCKP"};
    size_t kind = Below(10);
    if (s->empty() && kind != 2 && kind != 8) kind = 2;
    switch (kind) {
      case 0: {  // flip a bit
        size_t pos = Below(s->size());
        (*s)[pos] = static_cast<char>((*s)[pos] ^ (1 << Below(8)));
        break;
      }
      case 1: {  // set a random byte
        (*s)[Below(s->size())] = static_cast<char>(Below(256));
        break;
      }
      case 2: {  // insert random bytes
        size_t n = 1 + Below(8);
        std::string bytes;
        for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(Below(256)));
        s->insert(Below(s->size() + 1), bytes);
        break;
      }
      case 3: {  // delete a range
        size_t pos = Below(s->size());
        s->erase(pos, 1 + Below(std::min<size_t>(16, s->size() - pos)));
        break;
      }
      case 4: {  // copy a chunk elsewhere
        size_t from = Below(s->size());
        size_t n = 1 + Below(std::min<size_t>(32, s->size() - from));
        std::string chunk = s->substr(from, n);
        s->insert(Below(s->size() + 1), chunk);
        break;
      }
      case 5:
      case 6: {  // an interesting integer, little-endian, as a length field would be
        static const size_t kWidths[] = {1, 2, 4, 8};
        uint64_t v = kInteresting[Below(sizeof(kInteresting) / sizeof(kInteresting[0]))];
        PutInt(s, Below(s->size()), v, kWidths[Below(4)]);
        break;
      }
      case 7: {  // splice with another seed
        if (corpus_->empty()) break;
        const std::string& other = (*corpus_)[Below(corpus_->size())];
        *s = s->substr(0, Below(s->size() + 1)) + other.substr(Below(other.size() + 1));
        break;
      }
      case 8: {  // insert a token, built in or from -dict
        size_t builtin = sizeof(kTokens) / sizeof(kTokens[0]);
        size_t pick = Below(builtin + dict_.size());
        std::string t = pick < builtin ? std::string(kTokens[pick]) : dict_[pick - builtin];
        s->insert(Below(s->size() + 1), t);
        break;
      }
      default: {  // add a small delta to a byte
        size_t pos = Below(s->size());
        int delta = static_cast<int>(Below(33)) - 16;
        (*s)[pos] = static_cast<char>(static_cast<unsigned char>((*s)[pos]) + delta);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  const std::vector<std::string>* corpus_;
  size_t max_len_;
  std::vector<std::string> dict_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = ParseArgs(argc, argv);
  if (o.seed == 0) {
    o.seed = static_cast<unsigned long long>(
                 std::chrono::steady_clock::now().time_since_epoch().count()) ^
             static_cast<unsigned long long>(::getpid());
  }
  std::snprintf(g_crash_path, sizeof(g_crash_path), "%scrash-%llu", o.artifact_prefix.c_str(),
                o.seed);
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, OnFatalSignal);
#ifdef TC_FUZZ_HAVE_DEATH_CALLBACK
  __sanitizer_set_death_callback(SaveCurrentInput);
#endif

  std::vector<std::string> corpus;
  bool only_files = !o.paths.empty();
  for (const std::string& p : o.paths) {
    std::vector<std::string> files;
    if (IsDir(p)) {
      only_files = false;
      files = FilesIn(p);
    } else {
      files.push_back(p);
    }
    for (const std::string& f : files) {
      std::string data;
      if (!ReadFile(f, &data)) {
        std::fprintf(stderr, "fuzz_driver: cannot read %s; check the path\n", f.c_str());
        return 2;
      }
      corpus.push_back(std::move(data));
    }
  }

  // Replaying files: they are already saved, so a crash writes nothing.
  if (only_files) g_crash_path[0] = '\0';

  // Seeds first, unmutated.
  long long executed = 0;
  for (const std::string& s : corpus) {
    Run(s);
    ++executed;
  }
  if (only_files) {
    std::fprintf(stderr, "fuzz_driver: ran %lld input file(s), no crash\n", executed);
    return 0;
  }

  size_t max_len = o.max_len;
  if (max_len == 0) {
    max_len = 4096;
    for (const std::string& s : corpus) max_len = std::max(max_len, 2 * s.size());
  }
  std::vector<std::string> dict;
  if (!o.dict.empty()) {
    int bad_line = 0;
    if (!ReadDict(o.dict, &dict, &bad_line)) {
      std::fprintf(stderr, "fuzz_driver: cannot read dictionary %s (line %d); fix or drop -dict\n",
                   o.dict.c_str(), bad_line);
      return 2;
    }
  }
  std::fprintf(stderr,
               "fuzz_driver: seed=%llu corpus=%zu inputs dict=%zu tokens max_len=%zu "
               "max_total_time=%lld runs=%lld\n",
               o.seed, corpus.size(), dict.size(), max_len, o.max_total_time, o.runs);
  Mutator mutator(o.seed, &corpus, max_len, std::move(dict));
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::seconds(o.max_total_time);
  while (o.runs < 0 || executed < o.runs) {
    if (o.max_total_time > 0 && (executed & 255) == 0 &&
        std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    std::string input = mutator.Next();
    Run(input);
    ++executed;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "fuzz_driver: done, %lld runs in %.1f s, no crash\n", executed, secs);
  return 0;
}
