// s3_store.cc — see s3_store.h.
#include "store/s3_store.h"

#include <utility>

#include "common/names.h"

namespace tierckpt {

Result<std::unique_ptr<S3ObjectStore>> S3ObjectStore::Open(const s3::S3Config& config) {
  // Every name tierckpt accepts must fit in an S3 key (at most 1024 bytes):
  // "<prefix>/<namespace>/step_<10 digits>/<object name>" at their limits.
  constexpr size_t kS3MaxKeyBytes = 1024;
  const size_t fixed = kMaxNamespaceLength + 1 + StepDirName(0).size() + 1 + kMaxObjectNameLength;
  const size_t with_prefix = (config.prefix.empty() ? 0 : config.prefix.size() + 1) + fixed;
  if (with_prefix > kS3MaxKeyBytes) {
    return InvalidArgument(
        "the S3 prefix " + QuoteForMessage(config.prefix) + " of s3://" + config.bucket + " is " +
        std::to_string(config.prefix.size()) + " bytes: with the longest namespace (" +
        std::to_string(kMaxNamespaceLength) + " bytes) and object name (" +
        std::to_string(kMaxObjectNameLength) + " bytes) tierckpt accepts, keys would be " +
        std::to_string(with_prefix) + " bytes, past S3's limit of " + std::to_string(kS3MaxKeyBytes) +
        "; use a prefix of at most " + std::to_string(kS3MaxKeyBytes - fixed - 1) + " bytes");
  }
  TC_ASSIGN_OR_RETURN(std::unique_ptr<S3BlobStore> s3, S3BlobStore::Open(config));
  return std::unique_ptr<S3ObjectStore>(new S3ObjectStore(std::shared_ptr<S3BlobStore>(std::move(s3))));
}

S3ObjectStore::S3ObjectStore(s3::S3Config config, std::shared_ptr<s3::HttpTransport> transport,
                             std::shared_ptr<s3::RequestSigner> signer, s3::RetryOptions retry)
    : S3ObjectStore(std::make_shared<S3BlobStore>(std::move(config), std::move(transport), std::move(signer),
                                                  std::move(retry))) {}

}  // namespace tierckpt
