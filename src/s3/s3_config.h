// s3_config.h — where an S3 durable base lives and how to talk to it.
//
// ParseS3Url("s3://bucket/some/prefix?region=..&endpoint=..") combined with
// the environment the way the AWS SDKs read it:
//   AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL   → endpoint (else AWS's)
//   AWS_REGION, then AWS_DEFAULT_REGION, then the profile's region,
//   then "us-east-1"                              → region
// URL query parameters override the environment (docs/s3.md lists them):
//   region, endpoint, addressing=path|virtual, part_size (bytes, or 8MiB),
//   multipart_threshold (bytes, or 8MiB; default: the part size),
//   max_part_size (bytes, or 1GiB; default 1 GiB, at least part_size),
//   concurrency, max_attempts, payload=unsigned|signed, conditional=auto|on|off,
//   multipart_checksum=composite|full_object.
// Bucket names ending in "--x-s3" are S3 Express One Zone directory buckets:
// virtual-host zonal endpoint "https://<bucket>.s3express-<az>.<region>.amazonaws.com"
// and the ExpressSigner.
//
// Rules checked:
//   bucket   3..63 characters of a-z 0-9 . -, starting and ending with a
//            letter or digit, no "..", not an IPv4 address; an Express name is
//            "<base>--<zone id>--x-s3".
//   prefix   '/'-separated components of [A-Za-z0-9_.-] (not "." or ".."),
//            at most 512 bytes; leading and trailing '/' are dropped.
//   endpoint http:// or https:// plus host[:port], nothing after it but '/'.
//   part_size 64 KiB..5 GiB. AWS and most compatible stores reject parts under
//            5 MiB (EntityTooSmall at completion); smaller values exist for
//            test servers (moto with S3_UPLOAD_PART_MIN_SIZE).
//   max_part_size part_size..5 GiB.
//   concurrency 1..256, max_attempts 1..20.
// Addressing defaults to path-style when an endpoint is given (local and
// S3-compatible servers) and for dotted bucket names (their TLS certificates
// do not match virtual hosts); otherwise virtual-host. Express buckets are
// always virtual-host.
//
// Errors: kInvalidArgument naming the URL, the bad part and the accepted form.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

struct Environment;  // credentials_chain.h

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
  // The largest request UploadMany makes (a whole-object PUT or a part):
  // requests of a step are about its bytes / concurrency, within
  // [part_size, max_part_size] (upload_plan.h). Default 1 GiB, or part_size
  // if that is larger.
  size_t max_part_size = 1u << 30;
  int concurrency = 8;       // parallel parts / ranges / deletes per operation
  int max_attempts = 6;      // total tries per request (first + retries)
  bool sign_payload = false; // false: UNSIGNED-PAYLOAD + x-amz-checksum-crc32c
  ConditionalWrites conditional = ConditionalWrites::kAuto;
  // Multipart uploads are created with CRC32C of this type: COMPOSITE (each
  // part's CRC32C checked by S3, the object's checksum a checksum of the
  // parts' checksums: S3's default for CRC32C and the most widely supported)
  // or FULL_OBJECT (S3 also checks the whole object's CRC32C, combined from
  // the parts, at completion). Default: COMPOSITE, FULL_OBJECT for S3
  // Express directory buckets.
  bool full_object_checksum = false;
  long connect_timeout_ms = 5000;
  long low_speed_bytes_per_s = 1024;  // abort a transfer slower than this...
  long low_speed_time_s = 30;         // ...for this long
};

// Parses an s3:// URL and fills the rest from the process environment (see
// above).
Result<S3Config> ParseS3Url(std::string_view url);
// The same, reading variables (and the profile's region) from `env`.
Result<S3Config> ParseS3Url(std::string_view url, const Environment& env);

// "s3://bucket/prefix" for messages (no query, no credentials).
std::string DescribeS3(const S3Config& config);

// The endpoint requests go to: config.endpoint, or AWS's for the region
// ("https://s3.<region>.amazonaws.com"), or the Express zonal one. With
// virtual-host addressing the bucket is part of the host
// ("https://<bucket>.s3.<region>.amazonaws.com").
std::string BucketEndpoint(const S3Config& config);

// Checks a bucket name against the rules above; kInvalidArgument saying which
// rule it breaks. Express names ("--x-s3") are accepted.
Status ValidateBucketName(std::string_view bucket);

}  // namespace tierckpt::s3
