// commit.cc — see commit.h.
#include "replication/commit.h"

#include "cluster/placement_json.h"
#include "ops/metrics.h"

namespace tierckpt::agent {

Result<Manifest> CommitOnNode(const CommitDeps& d, const wire::CommitStepRequest& req, std::string_view writer) {
  StepSpan span;
  span.members = req.members;
  const bool replicated = d.replicator != nullptr && !d.replicator->holders().empty();
  if (replicated) span.placement = cluster::PlacementToJsonText(d.replicator->placement());
  Result<Manifest> committed =
      d.tier->CommitStep(req.ns, req.step, req.world_size, req.persist, req.expected_objects, span, writer);
  if (!committed.ok()) {
    Metrics::Get().commit.Failed();
    return committed.status();
  }
  Manifest m = std::move(committed).value();
  if (!replicated) return m;
  if (d.ack == ReplicaAck::kAll) {
    // The step stays committed here either way; the error tells the writer
    // the replicas it asked for are missing (docs/replication.md).
    TC_RETURN_IF_ERROR(d.replicator->Replicate(req.ns, req.step));
    return m;
  }
  Replicator* rep = d.replicator;
  d.replication_queue->Submit([rep, ns = req.ns, step = req.step] { rep->Replicate(ns, step).IgnoreError(); });
  return m;
}

}  // namespace tierckpt::agent
