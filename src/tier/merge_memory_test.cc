// What the durable merger holds while it merges the part records of a step
// spanning N nodes (issue 21 item 2, decision 112). Every allocation of this
// binary is counted (operator new/delete below, so this test has a binary of
// its own): the peak of live heap bytes above what was live when the step
// was committed is what the persist needed, the records already in the store
// excluded. Before decision 112 the merger kept every record it read, each
// naming all N members, and copied them all for the merge: 2·N² ids held,
// quadratic growth; it now keeps each record's objects only. The records
// are of both formats (decision 113), as after an upgrade mid-job.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "common/names.h"
#include "store/mem_store.h"
#include "tier/part_record.h"
#include "tier/persister.h"
#include "tier/tier_test_util.h"

namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void* Counted(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  const int64_t live = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                       static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return p;
}
void Uncounted(void* p) {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return Counted(n); }
void* operator new[](size_t n) { return Counted(n); }
void operator delete(void* p) noexcept { Uncounted(p); }
void operator delete[](void* p) noexcept { Uncounted(p); }
void operator delete(void* p, size_t) noexcept { Uncounted(p); }
void operator delete[](void* p, size_t) noexcept { Uncounted(p); }

namespace tierckpt::agent {
namespace {

// A DaemonSet's node names: longer than the strings held inline.
std::string MemberId(int i) { return "ip-10-0-" + std::to_string(i / 250) + "-" + std::to_string(i % 250) + ".ec2.internal"; }

struct Merged {
  int64_t peak_extra = 0;
  size_t record_bytes = 0;      // one other member's record as stored now
  size_t old_record_bytes = 0;  // and as agents before decision 113 stored it
  size_t records = 0;
};

// The harness's node ("node-t") merges step `step` of n members: the other
// n − 1 records (one 1-byte object each, the member list of the old format)
// are in the store before its own part is committed with persist.
Merged MergeStepOf(int n) {
  testing::TierHarness h(64u << 20, 3, /*has_durable=*/true);
  auto mem = std::make_shared<MemObjectStore>("merge-memory");
  RecentErrors errors{&h.metrics};
  PersisterOptions o;
  o.threads = 1;
  o.first_backoff = std::chrono::milliseconds(1);
  o.metrics = &h.metrics;
  Persister persister(o, h.tier.get(), mem.get(), &errors);
  PartsOptions parts;
  parts.node_id = "node-t";
  persister.SetParts(parts);
  h.tier->SetPersistHook([&persister](const std::string& ns, uint64_t step) { persister.Enqueue(ns, step); });

  std::vector<std::string> members{"node-t"};
  for (int i = 1; i < n; ++i) members.push_back(MemberId(i));
  std::sort(members.begin(), members.end());
  // The merger of step s is members[s % n] (MergeTurn): pick node-t's place.
  const uint64_t step = static_cast<uint64_t>(std::find(members.begin(), members.end(), "node-t") - members.begin());
  Merged out;
  for (const std::string& member : members) {
    if (member == "node-t") continue;
    const std::string name = "__" + member + ".distcp";
    EXPECT_TRUE(mem->PutObject("job", step, name, "x", 1).ok());
    Manifest record;
    record.ns = "job";
    record.step = step;
    record.node = member;
    record.world_size = static_cast<uint32_t>(n);
    record.members = members;
    record.objects.push_back({name, 1, testing::ChecksumOf("x"), member});
    // Half the records as agents before decision 113 wrote them (the part
    // manifest with the whole list), half as now (count and digest).
    const bool old_format = (members.size() + out.records) % 2 == 0;
    const std::string json = old_format ? record.ToJson() : EncodePartRecord(record);
    ++out.records;
    if (!old_format) out.record_bytes = json.size();
    if (old_format) out.old_record_bytes = json.size();
    EXPECT_TRUE(mem->PutObject("job", step, PartRecordName(member), json.data(), json.size()).ok());
  }
  EXPECT_TRUE(testing::WriteObject(*h.tier, "job", step, "__node-t.distcp", "y").ok());
  const int64_t before = g_live.load();
  g_peak.store(before);
  EXPECT_TRUE(h.tier->CommitStep("job", step, static_cast<uint32_t>(n), /*persist=*/true, {}, StepSpan{members, ""})
                  .ok());
  Result<PersistStatus> st = h.tier->WaitPersist("job", step, std::chrono::seconds(30));
  out.peak_extra = g_peak.load() - before;
  EXPECT_TRUE(st.ok() && st->state == PersistState::kDurable) << (st.ok() ? st->error : st.status()).ToString();
  Result<Manifest> durable = mem->ReadManifest("job", step);
  EXPECT_TRUE(durable.ok()) << durable.status().ToString();
  if (durable.ok()) {
    EXPECT_EQ(durable->objects.size(), static_cast<size_t>(n));
    EXPECT_EQ(durable->members, members);
  }
  persister.Stop(std::chrono::milliseconds(0));
  return out;
}

TEST(MergeMemoryTest, TheMergerHoldsMemoryLinearInTheMembersNotQuadratic) {
  std::vector<int> sizes{16, 32, 64, 128};
  std::vector<Merged> runs;
  for (int n : sizes) {
    runs.push_back(MergeStepOf(n));
    std::printf("[merge-memory] N=%d record=%zu B (old format %zu B) peak above the committed step=%lld B\n", n,
                runs.back().record_bytes, runs.back().old_record_bytes, static_cast<long long>(runs.back().peak_extra));
  }
  // From 16 to 128 members (8×): linear growth is 8× plus what does not
  // grow; the quadratic merge of before grew 30× and more here.
  const double growth = static_cast<double>(runs.back().peak_extra) / static_cast<double>(runs.front().peak_extra);
  EXPECT_LT(growth, 16.0) << "the merger's peak memory grew " << growth << "× from N = 16 to N = 128";
}

}  // namespace
}  // namespace tierckpt::agent
