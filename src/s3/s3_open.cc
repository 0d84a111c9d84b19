// s3_open.cc — see s3_open.h.
#include "s3/s3_open.h"

#include "s3/credentials_chain.h"
#include "s3/curl_transport.h"
#include "s3/s3_express.h"

namespace tierckpt::s3 {

Result<S3ClientParts> MakeS3ClientParts(const S3Config& config) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<CurlTransport> transport, CurlTransport::Create(CurlOptions::From(config)));
  // IMDS is absent off EC2: a short connect timeout keeps the chain quick.
  CurlOptions imds_options;
  imds_options.connect_timeout_ms = 1000;
  imds_options.low_speed_time_s = 5;
  TC_ASSIGN_OR_RETURN(std::shared_ptr<CurlTransport> imds, CurlTransport::Create(imds_options));
  ChainOptions chain_options;
  chain_options.imds_transport = imds;
  std::shared_ptr<CredentialsProvider> credentials =
      DefaultCredentialsChain(transport, Environment::Process(), config.region, chain_options);
  S3ClientParts parts;
  if (config.express) {
    const std::string endpoint = BucketEndpoint(config);
    parts.signer = MakeExpressSigner(transport, credentials, config.region,
                                     [endpoint](const std::string&) { return endpoint; });
  } else {
    parts.signer = MakeSigV4Signer(credentials, config.region);
  }
  parts.transport = std::move(transport);
  return parts;
}

}  // namespace tierckpt::s3
