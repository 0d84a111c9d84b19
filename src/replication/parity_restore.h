// parity_restore.h — a replacement node's part of a committed step rebuilt
// from the survivors of its rs:K+M group (issue 23 item 3, decision 139).
//
// A node that lost its memory (a new machine under the same node id) and
// whose part of (ns, step) no replica holder has asks its group's M parity
// holders for the group's record (kGetParityRecord; the holders' records are
// merged) and its data members for their part manifests (kGetManifest).
// A data member counts as a survivor only when its part is the one the
// record describes (same objects, sizes and checksums: ParityPartIdentity),
// a holder only when its record describes its piece. With fewer than the
// group's data members' count of survivors (more than M of the group's
// pieces gone, this node's included) nothing is read and the answer is
// kFailedPrecondition naming the group, how many pieces are gone, M and why
// each is: the caller falls back to the durable tier. Otherwise
// ec::RebuildPiece decodes this node's piece from K survivors (data pieces
// first, each fetched whole over the peer transport; a corrupt survivor is
// set aside and another used, decision 124) into memory, every object is
// checked against the record's checksum, and the part is restored into the
// tier with MemoryTier::Restore (checked again, published last) under a
// manifest made from the record (PartManifestFromRecord): the part's
// manifest as its member committed it, membership of a step spanning nodes
// included (decision 141).
//
// Not rebuilt: a part of a step spanning nodes whose record was written
// before decision 141 (it does not carry the lost part's membership fields;
// a survivor's part names the step's members: kFailedPrecondition, the
// durable tier serves it).
//
// Memory: the rebuilt part is held in process memory twice (the rebuild's
// output, then the staging store Restore reads), and each survivor used is
// fetched whole into a buffer. Thread-safe (no shared state); blocking.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ec/parity_record.h"
#include "replication/parity_sender.h"
#include "replication/replicator.h"
#include "tier/memory_tier.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// The part manifest of data index `index` of the record's group as its
// member committed it (ec::ParityRecord::PartManifest: objects, world size,
// creation time, membership and placement) when the record carries it and
// names `node`; else (a record written before decision 141) its objects
// (written by `node`), ns and step, world size unknown (0), no members (a
// step on one node), created now.
Manifest PartManifestFromRecord(const ec::ParityRecord& record, uint32_t index, const std::string& node);

// This node's record of its group's parity of (ns, step), merged from every
// holder that answers; kNotFound naming each holder and its answer when none
// has it sealed.
Result<ec::ParityRecord> GroupRecord(const ParitySender& me, Replicator* replicator, std::string_view ns,
                                     uint64_t step);

// Rebuilds this node's part of (ns, step) (me: its group and index) from
// its group's survivors and restores it into tier. Returns what it was
// rebuilt from ("parity group 0: data n2, n3; parity n5, n6"). Errors:
// kFailedPrecondition when fewer survivors than needed remain (more than M
// pieces gone), naming the counts and each piece's state, or when the step
// spans nodes and the record lacks the part's membership (written before
// decision 141); RebuildPiece's and Restore's errors with context.
Result<std::string> RestoreFromParity(const ParitySender& me, Replicator* replicator, MemoryTier* tier,
                                      std::string_view ns, uint64_t step);

// A degraded read (decision 158): another member's part of (ns, step),
// rebuilt the same way from its group's survivors when neither the member
// nor any holder of its replicas answers, and restored into copy (this
// node's tier of that member's parts) as that member's part. object: the
// object the reader wants; kNotFound, before any piece moves, when the
// group's record does not place it in the member's part. Errors otherwise
// as RestoreFromParity's; logs part_rebuilt_from_parity.
Result<std::string> RestoreMemberFromParity(const cluster::ParityLayout& layout, std::string_view member,
                                            Replicator* replicator, MemoryTier* copy, std::string_view ns,
                                            uint64_t step, std::string_view object);

// The holders of group g that do not hold (ns, step) sealed, each with its
// answer ("n5 (parity 0): not found: ..."); empty when every holder does
// (the group is redundant). For a coordinator waiting for the groups of a
// step's other members under --parity-ack all (decision 161).
std::vector<std::string> HoldersNotSealed(const cluster::ParityGroup& g, Replicator* replicator, std::string_view ns,
                                          uint64_t step);

// The part both rebuild: data member `lost` of group.
struct LostPart {
  const cluster::ParityGroup* group = nullptr;
  uint32_t k = 0;
  uint32_t m = 0;
  uint32_t lost = 0;
  std::string lost_why;  // why its own piece counts as gone (for the error's list)
  std::string object;    // "" or an object the part must hold
  bool as_copy = false;  // into this node's copy of that member's parts (the log says which)
};
Result<std::string> RebuildPart(const LostPart& target, Replicator* replicator, MemoryTier* tier,
                                std::string_view ns, uint64_t step);

}  // namespace tierckpt::agent
