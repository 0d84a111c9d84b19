// Each fault of FaultInjectingStore does what fault_store.h documents.

#include "testing/fault_store.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "store/mem_store.h"
#include "store/store_test_util.h"

namespace tierckpt {
namespace {

using testing_util::MakeManifest;
using testing_util::Pattern;

class FaultStoreTest : public ::testing::Test {
 protected:
  Status Put(uint64_t step, const std::string& name, const std::string& data) {
    return faulty_.PutObject("job", step, name, data.data(), data.size());
  }

  std::shared_ptr<MemObjectStore> base_ = std::make_shared<MemObjectStore>("base");
  FaultInjectingStore faulty_{base_};
};

TEST_F(FaultStoreTest, TransparentWithoutFaultsAndDescribesTheBase) {
  EXPECT_EQ(faulty_.Describe(), "mem://base");
  ASSERT_TRUE(Put(1, "a", "abc").ok());
  EXPECT_EQ(*base_->ObjectSize("job", 1, "a"), 3u);
  EXPECT_EQ(faulty_.InjectedFaults(), 0u);
}

TEST_F(FaultStoreTest, FailNthCallFailsExactlyThatCallOnceWithoutReachingTheBase) {
  ASSERT_TRUE(Put(1, "before", "x").ok());  // calls before the rule do not count
  faulty_.FailNthCall(StoreOp::kPutObject, 3, Unavailable("disk went away"));
  EXPECT_TRUE(Put(1, "o1", "x").ok());
  EXPECT_TRUE(Put(1, "o2", "x").ok());
  Status s = Put(1, "o3", "x");
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("disk went away"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("injected fault on PutObject call #4"), std::string::npos) << s.message();
  EXPECT_EQ(base_->ObjectSize("job", 1, "o3").status().code(), Code::kNotFound);
  EXPECT_TRUE(Put(1, "o4", "x").ok());
  EXPECT_TRUE(Put(1, "o3", "x").ok());  // once only
  EXPECT_EQ(faulty_.CallCount(StoreOp::kPutObject), 6u);
  EXPECT_EQ(faulty_.CallCount(StoreOp::kCommitStep), 0u);
  EXPECT_EQ(faulty_.InjectedFaults(), 1u);
}

TEST_F(FaultStoreTest, FailNthCallOnlyCountsItsOwnOperation) {
  faulty_.FailNthCall(StoreOp::kCommitStep, 1, IoError("commit lost"));
  ASSERT_TRUE(Put(1, "a", "x").ok());
  ASSERT_TRUE(faulty_.ListNamespaces().ok());
  Manifest m = MakeManifest("job", 1, {{"a", "x"}});
  EXPECT_EQ(faulty_.CommitStep(m).code(), Code::kIoError);
  EXPECT_TRUE(base_->ListCommittedSteps("job")->empty());
  EXPECT_TRUE(faulty_.CommitStep(m).ok());
  EXPECT_EQ(*base_->ListCommittedSteps("job"), std::vector<uint64_t>{1});
}

TEST_F(FaultStoreTest, FailEveryCallUntilCleared) {
  faulty_.FailEveryCall(StoreOp::kReadManifest, Status());  // ok → kIoError
  for (int i = 0; i < 3; ++i) {
    auto m = faulty_.ReadManifest("job", 1);
    EXPECT_EQ(m.status().code(), Code::kIoError);
    EXPECT_NE(m.status().message().find("injected I/O error"), std::string::npos);
  }
  faulty_.FailEveryCall(StoreOp::kListCommittedSteps, Timeout("slow NFS"));
  EXPECT_EQ(faulty_.ListCommittedSteps("job").status().code(), Code::kTimeout);
  EXPECT_EQ(faulty_.InjectedFaults(), 4u);
  faulty_.ClearFaults();
  EXPECT_EQ(faulty_.ReadManifest("job", 1).status().code(), Code::kNotFound);  // the base's answer
  EXPECT_TRUE(faulty_.ListCommittedSteps("job").ok());
  EXPECT_EQ(faulty_.CallCount(StoreOp::kReadManifest), 4u);
}

TEST_F(FaultStoreTest, EveryOperationCanFail) {
  for (size_t i = 0; i < kStoreOpCount; ++i) {
    faulty_.FailEveryCall(static_cast<StoreOp>(i), PermissionDenied("no"));
  }
  char c;
  EXPECT_EQ(Put(1, "a", "x").code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.ReadObject("job", 1, "a", 0, &c, 1).code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.ObjectSize("job", 1, "a").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.CommitStep(MakeManifest("job", 1, {})).code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.ReadManifest("job", 1).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.ListCommittedSteps("job").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.ListNamespaces().status().code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.DeleteStep("job", 1).code(), Code::kPermissionDenied);
  EXPECT_EQ(faulty_.SweepUncommitted("job", {}).status().code(), Code::kPermissionDenied);
  for (size_t i = 0; i < kStoreOpCount; ++i) {
    EXPECT_EQ(faulty_.CallCount(static_cast<StoreOp>(i)), 1u) << StoreOpName(static_cast<StoreOp>(i));
  }
  EXPECT_EQ(faulty_.InjectedFaults(), kStoreOpCount);
}

TEST_F(FaultStoreTest, CorruptReadsFlipTheFirstByteAndAChecksumCatchesIt) {
  const std::string data = Pattern(4096, 3);
  ASSERT_TRUE(Put(1, "victim", data).ok());
  ASSERT_TRUE(Put(1, "bystander", data).ok());
  faulty_.CorruptReads("victim");
  std::string got(data.size(), '\0');
  ASSERT_TRUE(faulty_.ReadObject("job", 1, "victim", 0, got.data(), got.size()).ok());
  EXPECT_EQ(static_cast<unsigned char>(got[0]), static_cast<unsigned char>(data[0]) ^ 0xffu);
  EXPECT_EQ(got.substr(1), data.substr(1));
  EXPECT_NE(ComputeChecksum(got.data(), got.size()), ComputeChecksum(data.data(), data.size()));
  // Ranged reads get their own first byte flipped.
  std::string part(10, '\0');
  ASSERT_TRUE(faulty_.ReadObject("job", 1, "victim", 100, part.data(), part.size()).ok());
  EXPECT_NE(part, data.substr(100, 10));
  // Other objects and the stored bytes are untouched.
  ASSERT_TRUE(faulty_.ReadObject("job", 1, "bystander", 0, got.data(), got.size()).ok());
  EXPECT_EQ(got, data);
  ASSERT_TRUE(base_->ReadObject("job", 1, "victim", 0, got.data(), got.size()).ok());
  EXPECT_EQ(got, data);
  EXPECT_EQ(faulty_.InjectedFaults(), 2u);
  // An empty filter corrupts every object; failed reads stay failed.
  faulty_.CorruptReads();
  ASSERT_TRUE(faulty_.ReadObject("job", 1, "bystander", 0, got.data(), got.size()).ok());
  EXPECT_NE(got, data);
  EXPECT_EQ(faulty_.ReadObject("job", 1, "absent", 0, got.data(), 1).code(), Code::kNotFound);
  faulty_.ClearFaults();
  ASSERT_TRUE(faulty_.ReadObject("job", 1, "victim", 0, got.data(), got.size()).ok());
  EXPECT_EQ(got, data);
}

TEST_F(FaultStoreTest, TruncatedPutsSucceedSilentlyAndCommitCatchesThem) {
  const std::string data = Pattern(1000, 1);
  faulty_.TruncatePuts("big");
  ASSERT_TRUE(Put(7, "big", data).ok());  // the medium lies
  ASSERT_TRUE(Put(7, "small", "abc").ok());
  EXPECT_EQ(*faulty_.ObjectSize("job", 7, "big"), 500u);
  EXPECT_EQ(*faulty_.ObjectSize("job", 7, "small"), 3u);
  Status s = faulty_.CommitStep(MakeManifest("job", 7, {{"big", data}, {"small", "abc"}}));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("\"big\""), std::string::npos) << s.message();
  EXPECT_TRUE(faulty_.ListCommittedSteps("job")->empty());
  faulty_.ClearFaults();
  ASSERT_TRUE(Put(7, "big", data).ok());
  EXPECT_TRUE(faulty_.CommitStep(MakeManifest("job", 7, {{"big", data}, {"small", "abc"}})).ok());
}

TEST_F(FaultStoreTest, CountsAreExactUnderConcurrentCalls) {
  faulty_.FailNthCall(StoreOp::kPutObject, 50, Aborted("one of them"));
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t, &failures] {
      for (int i = 0; i < 100; ++i) {
        if (!Put(1, "t" + std::to_string(t) + "_" + std::to_string(i), "x").ok()) ++failures[t];
        (void)faulty_.ObjectSize("job", 1, "t0_0");
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(faulty_.CallCount(StoreOp::kPutObject), 400u);
  EXPECT_EQ(faulty_.CallCount(StoreOp::kObjectSize), 400u);
  EXPECT_EQ(failures[0] + failures[1] + failures[2] + failures[3], 1);
  EXPECT_EQ(faulty_.InjectedFaults(), 1u);
}

}  // namespace
}  // namespace tierckpt
