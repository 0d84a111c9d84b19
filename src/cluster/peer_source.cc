// peer_source.cc — see peer_source.h.
#include "cluster/peer_source.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "cluster/address.h"
#include "cluster/dns_peers.h"
#include "cluster/hostfile.h"
#include "cluster/hostlist.h"
#include "common/names.h"

namespace tierckpt::cluster {
namespace {

Result<Membership> FromSlurm(std::string_view spec, const std::function<const char*(const char*)>& getenv) {
  const std::string port(spec.substr(kSlurmPeersPrefix.size()));
  // The port is checked as part of an address, with the address rules' message.
  if (Result<PeerAddress> probe = ParseAddress("localhost:" + port); !probe.ok()) {
    return InvalidArgument("--peers " + QuoteForMessage(spec) + ": " + QuoteForMessage(port) +
                           " is not a port (1..65535); write slurm:PORT, e.g. slurm:7100");
  }
  const char* var = "SLURM_JOB_NODELIST";
  const char* list = getenv(var);
  if (list == nullptr || *list == '\0') {
    var = "SLURM_NODELIST";
    list = getenv(var);
  }
  if (list == nullptr || *list == '\0') {
    return InvalidArgument("--peers " + std::string(spec) +
                           ": neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set, so this is not a Slurm job "
                           "step; start the agent with srun inside the job, or give --peers a hostfile");
  }
  Result<std::vector<std::string>> names = ExpandHostlist(list);
  if (!names.ok()) return names.status().WithContext(std::string("--peers ") + std::string(spec) + ", " + var);
  std::vector<Member> members;
  members.reserve(names->size());
  for (std::string& name : *names) {
    Member m;
    m.address = name + ":" + port;
    m.node_id = std::move(name);
    members.push_back(std::move(m));
  }
  Result<Membership> out = Membership::Create(std::move(members));
  if (!out.ok()) return out.status().WithContext(std::string("--peers ") + std::string(spec) + ", " + var);
  return out;
}

}  // namespace

Result<Membership> LoadPeers(std::string_view spec, const std::function<const char*(const char*)>& getenv) {
  if (spec.substr(0, kSlurmPeersPrefix.size()) == kSlurmPeersPrefix) return FromSlurm(spec, getenv);
  if (IsDnsPeers(spec)) {
    TC_RETURN_IF_ERROR(ParseDnsPeers(spec).status());
    return FailedPrecondition("--peers " + std::string(spec) +
                              ": a dns: source is resolved by the agent, which learns each address's node id from "
                              "the agent answering there (cluster/dns_peers.h); give this tool a hostfile");
  }
  return ReadHostfile(std::string(spec));
}

}  // namespace tierckpt::cluster
