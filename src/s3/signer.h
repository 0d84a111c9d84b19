// signer.h — how the S3 client authenticates a request.
//
// RequestSigner hides which credentials sign: SigV4Signer uses a
// CredentialsProvider (service "s3"); ExpressSigner (s3_express.h) uses S3
// Express One Zone session credentials (service "s3express" plus the
// x-amz-s3session-token header), creating and refreshing sessions per bucket.
#pragma once

#include <memory>
#include <string>

#include "s3/credentials.h"
#include "s3/http.h"

namespace tierckpt::s3 {

class RequestSigner {
 public:
  virtual ~RequestSigner() = default;
  // Signs `request` for `bucket`. Thread-safe. Errors are credential errors
  // (no source found, refresh failed), with what to set to fix them.
  virtual Status Sign(HttpRequest& request, const std::string& bucket) = 0;
};

// Plain SigV4 for S3 with the given credentials.
std::unique_ptr<RequestSigner> MakeSigV4Signer(std::shared_ptr<CredentialsProvider> credentials,
                                               std::string region);

}  // namespace tierckpt::s3
