// parity_sender.h — a member's side of the erasure-coded memory tier
// (issue 23, decision 126): after a memory commit of its part, it asks each
// of the M parity holders of its group (cluster/parity_groups.h PlaceParity)
// to fold the part (kFoldParity; the holder pulls it), in parallel, and
// reports per holder what came back.
//
// A step is redundant only when every holder answered that its piece is
// sealed: every data member of the group folded and verified there, its
// pieces and record written (ParityReport::redundant, modelled on
// Replicator::Replicate's "every holder verified its replica"). With wait > 0
// each holder answers once the group is sealed or wait passed, so the
// member that folds first still learns when the group completes.
// DropParity asks every holder to forget its parity of a step.
//
// Thread-safe (const after construction); connections are made per call.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/parity_groups.h"
#include "replication/parity_holder.h"
#include "replication/replicator.h"

namespace tierckpt::agent {

struct ParityAck {
  std::string holder;
  Status status;          // the request's outcome
  ParityFoldState state;  // when status is Ok
};

struct ParityReport {
  std::vector<ParityAck> holders;  // in parity index order
  // Every holder answered Ok with its piece sealed (false with no holders).
  bool redundant() const;
  // "n4: sealed; n5: 2 of 3 folded; n6: <error>", for logs and errors.
  std::string Describe() const;
};

class ParitySender {
 public:
  // replicator (for addresses and requests) must outlive the sender.
  // kInvalidArgument when node_id has no group in layout.
  static Result<ParitySender> Create(Replicator* replicator, cluster::ParityLayout layout, std::string node_id);

  const cluster::ParityLayout& layout() const { return layout_; }
  const cluster::ParityGroup& group() const { return layout_.groups[group_]; }
  uint32_t index() const { return index_; }  // this node's data index in its group
  const std::string& node_id() const { return node_id_; }

  // Asks each holder to fold this node's committed part of (ns, step);
  // wait: how long a holder may wait for the rest of the group (0: answer
  // once this part is folded).
  ParityReport SendParity(std::string_view ns, uint64_t step, std::chrono::milliseconds wait) const;
  // SendParity without its log line (a caller asking again in slices logs
  // the outcome once).
  ParityReport Ask(std::string_view ns, uint64_t step, std::chrono::milliseconds wait) const;
  // A report as a Status, as MakeRedundant gives it.
  Status Outcome(std::string_view ns, uint64_t step, const ParityReport& report) const;
  // SendParity as a commit's outcome, as Replicator::Replicate is for
  // replicas: Ok only when the report is redundant; otherwise the error
  // names each holder and its state (the first failure's code, else
  // kUnavailable: some member's part has not reached the holders in time)
  // and says the step is committed here but not yet redundant.
  Status MakeRedundant(std::string_view ns, uint64_t step, std::chrono::milliseconds wait) const;
  // Asks each holder to forget its parity of (ns, step); returns the holders
  // that held some. The error names each holder that failed.
  Result<std::vector<std::string>> DropParity(std::string_view ns, uint64_t step) const;

 private:
  ParitySender(Replicator* replicator, cluster::ParityLayout layout, std::string node_id, uint32_t group,
               uint32_t index)
      : replicator_(replicator),
        layout_(std::move(layout)),
        node_id_(std::move(node_id)),
        group_(group),
        index_(index) {}

  Replicator* replicator_;
  cluster::ParityLayout layout_;
  std::string node_id_;
  uint32_t group_ = 0;
  uint32_t index_ = 0;
};

}  // namespace tierckpt::agent
