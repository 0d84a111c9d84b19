// commit_tree.cc — see commit_tree.h.
#include "replication/commit_tree.h"

#include <xxhash.h>

#include <algorithm>

namespace tierckpt::agent {

Result<CommitTree> CommitTree::Create(std::vector<std::string> members, std::string_view root,
                                      uint32_t fan_out) {
  if (fan_out == 0) return InvalidArgument("a commit tree needs a fan-out of at least 1 (--commit-fan-out)");
  if (!std::is_sorted(members.begin(), members.end()) ||
      std::adjacent_find(members.begin(), members.end()) != members.end()) {
    return InvalidArgument("the members of a commit tree must be sorted and unique");
  }
  auto it = std::lower_bound(members.begin(), members.end(), root);
  if (it == members.end() || *it != root) {
    return InvalidArgument("the root of a commit tree, node " + std::string(root) +
                           ", is not among its members");
  }
  const size_t index = static_cast<size_t>(it - members.begin());
  return CommitTree(std::move(members), index, fan_out);
}

std::optional<size_t> CommitTree::PositionOf(std::string_view node) const {
  auto it = std::lower_bound(members_.begin(), members_.end(), node);
  if (it == members_.end() || *it != node) return std::nullopt;
  const size_t n = members_.size();
  return (static_cast<size_t>(it - members_.begin()) + n - root_) % n;
}

std::vector<std::string> CommitTree::ChildrenOf(std::string_view node) const {
  std::vector<std::string> out;
  std::optional<size_t> p = PositionOf(node);
  if (!p) return out;
  const size_t n = members_.size();
  const size_t k = fan_out_;
  if (*p > (n - 1) / k) return out;  // k·p+1 >= n (and no overflow)
  for (size_t c = k * *p + 1; c <= k * *p + k && c < n; ++c) out.push_back(AtPosition(c));
  return out;
}

std::optional<std::string> CommitTree::ParentOf(std::string_view node) const {
  std::optional<size_t> p = PositionOf(node);
  if (!p || *p == 0) return std::nullopt;
  return AtPosition((*p - 1) / fan_out_);
}

std::optional<size_t> CommitTree::LevelOf(std::string_view node) const {
  std::optional<size_t> p = PositionOf(node);
  if (!p) return std::nullopt;
  size_t level = 0;
  for (size_t q = *p; q > 0; q = (q - 1) / fan_out_) ++level;
  return level;
}

size_t CommitTree::Depth() const { return *LevelOf(AtPosition(members_.size() - 1)); }

uint64_t NamesDigest(const std::vector<std::string>& names) {
  uint64_t sum = 0;
  for (const std::string& n : names) sum += XXH3_64bits(n.data(), n.size());
  return sum;
}

void AddPart(SubtreeSum* sum, const Manifest& part) {
  sum->parts += 1;
  sum->objects += part.objects.size();
  sum->bytes += part.TotalBytes();
  for (const ObjectEntry& e : part.objects) sum->names += XXH3_64bits(e.name.data(), e.name.size());
  sum->world_size = std::max(sum->world_size, part.world_size);
  sum->checksums_pending = sum->checksums_pending || part.checksums_pending;
}

void AddChild(SubtreeSum* sum, const SubtreeSum& child) {
  sum->parts += child.parts;
  sum->objects += child.objects;
  sum->bytes += child.bytes;
  sum->names += child.names;
  sum->world_size = std::max(sum->world_size, child.world_size);
  sum->checksums_pending = sum->checksums_pending || child.checksums_pending;
  sum->depth = std::max(sum->depth, child.depth + 1);
}

}  // namespace tierckpt::agent
