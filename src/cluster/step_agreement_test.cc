#include "cluster/step_agreement.h"

#include <gtest/gtest.h>

#include "cluster/hostfile.h"

namespace tierckpt::cluster {
namespace {

Membership Members(const char* hostfile) {
  Result<Membership> m = ParseHostfile(hostfile, "test");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : Membership();
}

// The job that wrote the steps: four nodes, R = 2, spacing 1, so the ring
// n0 → n1 → n2 → n3 → n0 and each node's objects are also on the next node.
class StepAgreementTest : public ::testing::Test {
 protected:
  StepAgreementTest() {
    writers_ = Members("n0 h0:1\nn1 h1:1\nn2 h2:1\nn3 h3:1\n");
    placement_ = *PlacePrimary(writers_, {2, 1});
  }

  // Object "o<k>" written by node "n<k>".
  StepCandidate Step(uint64_t step) const {
    StepCandidate c;
    c.step = step;
    for (int k = 0; k < 4; ++k) c.objects.push_back({"o" + std::to_string(k), "n" + std::to_string(k)});
    c.placement = placement_;
    return c;
  }

  // Every node holds its own object and its ring predecessor's replica.
  void HoldFully(uint64_t step) {
    for (int k = 0; k < 4; ++k) {
      auto& held = holdings_.memory["n" + std::to_string(k)][step];
      held.insert("o" + std::to_string(k));
      held.insert("o" + std::to_string((k + 3) % 4));
    }
  }

  void Durable(uint64_t step, std::initializer_list<const char*> objects) {
    for (const char* o : objects) holdings_.durable[step].insert(o);
  }

  static std::string Describe(const LoadPlan& plan) {
    std::string out = "step " + std::to_string(plan.step) + ":";
    for (const ObjectSource& s : plan.sources) {
      out += " " + s.object + "=" + std::string(ToString(s.kind)) + (s.node.empty() ? "" : "@" + s.node);
    }
    return out;
  }

  Membership writers_;
  Placement placement_;
  TierHoldings holdings_;
};

TEST_F(StepAgreementTest, AllAliveReadsLocalThenPrimaries) {
  HoldFully(10);
  Result<LoadPlan> plan = NewestLoadableStep({Step(10)}, holdings_, writers_, "n0");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Describe(*plan), "step 10: o0=local@n0 o1=peer@n1 o2=peer@n2 o3=local@n0");
  EXPECT_EQ(plan->sources[1].address, "h1:1");
  EXPECT_EQ(plan->sources[1].primary, "n1");
  EXPECT_TRUE(plan->skipped.empty());
  // A reader without a memory tier (the CLI) reads every object from a peer.
  plan = NewestLoadableStep({Step(10)}, holdings_, writers_, "");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Describe(*plan), "step 10: o0=peer@n0 o1=peer@n1 o2=peer@n2 o3=peer@n3");
}

TEST_F(StepAgreementTest, ReplacedNodeLoadsFromReplicaHolders) {
  HoldFully(10);
  // n1 died; a fresh agent took its node id at a new address, memory empty.
  holdings_.memory.erase("n1");
  Membership now = Members("n0 h0:1\nn1 h9:1\nn2 h2:1\nn3 h3:1\n");
  Result<LoadPlan> plan = NewestLoadableStep({Step(10)}, holdings_, now, "n1");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Describe(*plan), "step 10: o0=peer@n0 o1=peer@n2 o2=peer@n2 o3=peer@n3");
  // The replacement has a new node id: what the dead n1 reported is ignored.
  HoldFully(10);
  Membership renamed = Members("n0 h0:1\nn2 h2:1\nn3 h3:1\nn9 h9:1\n");
  plan = NewestLoadableStep({Step(10)}, holdings_, renamed, "n9");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Describe(*plan), "step 10: o0=peer@n0 o1=peer@n2 o2=peer@n2 o3=peer@n3");
}

TEST_F(StepAgreementTest, BothHoldersDeadFallsBackToDurable) {
  HoldFully(10);
  Durable(10, {"o0", "o1", "o2", "o3"});
  Membership now = Members("n0 h0:1\nn3 h3:1\nn8 h8:1\nn9 h9:1\n");
  Result<LoadPlan> plan = NewestLoadableStep({Step(10)}, holdings_, now, "n8");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Describe(*plan), "step 10: o0=peer@n0 o1=durable o2=peer@n3 o3=peer@n3");
  EXPECT_EQ(plan->sources[1].why,
            "no live memory copy: primary \"n1\" (not a member), replica holder \"n2\" (not a member)");
  EXPECT_TRUE(plan->sources[0].why.empty());
}

TEST_F(StepAgreementTest, DurableIncompleteAndHoldersDeadLoadsAnOlderStep) {
  HoldFully(5);
  HoldFully(10);
  Durable(10, {"o0", "o2", "o3"});  // o1's upload never finished
  Durable(5, {"o0", "o1", "o2", "o3"});
  Membership now = Members("n0 h0:1\nn3 h3:1\n");
  Result<LoadPlan> plan = NewestLoadableStep({Step(5), Step(10)}, holdings_, now, "n0");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Describe(*plan), "step 5: o0=local@n0 o1=durable o2=peer@n3 o3=local@n0");
  ASSERT_EQ(plan->skipped.size(), 1u);
  EXPECT_EQ(plan->skipped[0],
            "step 10: 1 of 4 objects are in no live memory and not durable, e.g. \"o1\" (primary \"n1\" "
            "(not a member), replica holder \"n2\" (not a member))");
}

