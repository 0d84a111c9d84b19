// The commit tree of a step spanning nodes (issue 21 item 2, decision 102):
// its shape (commit_tree.h).
#include "replication/commit_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>


namespace tierckpt::agent {
namespace {

std::vector<std::string> Ids(int n) {
  std::vector<std::string> ids;
  for (int i = 1; i <= n; ++i) ids.push_back("n" + std::to_string(i));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// ceil(log_k(N·(k−1)+1)) − 1 by counting: the levels a k-ary tree of N nodes needs.
size_t ExpectedDepth(size_t n, size_t k) {
  size_t depth = 0;
  size_t level = 1;
  size_t covered = 1;
  while (covered < n) {
    level *= k;
    covered += level;
    ++depth;
  }
  return depth;
}

TEST(CommitTreeTest, EveryMemberButTheRootHasOneParentAndNoNodeMoreThanKChildren) {
  for (uint32_t k : {1u, 2u, 4u, 16u}) {
    for (int n : {1, 2, 3, 5, 17, 18, 64, 100}) {
      const std::vector<std::string> ids = Ids(n);
      const std::string root = ids[ids.size() / 2];  // not the first: the rotation matters
      Result<CommitTree> tree = CommitTree::Create(ids, root, k);
      ASSERT_TRUE(tree.ok()) << tree.status().ToString();
      std::map<std::string, int> asked;  // how often each member is someone's child
      size_t deepest = 0;
      for (const std::string& id : ids) {
        const std::vector<std::string> children = tree->ChildrenOf(id);
        EXPECT_LE(children.size(), k) << id;
        for (const std::string& c : children) {
          ++asked[c];
          EXPECT_EQ(tree->ParentOf(c), id) << c;
          EXPECT_EQ(*tree->LevelOf(c), *tree->LevelOf(id) + 1) << c;
        }
        deepest = std::max(deepest, *tree->LevelOf(id));
      }
      EXPECT_EQ(asked.count(root), 0u);
      EXPECT_FALSE(tree->ParentOf(root).has_value());
      EXPECT_EQ(asked.size(), ids.size() - 1) << "k=" << k << " N=" << n;  // everyone reached once
      for (const auto& [id, times] : asked) EXPECT_EQ(times, 1) << id;
      EXPECT_EQ(tree->Depth(), deepest);
      EXPECT_EQ(tree->Depth(), ExpectedDepth(n, k)) << "k=" << k << " N=" << n;
    }
  }
}

TEST(CommitTreeTest, WithTheDefaultFanOutUpTo17MembersTheRootAsksEveryoneItself) {
  const std::vector<std::string> ids = Ids(17);
  Result<CommitTree> tree = CommitTree::Create(ids, "n5", kDefaultCommitFanOut);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->ChildrenOf("n5").size(), 16u);
  EXPECT_EQ(tree->Depth(), 1u);
  tree = CommitTree::Create(Ids(18), "n5", kDefaultCommitFanOut);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->Depth(), 2u);
}

TEST(CommitTreeTest, BadTreesAreRefusedNamingWhy) {
  EXPECT_NE(CommitTree::Create({"a", "b"}, "c", 4).status().message().find("node c, is not among"),
            std::string::npos);
  EXPECT_EQ(CommitTree::Create({"b", "a"}, "a", 4).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(CommitTree::Create({"a", "a"}, "a", 4).status().code(), Code::kInvalidArgument);
  EXPECT_NE(CommitTree::Create({"a", "b"}, "a", 0).status().message().find("fan-out"), std::string::npos);
  Result<CommitTree> tree = CommitTree::Create({"a", "b"}, "a", 4);
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(tree->ChildrenOf("z").empty());
  EXPECT_FALSE(tree->ParentOf("z").has_value());
}

TEST(CommitTreeTest, TheNamesDigestIsASumSoTheTreesShapeDoesNotChangeIt) {
  EXPECT_EQ(NamesDigest({"a", "b", "c"}), NamesDigest({"c", "a", "b"}));
  EXPECT_NE(NamesDigest({"a", "b"}), NamesDigest({"a", "c"}));
  EXPECT_NE(NamesDigest({"a", "a"}), NamesDigest({}));  // a sum, not a xor: duplicates do not cancel
}

}  // namespace
}  // namespace tierckpt::agent
