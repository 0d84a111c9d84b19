// secret_file.h — loading the cluster secret from its file
// (--peer-secret-file), and who that file may be readable by.
//
// Whoever reads the secret can join the cluster as an agent and read every
// checkpoint it holds, so the agent refuses a secret file that others can
// read, as ssh refuses a private key with loose permissions (decision 83,
// docs/security.md "The cluster secret file"). The file, after following
// symbolic links (a Kubernetes Secret volume is a chain of links), must be a
// regular file, and:
//   - no permission bit for "other" (mode & 007): every local user could
//     read or replace it;
//   - not writable by its group (mode & 020);
//   - owned by the agent's uid or by root; another user owns a file it can
//     read and replace;
//   - readable by its group (mode & 040) only when root owns it and the
//     agent does not run as root: the agent reads it through its group, a
//     share the administrator made on purpose (a Kubernetes Secret volume
//     with fsGroup is root-owned, mode 0440). A file of the agent's own user
//     that its group can read is a mistake: chmod 600.
//
// Pure functions apart from LoadSecretFile's file access; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>

#include "peer/auth.h"
#include "tierckpt/status.h"

namespace tierckpt::peer {

// Ok when a secret file at path with this owner and mode (st_mode & 07777)
// may be used by an agent running as agent_uid; otherwise kPermissionDenied
// naming the path, its mode (octal), who else can read it and the fix
// (`chmod 600 <path>`, or the owner to give it).
Status CheckSecretFileAccess(const std::string& path, uid_t owner, mode_t mode, uid_t agent_uid);

// Opens path (following symbolic links, never blocking on a FIFO), refuses
// anything but a regular file (kFailedPrecondition) and what
// CheckSecretFileAccess refuses, reads it (kResourceExhausted past
// kMaxSecretBytes plus a line ending), strips trailing '\n' and '\r' and
// builds the secret (kInvalidArgument when it is too short or too long).
// Every error names path.
Result<ClusterSecret> LoadSecretFile(const std::string& path, uid_t agent_uid);

}  // namespace tierckpt::peer
