// parts.h — how the parts of a step spanning nodes add up to one manifest
// (docs/multinode.md): each member node commits its own objects as a part;
// the coordinator, and the persister writing the durable copy, merge them.
//
// MergeParts: one manifest listing the objects of every part, each with its
// writer node. Every part must be of the same step with the same members,
// and there must be one part per member; the same object name in two parts
// is kCorruption (two nodes wrote it).
//
// Pure functions over their arguments; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// node: the node id the merged manifest names as its writer.
Result<Manifest> MergeParts(const std::vector<Manifest>& parts, std::string_view node);

// Whether `whole` (a merged manifest) lists every object of `part` with the
// same size and checksum.
bool ContainsPart(const Manifest& whole, const Manifest& part);

}  // namespace tierckpt::agent
