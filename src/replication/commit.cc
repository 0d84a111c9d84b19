// commit.cc — see commit.h.
#include "replication/commit.h"

#include "ops/metrics.h"

namespace tierckpt::agent {

Result<Manifest> CommitOnNode(const CommitDeps& d, const wire::CommitStepRequest& req, std::string_view writer,
                              std::string_view coordinator) {
  StepSpan span;
  span.members = req.members;
  span.placement = d.cluster->PlacementJson();
  span.coordinator = std::string(coordinator);
  Result<Manifest> committed =
      d.tier->CommitStep(req.ns, req.step, req.world_size, req.persist, req.expected_objects, span, writer);
  if (!committed.ok()) {
    d.tier->options().metrics->commit.Failed();
    return committed.status();
  }
  Manifest m = std::move(committed).value();
  TC_RETURN_IF_ERROR(d.cluster->ReplicateCommitted(req.ns, req.step, /*down_tree=*/!coordinator.empty()));
  // The coordinator of a step spanning nodes: the parts committed down its
  // tree did not wait for their groups (decision 146); it waits for them now.
  if (coordinator.empty() && req.members.size() > 1) {
    TC_RETURN_IF_ERROR(d.cluster->AwaitMembersParity(req.ns, req.step, req.members));
  }
  return m;
}

}  // namespace tierckpt::agent
