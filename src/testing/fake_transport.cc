// fake_transport.cc — see fake_transport.h.
#include "testing/fake_transport.h"

#include <cstring>

namespace tierckpt::s3 {

void FakeTransport::On(Predicate predicate, Handler handler) {
  MutexLock lock(&mu_);
  handlers_.emplace_back(std::move(predicate), std::move(handler));
}

void FakeTransport::OnPath(std::string method, std::string path, HttpResponse response) {
  On([method, path](const HttpRequest& r) { return r.method == method && r.path == path; },
     [response](const HttpRequest&, std::string_view) -> Result<HttpResponse> { return response; });
}

Result<HttpResponse> FakeTransport::Send(const HttpRequest& request, const SendOptions& options) {
  std::string body(static_cast<const char*>(request.body), request.body ? request.body_size : 0);
  Handler handler;
  {
    MutexLock lock(&mu_);
    RecordedRequest recorded{request, body};
    recorded.request.body = nullptr;
    requests_.push_back(std::move(recorded));
    for (const auto& [predicate, h] : handlers_) {
      if (predicate(request)) {
        handler = h;
        break;
      }
    }
  }
  if (!handler) {
    HttpResponse unmatched;
    unmatched.status = 599;
    unmatched.body = "FakeTransport: no handler for " + request.method + " " + RequestUrl(request);
    return unmatched;
  }
  auto response = handler(request, body);
  if (!response.ok()) return response;
  TC_RETURN_IF_ERROR(DeliverToSink(options, &*response, "FakeTransport"));
  return response;
}

void FakeTransport::ResetConnections() {
  MutexLock lock(&mu_);
  ++resets_;
}

std::vector<RecordedRequest> FakeTransport::Requests() const {
  MutexLock lock(&mu_);
  return requests_;
}

int FakeTransport::resets() const {
  MutexLock lock(&mu_);
  return resets_;
}

}  // namespace tierckpt::s3
