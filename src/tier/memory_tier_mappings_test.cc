// The memory tier's kept read mappings (tier/read_mappings.h) across the
// life of its files: seal, commit, recycling through the pool, resizing,
// unlinking, Verify.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <string>

#include "os/files.h"
#include "tier/memory_tier.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::InodeOf;
using testing::TierHarness;
using testing::WriteStep;

constexpr uint64_t kKiB = 1024;

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 11);
  return s;
}

// A tier that keeps mappings of files from 4 KiB on (the default is 1 MiB)
// and hashes every sealed object, so seals go through the mappings.
void KeepSmallMappings(TierHarness& h) {
  h.options.keep_mapping_min_bytes = 4 * kKiB;
  h.options.verify_on_seal = true;
  ASSERT_TRUE(h.Reopen().ok());
}

TEST(MemoryTierMappingsTest, SealMapsEachFileOnceAndARecycledSegmentReusesItsMapping) {
  TierHarness h;
  KeepSmallMappings(h);
  MemoryTier& t = *h.tier;
  const std::string a = Pattern(64 * kKiB, 'a'), b = Pattern(96 * kKiB, 'b');
  ASSERT_TRUE(WriteStep(t, "job", 1, {{"a", a}, {"b", b}}).ok());  // commit waits for the seal hashes
  ReadMappingsStats s = t.read_mappings().Stats();
  EXPECT_EQ(s.maps, 2u);
  EXPECT_EQ(s.mappings, 2u);
  EXPECT_EQ(s.mapped_bytes, a.size() + b.size());
  const uint64_t ino_a = InodeOf(Layout::ObjectPath(h.StepDir("job", 1), "a"));

  // Deleted: the files go to the pool, their mappings stay.
  ASSERT_TRUE(t.DeleteStep("job", 1).ok());
  EXPECT_EQ(t.Stats().pool_segments, 2u);
  EXPECT_EQ(t.read_mappings().Stats().mappings, 2u);

  // A new object of a's size takes a's segment and is hashed through a's mapping.
  const std::string c = Pattern(64 * kKiB, 'c');
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"c", c}}).ok());
  EXPECT_EQ(InodeOf(Layout::ObjectPath(h.StepDir("job", 2), "c")), ino_a);
  s = t.read_mappings().Stats();
  EXPECT_EQ(s.maps, 2u);
  EXPECT_EQ(s.hits, 1u);

  // Verify reads through the same mapping and sees the new bytes.
  Result<MemoryVerifyResult> v = t.VerifyStep("job", 2);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->errors.empty()) << v->errors[0];
  EXPECT_EQ(t.read_mappings().Stats().maps, 2u);
  EXPECT_EQ(t.read_mappings().Stats().hits, 2u);
  EXPECT_EQ(t.Stats().read_mappings, 2u);
}

TEST(MemoryTierMappingsTest, ReleasingAPoolSegmentReleasesItsMappingAndAGrownSegmentIsRemapped) {
  TierHarness h(/*budget=*/256 * kKiB);
  KeepSmallMappings(h);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "job", 1, {{"a", Pattern(128 * kKiB, 'a')}, {"b", Pattern(64 * kKiB, 'b')}}).ok());
  ASSERT_TRUE(t.DeleteStep("job", 1).ok());  // pool: a (128 KiB), b (64 KiB)
  ASSERT_EQ(t.read_mappings().Stats().mappings, 2u);

  // 224 KiB fits only if b's segment is unlinked; a's is taken and grown.
  const std::string big = Pattern(224 * kKiB, 'z');
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"big", big}}).ok());
  EXPECT_EQ(t.Stats().pool_segments, 0u);
  ReadMappingsStats s = t.read_mappings().Stats();
  EXPECT_EQ(s.forgotten, 1u);  // b: unlinked, its mapping released
  EXPECT_EQ(s.maps, 3u);       // a: grown past its mapping, mapped again
  EXPECT_EQ(s.mappings, 1u);
  EXPECT_EQ(s.mapped_bytes, big.size());
  Result<MemoryVerifyResult> v = t.VerifyStep("job", 2);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->errors.empty());
}

TEST(MemoryTierMappingsTest, AFileUnlinkedInsteadOfPooledReleasesItsMapping) {
  TierHarness h(/*budget=*/512 * kKiB);
  KeepSmallMappings(h);
  ASSERT_TRUE(WriteStep(*h.tier, "a", 1, {{"x", Pattern(128 * kKiB, 'a')}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "b", 1, {{"x", Pattern(128 * kKiB, 'b')}}).ok());
  // Restart with a budget that the two newest steps (never evicted) overrun.
  h.options.budget_bytes = 128 * kKiB;
  ASSERT_TRUE(h.Reopen().ok());
  MemoryTier& t = *h.tier;
  Result<MemoryVerifyResult> v = t.VerifyStep("a", 1);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->errors.empty());
  ASSERT_EQ(t.read_mappings().Stats().mappings, 1u);
  // Over budget, the pool may not keep the file: it is unlinked, and its
  // mapping must not pin its pages.
  ASSERT_TRUE(t.DeleteStep("a", 1).ok());
  EXPECT_EQ(t.Stats().pool_segments, 0u);
  ReadMappingsStats s = t.read_mappings().Stats();
  EXPECT_EQ(s.mappings, 0u);
  EXPECT_EQ(s.forgotten, 1u);
}

TEST(MemoryTierMappingsTest, VerifyThroughAKeptMappingSeesLaterDamage) {
  TierHarness h;
  KeepSmallMappings(h);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "job", 4, {{"w", Pattern(64 * kKiB, 'w')}}).ok());
  Result<MemoryVerifyResult> v = t.VerifyStep("job", 4);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->errors.empty());
  // Damage the committed file behind the agent's back.
  const std::string path = Layout::ObjectPath(h.StepDir("job", 4), "w");
  Result<UniqueFd> fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(PwriteAll(fd->get(), "XXXX", 4, 1000, path).ok());
  v = t.VerifyStep("job", 4);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->errors.size(), 1u);
  EXPECT_NE(v->errors[0].find("hashes to"), std::string::npos) << v->errors[0];
  EXPECT_EQ(t.read_mappings().Stats().maps, 1u);  // both verifies read the seal's mapping
}

TEST(MemoryTierMappingsTest, SmallObjectsAreNotKeptMapped) {
  TierHarness h;  // default: files under 1 MiB are read, not kept mapped
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "job", 5, {{"s", Pattern(64 * kKiB, 's')}}).ok());
  Result<MemoryVerifyResult> v = t.VerifyStep("job", 5);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->errors.empty());
  EXPECT_EQ(t.read_mappings().Stats().maps, 0u);
  EXPECT_EQ(t.Stats().read_mappings, 0u);
}

}  // namespace
}  // namespace tierckpt::agent
