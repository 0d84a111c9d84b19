// fake_transport.h — a scripted HttpTransport for unit tests.
// Test-only: library tc_testing_s3, linked by tests, never by tierckptd, the CLI or
// the Python extension.
//
// Each Send is matched against the handlers in order of registration; the
// first whose predicate accepts the request answers it. Every request is
// recorded (with its body copied) so tests can check exactly what was sent.
// A request no handler accepts gets a 599 response whose body names it, so a
// test fails with a readable message instead of hanging.
#pragma once

#include <functional>
#include <vector>

#include "common/mutex.h"
#include "s3/http.h"

namespace tierckpt::s3 {

struct RecordedRequest {
  HttpRequest request;  // body pointer cleared; see `body`
  std::string body;
};

class FakeTransport final : public HttpTransport {
 public:
  using Predicate = std::function<bool(const HttpRequest&)>;
  // A handler returns a response, or a Status to simulate a transport failure.
  using Handler = std::function<Result<HttpResponse>(const HttpRequest&, std::string_view body)>;

  void On(Predicate predicate, Handler handler);
  // Convenience: method and path (exact) → fixed response.
  void OnPath(std::string method, std::string path, HttpResponse response);

  Result<HttpResponse> Send(const HttpRequest& request, const SendOptions& options = {}) override;
  void ResetConnections() override;

  std::vector<RecordedRequest> Requests() const;
  int resets() const;

 private:
  mutable Mutex mu_;
  std::vector<std::pair<Predicate, Handler>> handlers_ GUARDED_BY(mu_);
  std::vector<RecordedRequest> requests_ GUARDED_BY(mu_);
  int resets_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierckpt::s3
