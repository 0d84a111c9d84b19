// peer_source.h — where an agent's peers come from: the value of `--peers`
// (docs/placement.md, "Where the peers come from").
//
//   PATH          a hostfile (cluster/hostfile.h): tests, plain VMs, any
//                 list written by hand or by a script.
//   slurm:PORT    every node of the Slurm job the agent runs in: Slurm's
//                 compressed node list (SLURM_JOB_NODELIST, or SLURM_NODELIST
//                 for older Slurm) expanded as `scontrol show hostnames`
//                 does (cluster/hostlist.h); each node's id is its Slurm node
//                 name and its address NAME:PORT, resolved when a peer
//                 connects. A requeued job that lands on other nodes gets
//                 their names from Slurm, with no file to edit.
//   dns:NAME:PORT the addresses NAME resolves to (a Kubernetes headless
//                 Service), each agent's node id learned from the agent
//                 itself (cluster/dns_peers.h). Only the agent can use it:
//                 LoadPeers checks the value and fails with
//                 kFailedPrecondition.
//
// A value that starts with "slurm:" (or "dns:") is always that source (a hostfile
// of that name can be given as ./slurm:...). Errors are kInvalidArgument (a
// bad value, a variable that is not set, a list that does not expand, a
// name that is not a valid node id) or the hostfile's, each naming the
// value and what to do. Thread-safe; reads the environment through getenv.
#pragma once

#include <functional>
#include <string_view>

#include "cluster/membership.h"
#include "tierckpt/status.h"

namespace tierckpt::cluster {

inline constexpr std::string_view kSlurmPeersPrefix = "slurm:";

// getenv: how variables are read (tests pass their own).
Result<Membership> LoadPeers(std::string_view spec,
                             const std::function<const char*(const char*)>& getenv = ::getenv);

}  // namespace tierckpt::cluster
