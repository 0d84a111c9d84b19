// credentials_caching.cc — CachingCredentialsProvider (credentials_chain.h).
#include <utility>

#include "common/log.h"
#include "s3/credentials_chain.h"

namespace tierckpt::s3 {

CachingCredentialsProvider::CachingCredentialsProvider(std::shared_ptr<CredentialsProvider> inner,
                                                       CachingOptions options)
    : inner_(std::move(inner)), options_(std::move(options)) {}

std::string CachingCredentialsProvider::Name() const { return inner_->Name(); }

Clock::time_point CachingCredentialsProvider::Now() const {
  return options_.now ? options_.now() : Clock::now();
}

bool CachingCredentialsProvider::Fresh(const Credentials& c, Clock::time_point now) const {
  return !c.expiration || now + options_.refresh_margin < *c.expiration;
}

bool CachingCredentialsProvider::Unexpired(const Credentials& c, Clock::time_point now) {
  return !c.expiration || now < *c.expiration;
}

Result<Credentials> CachingCredentialsProvider::Get() {
  MutexLock lock(&mu_);
  Clock::time_point now = Now();
  if (cached_ && Fresh(*cached_, now)) return *cached_;
  // A refresh failed recently and the cached credentials still work: do not
  // hammer the source; use them until the backoff ends.
  if (cached_ && retry_after_ && now < *retry_after_ && Unexpired(*cached_, now)) return *cached_;
  if (fetching_) {
    // Single flight: wait for the fetch in progress and share its outcome.
    const uint64_t generation = fetch_generation_;
    while (fetch_generation_ == generation) fetched_.Wait();
    return *last_outcome_;
  }
  fetching_ = true;
  lock.Unlock();
  Result<Credentials> fetched = inner_->Get();
  lock.Lock();
  fetching_ = false;
  ++fetch_generation_;
  now = Now();
  if (fetched.ok()) {
    cached_ = *fetched;
    retry_after_.reset();
    last_outcome_ = fetched;
  } else if (cached_ && Unexpired(*cached_, now)) {
    retry_after_ = now + options_.failed_refresh_backoff;
    Log log(LogLevel::kWarn, "s3_credentials_refresh_failed");
    log.Kv("source", inner_->Name()).Kv("cached_from", cached_->source);
    if (cached_->expiration) {
      log.Kv("expires_in_s",
             static_cast<int64_t>(
                 std::chrono::duration_cast<std::chrono::seconds>(*cached_->expiration - now).count()));
    }
    log.Kv("action", "using the cached credentials until they expire").Err(fetched.status());
    last_outcome_ = *cached_;
  } else {
    last_outcome_ = fetched;
  }
  Result<Credentials> outcome = *last_outcome_;
  fetched_.SignalAll();
  return outcome;
}

}  // namespace tierckpt::s3
