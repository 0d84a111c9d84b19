// s3_open.h — an S3Client for real use from an S3Config: the libcurl
// transport, the default credentials chain (s3/credentials_chain.h; IMDS
// with a short connect timeout, as it is absent off EC2) and the signer
// (SigV4, or S3 Express sessions for directory buckets). Nothing is sent
// yet: credential errors surface at the first request. Shared by the
// durable store (store/s3_store.h) and directory sync (sync/).
#pragma once

#include <memory>

#include "s3/http.h"
#include "s3/s3_client.h"
#include "s3/s3_config.h"
#include "s3/signer.h"
#include "tierckpt/status.h"

namespace tierckpt::s3 {

struct S3ClientParts {
  std::shared_ptr<HttpTransport> transport;
  std::shared_ptr<RequestSigner> signer;
};

Result<S3ClientParts> MakeS3ClientParts(const S3Config& config);

}  // namespace tierckpt::s3
