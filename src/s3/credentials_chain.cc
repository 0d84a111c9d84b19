// credentials_chain.cc — the SDK-order chain over the credential sources.
#include "s3/credentials_chain.h"

#include <utility>
#include <vector>

#include "s3/credentials_providers.h"

namespace tierckpt::s3 {
namespace {

class ChainProvider final : public CredentialsProvider {
 public:
  explicit ChainProvider(std::vector<std::unique_ptr<CredentialsSource>> sources)
      : sources_(std::move(sources)) {}

  Result<Credentials> Get() override {
    std::string tried;
    for (const auto& source : sources_) {
      std::string why_not;
      Result<std::optional<Credentials>> fetched = source->Fetch(&why_not);
      if (!fetched.ok()) {
        return fetched.status().WithContext("AWS credentials");
      }
      if (fetched->has_value()) return std::move(**fetched);
      if (!tried.empty()) tried += "; ";
      tried += source->Name() + ": " + why_not;
    }
    return FailedPrecondition(
        "no AWS credentials found. Tried " + tried +
        ". Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys), or "
        "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, or AWS_PROFILE with keys in ~/.aws/credentials, or "
        "run where container (ECS, EKS Pod Identity) or EC2 instance (IMDS) credentials are available");
  }

  std::string Name() const override { return "default credentials chain"; }

 private:
  const std::vector<std::unique_ptr<CredentialsSource>> sources_;  // const after construction
};

}  // namespace

std::unique_ptr<CredentialsProvider> MakeChainProvider(
    std::vector<std::unique_ptr<CredentialsSource>> sources) {
  return std::make_unique<ChainProvider>(std::move(sources));
}

std::shared_ptr<CredentialsProvider> DefaultCredentialsChain(std::shared_ptr<HttpTransport> transport,
                                                             Environment env, std::string region) {
  return DefaultCredentialsChain(std::move(transport), std::move(env), std::move(region), ChainOptions{});
}

std::shared_ptr<CredentialsProvider> DefaultCredentialsChain(std::shared_ptr<HttpTransport> transport,
                                                             Environment env, std::string region,
                                                             ChainOptions options) {
  std::shared_ptr<HttpTransport> imds_transport = options.imds_transport ? options.imds_transport : transport;
  std::vector<std::unique_ptr<CredentialsSource>> sources;
  sources.push_back(MakeEnvironmentSource(env));
  sources.push_back(MakeWebIdentitySource(env, transport, std::move(region)));
  sources.push_back(MakeProfileSource(env));
  sources.push_back(MakeContainerSource(env, transport));
  sources.push_back(MakeImdsSource(std::move(env), std::move(imds_transport)));
  return std::make_shared<CachingCredentialsProvider>(MakeChainProvider(std::move(sources)),
                                                      std::move(options.caching));
}

}  // namespace tierckpt::s3
