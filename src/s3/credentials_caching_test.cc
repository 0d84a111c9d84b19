// Tests of CachingCredentialsProvider: caching, refresh before expiry,
// single flight under threads, falling back to unexpired credentials.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "os/files.h"
#include "s3/credentials_chain.h"
#include "testing/temp_dir.h"

namespace tierckpt::s3 {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

// Answers Get() from a script (the last entry repeats), counting calls; can
// hold every call until Release().
class ScriptedProvider final : public CredentialsProvider {
 public:
  void Push(Result<Credentials> r) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(r));
  }
  void HoldCalls() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  int calls() const { return calls_.load(); }

  Result<Credentials> Get() override {
    calls_.fetch_add(1);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !held_; });
    if (script_.empty()) return Internal("ScriptedProvider: empty script");
    Result<Credentials> r = script_.front();
    if (script_.size() > 1) script_.pop_front();
    return r;
  }
  std::string Name() const override { return "scripted"; }

 private:
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::deque<Result<Credentials>> script_;
};

Credentials Creds(std::string key_id, std::optional<Clock::time_point> expiration) {
  Credentials c;
  c.access_key_id = std::move(key_id);
  c.secret_access_key = "secret";
  c.expiration = expiration;
  c.source = "scripted";
  return c;
}

class CachingTest : public ::testing::Test {
 protected:
  CachingTest() : start_(Clock::time_point(seconds(1714566896))), now_(start_) {}

  CachingCredentialsProvider Make(CachingOptions options = {}) {
    options.now = [this] { return now_.load(); };
    return CachingCredentialsProvider(inner_, std::move(options));
  }

  std::string KeyId(CachingCredentialsProvider& cache) {
    Result<Credentials> c = cache.Get();
    return c.ok() ? c->access_key_id : "error: " + c.status().ToString();
  }

  const Clock::time_point start_;
  std::atomic<Clock::time_point> now_;
  std::shared_ptr<ScriptedProvider> inner_ = std::make_shared<ScriptedProvider>();
};

TEST_F(CachingTest, CredentialsWithoutExpirationAreFetchedOnce) {
  inner_->Push(Creds("static", std::nullopt));
  auto cache = Make();
  EXPECT_EQ(cache.Name(), "scripted");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(KeyId(cache), "static");
  now_ = start_ + std::chrono::hours(24 * 365);
  EXPECT_EQ(KeyId(cache), "static");
  EXPECT_EQ(inner_->calls(), 1);
}

TEST_F(CachingTest, RefreshesWithinTheMarginBeforeExpiry) {
  inner_->Push(Creds("first", start_ + minutes(60)));
  inner_->Push(Creds("second", start_ + minutes(120)));
  auto cache = Make();
  EXPECT_EQ(KeyId(cache), "first");
  now_ = start_ + minutes(54);  // 6 minutes left: still fresh
  EXPECT_EQ(KeyId(cache), "first");
  EXPECT_EQ(inner_->calls(), 1);
  now_ = start_ + minutes(55) + seconds(1);  // inside the 5-minute margin
  EXPECT_EQ(KeyId(cache), "second");
  EXPECT_EQ(KeyId(cache), "second");
  EXPECT_EQ(inner_->calls(), 2);
}

TEST_F(CachingTest, MarginIsConfigurable) {
  inner_->Push(Creds("first", start_ + minutes(60)));
  inner_->Push(Creds("second", start_ + minutes(120)));
  CachingOptions options;
  options.refresh_margin = minutes(15);
  auto cache = Make(options);
  EXPECT_EQ(KeyId(cache), "first");
  now_ = start_ + minutes(46);
  EXPECT_EQ(KeyId(cache), "second");
}

TEST_F(CachingTest, ErrorsAreNotCached) {
  inner_->Push(Unavailable("IMDS: busy"));
  inner_->Push(Creds("ok", start_ + minutes(60)));
  auto cache = Make();
  Result<Credentials> first = cache.Get();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), Code::kUnavailable);
  EXPECT_EQ(KeyId(cache), "ok");
  EXPECT_EQ(inner_->calls(), 2);
}

