// remote_index.cc — see remote_index.h.
#include "sync/remote_index.h"


namespace tierckpt::sync {
namespace {

constexpr std::string_view kMagic = "tierckpt-sync-index 1";
constexpr size_t kMaxIndexBytes = 256u << 20;  // as the journal: ~3 million files

}  // namespace

std::string IndexPath(const std::string& instance) {
  return std::string(kStateDir) + (instance.empty() ? "/index" : "/index-" + instance);
}

RemoteIndex ParseIndex(std::string_view text, const std::string& where, std::string* warning) {
  RemoteIndex index;
  const size_t first = text.find('\n');
  if (text.substr(0, first) != kMagic) {
    if (warning != nullptr) {
      *warning = where + " is not a sync index of version 1 (written by another tierckpt?); pulled files get "
                         "the time of the pull";
    }
    return index;
  }
  size_t skipped = 0;
  size_t start = first + 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {  // a line without its end: cut short
      ++skipped;
      break;
    }
    const std::string line(text.substr(start, end - start));
    start = end + 1;
    int64_t size = 0;
    int64_t mtime = 0;
    std::string path;
    if (!ParseVersionLine(line, &size, &mtime, &path) || size < 0 || !ValidateRelativePath(path).ok()) {
      ++skipped;
      continue;
    }
    index[std::move(path)] = FileVersion{static_cast<uint64_t>(size), mtime};
  }
  if (skipped != 0 && warning != nullptr) {
    *warning = where + ": " + std::to_string(skipped) +
               " damaged line(s) skipped; those files get the time of the pull";
  }
  return index;
}

std::string EncodeIndex(const RemoteIndex& index) {
  std::string out(kMagic);
  out += '\n';
  for (const auto& [path, v] : index) out += VersionLine(path, static_cast<int64_t>(v.size), v.mtime_ns);
  return out;
}

Result<RemoteIndex> LoadIndex(BlobStore& remote, const std::string& instance, std::string* warning) {
  const std::string path = IndexPath(instance);
  Result<std::string> text = remote.ReadSmall(path, kMaxIndexBytes);
  if (!text.ok() && text.status().code() == Code::kNotFound) return RemoteIndex{};  // an older remote
  if (!text.ok() && text.status().code() == Code::kResourceExhausted) {
    if (warning != nullptr) *warning = remote.Describe() + path + " is larger than 256 MiB; it was not read";
    return RemoteIndex{};
  }
  if (!text.ok()) return text.status().WithContext("reading sync's index of modification times");
  return ParseIndex(*text, remote.Describe() + path, warning);
}

Status StoreIndex(BlobStore& remote, const std::string& instance, const RemoteIndex& index) {
  const std::string path = IndexPath(instance);
  const std::string text = EncodeIndex(index);
  return remote.Put(path, text.data(), text.size(), BlobPutOptions{.check_tree = false})
      .WithContext("writing sync's index of modification times " + remote.Describe() + path);
}

}  // namespace tierckpt::sync
