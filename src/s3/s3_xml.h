// s3_xml.h — the XML documents of the S3 REST API, built and parsed with
// pugixml (no exceptions).
//
// Parsers return kProtocolError naming the document and what is missing when
// a body is not the document S3 documents; callers add the operation, bucket
// and key. Builders escape every value. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

// <Error><Code>..</Code><Message>..</Message><RequestId>..</RequestId></Error>
struct S3ErrorBody {
  std::string code;        // "NoSuchKey", "SlowDown", ...
  std::string message;
  std::string request_id;
};
// The error document in `body`, or nullopt when the body is not one (empty,
// not XML, or another root element).
std::optional<S3ErrorBody> ParseErrorBody(std::string_view body);

// InitiateMultipartUploadResult → UploadId.
Result<std::string> ParseInitiateMultipartUpload(std::string_view body);

struct CompletedPart {
  int part_number = 0;     // 1-based, ascending in a completion
  std::string etag;        // as UploadPart returned it (quotes included)
  std::string crc32c;      // base64 x-amz-checksum-crc32c of the part; empty = none
  // Not in the XML: the part's CRC32C value and length, from which the
  // client combines the whole object's CRC32C.
  uint32_t crc32c_value = 0;
  uint64_t size = 0;
};
// <CompleteMultipartUpload> with each part's number, ETag and ChecksumCRC32C.
std::string BuildCompleteMultipartUpload(const std::vector<CompletedPart>& parts);

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;
};
struct ListPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_continuation_token;
};
// ListBucketResult (ListObjectsV2). Keys and prefixes are URL-decoded when the
// response says <EncodingType>url</EncodingType>.
Result<ListPage> ParseListObjectsV2(std::string_view body);

// <Delete><Quiet>true</Quiet><Object><Key>..</Key></Object>...</Delete>
std::string BuildDeleteObjects(const std::vector<std::string>& keys);
struct DeleteError {
  std::string key;
  std::string code;
  std::string message;
};
// DeleteResult → the per-key <Error> entries (empty when every key went).
Result<std::vector<DeleteError>> ParseDeleteResult(std::string_view body);

struct MultipartUpload {
  std::string key;
  std::string upload_id;
};
struct UploadsPage {
  std::vector<MultipartUpload> uploads;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};
// ListMultipartUploadsResult; keys URL-decoded as for listings.
Result<UploadsPage> ParseListMultipartUploads(std::string_view body);

// %XX-decoding ("a%2Fb" → "a/b"); kProtocolError on a bad escape.
Result<std::string> UrlDecode(std::string_view s);

}  // namespace tierckpt::s3
