#include "tier/namespace_policy.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::TierHarness;
using testing::WriteStep;

TEST(NamespacePolicyTest, ADeclaredPolicyCombinesWithTheAgentsFlagsAsTheStricter) {
  const NamespacePolicy none;
  EXPECT_EQ(EffectiveKeepMemory(3, none), 3u);
  EXPECT_EQ(EffectiveKeepMemory(3, NamespacePolicy{1, 0, 0}), 1u);
  EXPECT_EQ(EffectiveKeepMemory(3, NamespacePolicy{5, 0, 0}), 3u);  // a writer never widens the agent's
  EXPECT_EQ(EffectiveKeepDurable(0, NamespacePolicy{0, 2, 0}), 2u);  // agent keeps all
  EXPECT_EQ(EffectiveKeepDurable(4, NamespacePolicy{0, 2, 0}), 2u);
  EXPECT_EQ(EffectiveKeepDurable(1, NamespacePolicy{0, 2, 0}), 1u);
  EXPECT_EQ(EffectiveKeepDurable(4, none), 4u);
  std::vector<uint64_t> persisted;
  for (uint64_t s = 1; s <= 12; ++s) {
    if (PersistsStep(s, s == 7, /*agent_every=*/4, NamespacePolicy{0, 0, 3})) persisted.push_back(s);
  }
  EXPECT_EQ(persisted, (std::vector<uint64_t>{3, 4, 6, 7, 8, 9, 12}));  // either cadence, or asked
}

TEST(NamespacePolicyTest, ADifferentPolicyIsRefusedWhileItsDeclarerIsConnectedAndReplacesItAfter) {
  NamespacePolicies p;
  const NamespacePolicy a{2, 0, 5}, b{1, 0, 5};
  ASSERT_TRUE(p.Declare("job", a, 1, "python pid 10").ok());
  ASSERT_TRUE(p.Declare("job", a, 2, "python pid 11").ok());  // the same: joins
  Status refused = p.Declare("job", b, 3, "python pid 12");
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  EXPECT_NE(refused.message().find("keep_memory=2 keep_durable=0 persist_every=5"), std::string::npos);
  EXPECT_NE(refused.message().find("keep_memory=1 keep_durable=0 persist_every=5"), std::string::npos);
  EXPECT_NE(refused.message().find("python pid 10"), std::string::npos);
  EXPECT_NE(refused.message().find("python pid 12"), std::string::npos);
  EXPECT_EQ(p.Get("job"), a);
  p.Release(1);
  EXPECT_EQ(p.Declare("job", b, 3, "python pid 12").code(), Code::kFailedPrecondition);  // 2 still holds it
  p.Release(2);
  EXPECT_EQ(p.Get("job"), a);  // outlives its declarers
  ASSERT_TRUE(p.Declare("job", b, 3, "python pid 12").ok());
  EXPECT_EQ(p.Get("job"), b);
  ASSERT_TRUE(p.Declare("job", a, 3, "python pid 12").ok());  // its only declarer may change it
  EXPECT_EQ(p.Get("job"), a);
  ASSERT_TRUE(p.Declare("job", NamespacePolicy{}, 4, "python pid 13").ok());  // empty: no opinion
  EXPECT_EQ(p.Get("job"), a);
  EXPECT_EQ(p.Get("other"), NamespacePolicy{});
}

TEST(NamespacePolicyTest, TheTierPersistsAndRetainsAsTheDeclaredPolicySays) {
  TierHarness h(64u << 20, /*keep_last=*/3, /*has_durable=*/true, /*persist_every=*/0);
  MemoryTier& t = *h.tier;
  std::vector<uint64_t> hooked;
  t.SetPersistHook([&](const std::string& ns, uint64_t step) {
    if (ns == "job") hooked.push_back(step);
  });
  ASSERT_TRUE(t.policies().Declare("job", NamespacePolicy{1, 0, 2}, 1, "test").ok());
  for (uint64_t s = 1; s <= 4; ++s) {
    ASSERT_TRUE(WriteStep(t, "job", s, {{"a", "a"}}).ok());
    ASSERT_TRUE(WriteStep(t, "other", s, {{"a", "a"}}).ok());
  }
  EXPECT_EQ(hooked, (std::vector<uint64_t>{2, 4}));
  // keep 1: steps waiting to persist are kept beside the newest, the others dropped.
  EXPECT_FALSE(t.HasCommitted("job", 1));
  EXPECT_FALSE(t.HasCommitted("job", 3));
  EXPECT_TRUE(t.HasCommitted("job", 4));
  EXPECT_TRUE(t.HasCommitted("other", 2) && t.HasCommitted("other", 3) && t.HasCommitted("other", 4));
}

}  // namespace
}  // namespace tierckpt::agent
