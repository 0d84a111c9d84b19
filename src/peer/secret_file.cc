#include "peer/secret_file.h"

#include <fcntl.h>
#include <openssl/crypto.h>

#include <cstdio>
#include <string>

#include "os/files.h"
#include "os/fs_stat.h"

namespace tierckpt::peer {
namespace {

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Zeroes the bytes of a string that held the secret before it is freed.
class WipeOnExit {
 public:
  explicit WipeOnExit(std::string* s) : s_(s) {}
  ~WipeOnExit() { OPENSSL_cleanse(s_->data(), s_->size()); }
  WipeOnExit(const WipeOnExit&) = delete;
  WipeOnExit& operator=(const WipeOnExit&) = delete;

 private:
  std::string* s_;
};

}  // namespace

Status CheckSecretFileAccess(const std::string& path, uid_t owner, mode_t mode, uid_t agent_uid) {
  const std::string what = "the cluster secret file " + path + " (--peer-secret-file) has mode " + Octal(mode);
  const std::string chmod = "run `chmod 600 " + path + "`";
  if ((mode & 0007) != 0) {
    return PermissionDenied(what + ": every user of this machine can " +
                            ((mode & 0002) != 0 ? "replace" : "read") +
                            " it, and whoever holds the secret can join the cluster and read every checkpoint; " +
                            chmod + " (on Kubernetes: defaultMode: 0400 on the Secret volume, docs/deploy.md)");
  }
  if ((mode & 0020) != 0) {
    return PermissionDenied(what + ": the members of its group can replace the cluster secret; " + chmod);
  }
  if (owner != agent_uid && owner != 0) {
    return PermissionDenied(what + " and belongs to uid " + std::to_string(owner) +
                            ", another user than the agent's (uid " + std::to_string(agent_uid) +
                            "), who can read and replace it; give it to the agent's user or root (`chown`) and " +
                            chmod);
  }
  // Group read serves only an agent that reads root's file through its group.
  if ((mode & 0040) != 0 && !(owner == 0 && agent_uid != 0)) {
    return PermissionDenied(what + ": the members of its group can read the cluster secret, and with it join the "
                            "cluster and read every checkpoint; " + chmod);
  }
  return Status::Ok();
}

Result<ClusterSecret> LoadSecretFile(const std::string& path, uid_t agent_uid) {
  // O_NONBLOCK: a FIFO planted at the path is refused below instead of
  // blocking the agent's start.
  Result<UniqueFd> opened = OpenFile(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!opened.ok()) return opened.status().WithContext("the cluster secret file (--peer-secret-file)");
  UniqueFd fd = std::move(opened).value();
  TC_ASSIGN_OR_RETURN(FileStat st, StatOpenFd(fd.get(), "stat " + path));
  if (st.type != EntryType::kRegular) {
    return FailedPrecondition("the cluster secret file " + path + " (--peer-secret-file) is a " +
                              std::string(EntryTypeName(st.type)) + ", not a regular file");
  }
  TC_RETURN_IF_ERROR(CheckSecretFileAccess(path, st.uid, st.mode, agent_uid));
  const uint64_t limit = kMaxSecretBytes + 2;  // the secret and a line ending ("\r\n")
  if (st.size > limit) {
    return ResourceExhausted("the cluster secret file " + path + " (--peer-secret-file) is " +
                             std::to_string(st.size) + " bytes; a secret has at most " +
                             std::to_string(kMaxSecretBytes) + " (make one with `head -c 32 /dev/urandom > " +
                             path + "`)");
  }
  std::string text(static_cast<size_t>(st.size), '\0');
  WipeOnExit wipe(&text);
  TC_RETURN_IF_ERROR(PreadExact(fd.get(), text.data(), text.size(), 0, path));
  size_t size = text.size();
  while (size > 0 && (text[size - 1] == '\n' || text[size - 1] == '\r')) --size;
  Result<ClusterSecret> secret = ClusterSecret::FromBytes(std::string_view(text.data(), size));
  if (!secret.ok()) return secret.status().WithContext("--peer-secret-file " + path);
  return secret;
}

}  // namespace tierckpt::peer
