// single_node.cc — see cluster.h: the cluster of an agent without peers.
#include "replication/cluster.h"
#include "tier/step_state.h"

namespace tierckpt::agent {

Status ObjectNotInStep(std::string_view ns, uint64_t step, std::string_view name) {
  return NotFound("object " + std::string(name) + " is not in " + StepLabel(ns, step));
}

Result<SubtreeSum> SingleNode::CommitOtherParts(const wire::CommitStepRequest& req) {
  return FailedPrecondition(
      "step " + StepLabel(req.ns, req.step) + " spans " + std::to_string(req.members.size()) +
      " nodes, but this agent runs without peers; start every node's agent with --peers and "
      "--peer-secret-file (docs/multinode.md), or save from one node");
}

Result<PartObject> SingleNode::OpenFromOtherParts(const Manifest& own, const std::string& name) {
  return ObjectNotInStep(own.ns, own.step, name);
}

Status SingleNode::FetchPart(MemoryTier*, std::string_view member, std::string_view ns, uint64_t step) {
  return FailedPrecondition("cannot fetch node " + std::string(member) + "'s part of " + StepLabel(ns, step) +
                            ": this agent runs without peers (start it with --peers)");
}

Result<MemoryTier*> SingleNode::PartCopy(std::string_view member) {
  return FailedPrecondition("this agent keeps no copy of node " + std::string(member) +
                            "'s parts: it runs without peers (start it with --peers)");
}

Result<std::string> SingleNode::RestoreFromHolders(MemoryTier*, std::string_view ns, uint64_t step) {
  return NotFound("no replica holder keeps " + StepLabel(ns, step) + ": this agent runs without peers");
}

Result<Manifest> SingleNode::ManifestFromHolders(std::string_view ns, uint64_t step) {
  return NotFound("no replica holder keeps " + StepLabel(ns, step) + ": this agent runs without peers");
}

Cluster* SingleNodeCluster() {
  static Cluster* const single = new SingleNode();  // stateless; never destroyed
  return single;
}

}  // namespace tierckpt::agent
