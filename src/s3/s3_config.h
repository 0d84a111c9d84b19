// s3_config.h — where an S3 durable base lives and how to talk to it.
//
// ParseS3Url("s3://bucket/some/prefix?region=..&endpoint=..") combined with
// the environment the way the AWS SDKs read it:
//   AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL   → endpoint (else AWS's)
//   AWS_REGION, then AWS_DEFAULT_REGION, then the profile's region,
//   then "us-east-1"                              → region
// URL query parameters override the environment (docs/s3.md lists them):
//   region, endpoint, addressing=path|virtual, part_size (bytes, or 8MiB),
//   concurrency, max_attempts, payload=unsigned|signed, conditional=auto|on|off.
// Bucket names ending in "--x-s3" are S3 Express One Zone directory buckets:
// virtual-host zonal endpoint "https://<bucket>.s3express-<az>.<region>.amazonaws.com"
// and the ExpressSigner.
//
// Errors: kInvalidArgument naming the URL, the bad part and the accepted form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

enum class Addressing { kPath, kVirtualHost };
enum class ConditionalWrites { kAuto, kOn, kOff };

struct S3Config {
  std::string bucket;
  std::string prefix;        // no leading or trailing '/'; may be empty
  std::string region = "us-east-1";
  std::string endpoint;      // "http://127.0.0.1:5000"; empty = AWS's for the region
  Addressing addressing = Addressing::kVirtualHost;  // kPath when endpoint is set
  bool express = false;      // bucket is an S3 Express directory bucket
  size_t part_size = 16u << 20;     // multipart part size; grows to keep ≤ 10,000 parts
  size_t multipart_threshold = 16u << 20;  // objects above this go multipart
  int concurrency = 8;       // parallel parts / ranges / deletes per operation
  int max_attempts = 6;      // total tries per request (first + retries)
  bool sign_payload = false; // false: UNSIGNED-PAYLOAD + x-amz-checksum-crc32c
  ConditionalWrites conditional = ConditionalWrites::kAuto;
  long connect_timeout_ms = 5000;
  long low_speed_bytes_per_s = 1024;  // abort a transfer slower than this...
  long low_speed_time_s = 30;         // ...for this long
};

// Parses an s3:// URL and fills the rest from the environment (see above).
Result<S3Config> ParseS3Url(std::string_view url);

// "s3://bucket/prefix" for messages (no query, no credentials).
std::string DescribeS3(const S3Config& config);

}  // namespace tierckpt::s3