TEST_F(StepAgreementTest, NewerStepMissingAReplicaIsSkipped) {
  // Step 20: n1 died before its object reached n2; n2 survived.
  HoldFully(10);
  HoldFully(20);
  holdings_.memory["n2"][20].erase("o1");
  holdings_.memory.erase("n1");
  Membership now = Members("n0 h0:1\nn2 h2:1\nn3 h3:1\n");
  Result<LoadPlan> plan = NewestLoadableStep({Step(20), Step(10)}, holdings_, now, "n2");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->step, 10u);
  EXPECT_EQ(Describe(*plan), "step 10: o0=peer@n0 o1=local@n2 o2=local@n2 o3=peer@n3");
  ASSERT_EQ(plan->skipped.size(), 1u);
  EXPECT_NE(plan->skipped[0].find("replica holder \"n2\" (no copy in memory)"), std::string::npos)
      << plan->skipped[0];
}

TEST_F(StepAgreementTest, EveryReaderAgreesOnTheStep) {
  HoldFully(10);
  HoldFully(20);
  // Step 20's o3 is lost: its replica holder n0 is gone and n3 lost its copy.
  holdings_.memory["n3"][20].clear();
  holdings_.memory.erase("n0");
  Membership now = Members("n1 h1:1\nn2 h2:1\nn3 h3:1\n");
  for (const char* reader : {"n1", "n2", "n3", ""}) {
    Result<LoadPlan> plan = NewestLoadableStep({Step(10), Step(20)}, holdings_, now, reader);
    ASSERT_TRUE(plan.ok()) << reader << ": " << plan.status().ToString();
    EXPECT_EQ(plan->step, 10u) << reader;
  }
}

TEST_F(StepAgreementTest, AnyLiveHolderServesAfterThePlacementHolders) {
  HoldFully(10);
  holdings_.memory["n3"][10].insert("o1");  // e.g. restored there earlier
  Membership now = Members("n0 h0:1\nn3 h3:1\n");
  Result<LoadPlan> plan = NewestLoadableStep({Step(10)}, holdings_, now, "n0");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->sources[1].kind, SourceKind::kPeer);
  EXPECT_EQ(plan->sources[1].node, "n3");
  // Without a recorded placement only the primary and then any member are tried.
  StepCandidate bare = Step(10);
  bare.placement.reset();
  plan = NewestLoadableStep({bare}, holdings_, now, "n0");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Describe(*plan), "step 10: o0=local@n0 o1=peer@n3 o2=peer@n3 o3=local@n0");
}

TEST_F(StepAgreementTest, NothingLoadableIsNotFoundWithReasons) {
  Result<LoadPlan> plan = NewestLoadableStep({}, holdings_, writers_, "n0");
  EXPECT_EQ(plan.status().code(), Code::kNotFound);
  EXPECT_NE(
      plan.status().message().find("no committed step is known in any tier (memory of n0, n1, n2, n3, or "
                                   "durable)"),
      std::string::npos)
      << plan.status().message();
  HoldFully(10);
  StepCandidate empty;
  empty.step = 30;
  Membership now = Members("n0 h0:1\n");
  plan = NewestLoadableStep({Step(10), empty}, holdings_, now, "n0");
  EXPECT_EQ(plan.status().code(), Code::kNotFound);
  EXPECT_NE(plan.status().message().find("no step is loadable with the current membership (n0): step 30: its "
                                         "manifest lists no objects; step 10: 2 of 4 objects are in no live "
                                         "memory and not durable, e.g. \"o1\""),
            std::string::npos)
      << plan.status().message();
}

TEST_F(StepAgreementTest, MalformedInputIsInvalidArgument) {
  HoldFully(10);
  Result<LoadPlan> plan = NewestLoadableStep({Step(10), Step(10)}, holdings_, writers_, "n0");
  EXPECT_NE(plan.status().message().find("step 10 is listed twice"), std::string::npos)
      << plan.status().message();
  StepCandidate dup = Step(11);
  dup.objects.push_back({"o2", "n2"});
  plan = NewestLoadableStep({Step(10), dup}, holdings_, writers_, "n0");
  EXPECT_NE(plan.status().message().find("step 11 lists object \"o2\" twice"), std::string::npos)
      << plan.status().message();
  StepCandidate tampered = Step(12);
  tampered.placement->nodes[0].replica_holders = {"n3"};
  plan = NewestLoadableStep({tampered}, holdings_, writers_, "n0");
  EXPECT_EQ(plan.status().code(), Code::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("step 12: placement node \"n0\" lists replica holders"),
            std::string::npos)
      << plan.status().message();
  plan = NewestLoadableStep({Step(10)}, holdings_, writers_, "n7");
  EXPECT_NE(
      plan.status().message().find("reader node \"n7\" is not in the current membership (n0, n1, n2, n3)"),
      std::string::npos)
      << plan.status().message();
}

}  // namespace
}  // namespace tierckpt::cluster
