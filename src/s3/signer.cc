// signer.cc — MakeSigV4Signer (signer.h): plain SigV4 for S3.
#include "s3/signer.h"

#include <utility>

#include "s3/sigv4.h"

namespace tierckpt::s3 {
namespace {

// Thread-safe: const after construction; the provider is thread-safe.
class SigV4Signer final : public RequestSigner {
 public:
  SigV4Signer(std::shared_ptr<CredentialsProvider> credentials, std::string region)
      : credentials_(std::move(credentials)), region_(std::move(region)) {}

  // The payload is signed only when the caller set x-amz-content-sha256
  // (to Sha256Hex of the body); otherwise it is UNSIGNED-PAYLOAD.
  Status Sign(HttpRequest& request, const std::string& bucket) override {
    if (!credentials_) {
      return FailedPrecondition("S3 signer: no credentials provider for bucket '" + bucket + "'");
    }
    Result<Credentials> credentials = credentials_->Get();
    if (!credentials.ok()) {
      return credentials.status().WithContext("signing " + request.method + " for bucket '" + bucket +
                                              "' with " + credentials_->Name() + " credentials");
    }
    SigningParams params;
    params.region = region_;
    params.service = "s3";
    params.now = Clock::now();
    return SignRequest(request, *credentials, params);
  }

 private:
  const std::shared_ptr<CredentialsProvider> credentials_;
  const std::string region_;
};

}  // namespace

std::unique_ptr<RequestSigner> MakeSigV4Signer(std::shared_ptr<CredentialsProvider> credentials,
                                               std::string region) {
  return std::make_unique<SigV4Signer>(std::move(credentials), std::move(region));
}

}  // namespace tierckpt::s3
