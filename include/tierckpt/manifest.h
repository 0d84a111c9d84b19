// tierckpt/manifest.h — the per-step manifest, the commit record of a step.
//
// A step exists in a tier if and only if its manifest does: objects are
// written and verified first, the manifest last (docs/format.md). The
// manifest is JSON, versioned by "format" and "version"; Parse accepts only
// versions it knows and rejects anything malformed with kCorruption naming
// the source and the field, so a damaged manifest can never be half-used.
//
// Values; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt {

inline constexpr int kManifestVersion = 1;
inline constexpr std::string_view kManifestFormat = "tierckpt.manifest";
// File name of the manifest inside a step directory, in every tier.
inline constexpr std::string_view kManifestName = "_tierckpt_manifest.json";
// Manifests larger than this are rejected before parsing.
inline constexpr size_t kMaxManifestBytes = 64u << 20;

struct ObjectEntry {
  std::string name;      // validated object name, unique within the step
  uint64_t size = 0;     // bytes
  std::string checksum;  // "xxh3-64:<16 hex>"; "" only while Manifest::checksums_pending
  std::string node;      // node id of the agent that wrote it
};

// What the parts of a step spanning nodes hold together. Only in the
// manifest a spanning commit answers (Client::Commit), whose `objects` are
// the coordinator's own part: the coordinator learns these sums from the
// commit tree, not the other members' manifests (decision 102). Never stored
// in a tier. JSON: "span": {"parts", "objects", "bytes", "names_digest"}.
struct SpanSummary {
  uint32_t parts = 0;    // one per member
  uint64_t objects = 0;  // in every part
  uint64_t bytes = 0;    // of every part
  // "sum64:<16 hex>": the sum (mod 2^64) of the XXH3-64 of every object's
  // name, so a writer can check the names it expects (NamesDigest).
  std::string names_digest;
};

// SpanSummary::names_digest of these names (any order), so a writer can
// compare the names it expects with what a spanning commit committed; and
// the same text for a sum of XXH3-64s already added up (mod 2^64).
std::string SpanNamesDigest(const std::vector<std::string>& names);
std::string FormatSpanNamesDigest(uint64_t sum);

// How a part of a step spanning nodes that is not the coordinator's names
// the step's members (decision 116): by their count, the XXH3-64 of their
// sorted ids (each followed by '\n', as the ring's and the part record's
// digest), this part's place among them and the coordinator, whose part
// lists them all and carries the placement. So such a part is O(its own
// objects) whatever N. JSON: "member_ref": {"count", "index", "digest":
// "xxh3-64:<16 hex>", "coordinator"}.
struct MemberRef {
  uint32_t count = 0;        // members, at least 2
  uint32_t index = 0;        // this part's node's place in the sorted members
  uint64_t digest = 0;       // of the sorted ids
  std::string coordinator;   // the node whose part lists every member
  bool operator==(const MemberRef&) const = default;
};

struct Manifest {
  std::string ns;
  uint64_t step = 0;
  uint32_t world_size = 0;       // 0 = unknown
  uint64_t created_unix_ms = 0;
  std::string node;              // node id of the committing agent
  // The nodes a step spans when it spans more than one (docs/multinode.md),
  // sorted, `node` among them; empty for a step written on one node. In a
  // memory tier a node's manifest lists its own objects (its "part"); the
  // durable manifest lists every part's objects, each with its writer node.
  // A part that is not the coordinator's names them by member_ref instead
  // (decision 116); parts written before it list them here too.
  std::vector<std::string> members;
  // Set instead of `members` in a non-coordinator part (see MemberRef).
  std::optional<MemberRef> member_ref;
  // Where the step's replicas are: a compact "tierckpt.placement" JSON
  // object (docs/placement.md) when the agents replicate, else "". Checked
  // here as a JSON object only; src/cluster/placement_json.h parses it.
  // Only in the coordinator's part and the durable manifest (decision 116).
  std::string placement;
  std::vector<ObjectEntry> objects;  // sorted by name
  // True only in a memory tier's commit record of a step committed before
  // the agent's hash of its bytes (tierckptd --commit-before-hash, decision
  // 68): the entries with an empty checksum are being hashed. Every reader
  // of the step in the agent waits for the hashes (so a manifest read from
  // a running agent never has this set), the record is rewritten once they
  // are in, a restart hashes what is still missing, and a durable tier or a
  // replica refuses such a manifest. JSON: "checksums_pending": true, absent
  // when false.
  bool checksums_pending = false;
  // Set only in the answer of a commit spanning nodes (see SpanSummary).
  std::optional<SpanSummary> span;

  uint64_t TotalBytes() const;
  bool SpansNodes() const { return members.size() > 1 || member_ref.has_value(); }
  // The number of members of a step spanning nodes (either form); 0 else.
  size_t MemberCount() const { return member_ref ? member_ref->count : members.size() > 1 ? members.size() : 0; }
  // nullptr when absent.
  const ObjectEntry* Find(std::string_view name) const;

  // Pretty JSON (2-space indent), newline-terminated.
  std::string ToJson() const;
  // source names where the bytes came from, for error messages.
  static Result<Manifest> Parse(std::string_view json, std::string_view source);
  // Checks names, checksums, sizes, duplicates, ordering. Parse calls it.
  Status Validate() const;
};

}  // namespace tierckpt