TEST_F(CachingTest, FailedRefreshFallsBackToUnexpiredCredentialsAndWarns) {
  testing_util::TempDir dir("tc_cred_cache");
  const std::string log_path = dir.Sub("log");
  ASSERT_TRUE(SetLogFile(log_path).ok());

  inner_->Push(Creds("first", start_ + minutes(60)));
  inner_->Push(PermissionDenied("web identity: STS said no"));
  auto cache = Make();
  EXPECT_EQ(KeyId(cache), "first");
  now_ = start_ + minutes(57);  // refresh due, and it fails
  EXPECT_EQ(KeyId(cache), "first");
  EXPECT_EQ(inner_->calls(), 2);
  // Within the backoff the source is left alone.
  now_ = start_ + minutes(57) + seconds(5);
  EXPECT_EQ(KeyId(cache), "first");
  EXPECT_EQ(inner_->calls(), 2);
  // After it, another try (fails again, still unexpired).
  now_ = start_ + minutes(57) + seconds(11);
  EXPECT_EQ(KeyId(cache), "first");
  EXPECT_EQ(inner_->calls(), 3);
  // Once the cached credentials expire the error comes through.
  now_ = start_ + minutes(60);
  Result<Credentials> expired = cache.Get();
  ASSERT_FALSE(expired.ok());
  EXPECT_EQ(expired.status().code(), Code::kPermissionDenied);
  EXPECT_NE(expired.status().message().find("STS said no"), std::string::npos);
  EXPECT_EQ(inner_->calls(), 4);

  ASSERT_TRUE(SetLogFile("").ok());
  Result<std::string> log = ReadFileToString(log_path, 1 << 20);
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("level=warn"), std::string::npos) << *log;
  EXPECT_NE(log->find("event=s3_credentials_refresh_failed"), std::string::npos) << *log;
  EXPECT_NE(log->find("STS said no"), std::string::npos) << *log;
}

TEST_F(CachingTest, ConcurrentFirstFetchIsSingleFlight) {
  inner_->Push(Creds("shared", start_ + minutes(60)));
  inner_->HoldCalls();
  auto cache = Make();
  constexpr int kThreads = 16;
  std::vector<std::string> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { got[i] = KeyId(cache); });
  }
  // Let the threads pile up behind the held fetch, then let it finish.
  while (inner_->calls() == 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  inner_->Release();
  for (auto& t : threads) t.join();
  for (const std::string& key : got) EXPECT_EQ(key, "shared");
  EXPECT_EQ(inner_->calls(), 1);
}

TEST_F(CachingTest, ConcurrentRefreshIsSingleFlight) {
  inner_->Push(Creds("first", start_ + minutes(60)));
  inner_->Push(Creds("second", start_ + minutes(120)));
  auto cache = Make();
  EXPECT_EQ(KeyId(cache), "first");
  now_ = start_ + minutes(58);
  inner_->HoldCalls();
  constexpr int kThreads = 16;
  std::vector<std::string> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { got[i] = KeyId(cache); });
  }
  while (inner_->calls() < 2) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  inner_->Release();
  for (auto& t : threads) t.join();
  for (const std::string& key : got) EXPECT_EQ(key, "second");
  EXPECT_EQ(inner_->calls(), 2);
}

TEST_F(CachingTest, WaitersShareTheOutcomeOfTheFetchTheyWaitedFor) {
  // Every fetch fails, so nothing is ever cached: without sharing the
  // outcome, each waiter would start a fetch of its own afterwards.
  inner_->Push(Unavailable("container: agent down"));
  inner_->HoldCalls();
  auto cache = Make();
  constexpr int kThreads = 8;
  std::atomic<int> started{0};
  std::vector<Code> codes(kThreads, Code::kOk);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { codes[0] = cache.Get().status().code(); });
  while (inner_->calls() == 0) std::this_thread::yield();  // thread 0 holds the fetch
  for (int i = 1; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      started.fetch_add(1);
      codes[i] = cache.Get().status().code();
    });
  }
  while (started.load() < kThreads - 1) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  inner_->Release();
  for (auto& t : threads) t.join();
  for (Code code : codes) EXPECT_EQ(code, Code::kUnavailable);
  EXPECT_EQ(inner_->calls(), 1)
      << "a waiter started a fetch of its own (or was not yet waiting after 100 ms)";
}

}  // namespace
}  // namespace tierckpt::s3
