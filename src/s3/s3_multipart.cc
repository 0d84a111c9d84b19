// s3_multipart.cc — multipart uploads: the plan, the four calls, the parallel
// upload, and sweeping abandoned uploads.
#include <algorithm>
#include <atomic>

#include "common/log.h"
#include "os/parallel.h"
#include "s3/crc32c.h"
#include "s3/s3_client.h"
#include "s3/upload_plan.h"

namespace tierckpt::s3 {

Result<PartPlan> PlanParts(uint64_t size, uint64_t part_size) {
  if (part_size == 0) return InvalidArgument("multipart part size must be positive");
  constexpr uint64_t kMiB = 1ULL << 20;
  uint64_t ps = part_size;
  const uint64_t min_size = size / kMaxParts + (size % kMaxParts != 0 ? 1 : 0);
  if (ps < min_size) ps = (min_size + kMiB - 1) / kMiB * kMiB;  // grown: round up to 1 MiB
  if (ps > kMaxPartSize) {
    return InvalidArgument("an object of " + std::to_string(size) + " bytes needs parts of " +
                           std::to_string(ps) + " bytes to fit in 10,000 parts, more than S3's "
                           "5 GiB part limit; split it into smaller objects");
  }
  PartPlan plan;
  plan.part_size = ps;
  plan.part_count = size == 0 ? 1 : (size + ps - 1) / ps;
  return plan;
}

Result<std::string> S3Client::CreateMultipartUpload(std::string_view key) {
  Call call;
  call.op = "CreateMultipartUpload";
  call.method = "POST";
  call.key = key;
  call.query.emplace_back("uploads", "");
  call.headers.emplace_back("x-amz-checksum-algorithm", "CRC32C");
  call.headers.emplace_back("x-amz-checksum-type", config_.full_object_checksum ? "FULL_OBJECT" : "COMPOSITE");
  TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
  Result<std::string> id = ParseInitiateMultipartUpload(r.body);
  if (!id.ok()) return id.status().WithContext(What(call.op, key) + " at " + endpoint_);
  return id;
}

Result<CompletedPart> S3Client::UploadPart(std::string_view key, std::string_view upload_id,
                                           int part_number, const void* data, size_t size) {
  CompletedPart part;
  part.part_number = part_number;
  part.size = size;
  part.crc32c_value = Crc32c(data, size);
  part.crc32c = Crc32cBase64(part.crc32c_value);
  Call call;
  call.op = "UploadPart";
  call.method = "PUT";
  call.key = key;
  call.query.emplace_back("partNumber", std::to_string(part_number));
  call.query.emplace_back("uploadId", std::string(upload_id));
  call.headers.emplace_back("x-amz-checksum-crc32c", part.crc32c);
  call.body = data;
  call.body_size = size;
  TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
  auto etag = FindHeader(r.headers, "etag");
  if (!etag || etag->empty()) {
    return ProtocolError(What(call.op, key) + " part " + std::to_string(part_number) + " at " +
                         endpoint_ + ": the response has no ETag");
  }
  part.etag = std::string(*etag);
  return part;
}

Status S3Client::CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                                         const std::vector<CompletedPart>& parts,
                                         const PutOptions& options) {
  const std::string body = BuildCompleteMultipartUpload(parts);
  Call call;
  call.op = "CompleteMultipartUpload";
  call.method = "POST";
  call.key = key;
  call.query.emplace_back("uploadId", std::string(upload_id));
  call.headers.emplace_back("content-type", "application/xml");
  if (config_.full_object_checksum) {
    // The whole object's CRC32C, combined from the parts' (S3 recomputes and compares it).
    uint32_t whole = 0;
    bool first = true;
    for (const CompletedPart& p : parts) {
      whole = first ? p.crc32c_value : Crc32cCombine(whole, p.crc32c_value, p.size);
      first = false;
    }
    call.headers.emplace_back("x-amz-checksum-crc32c", Crc32cBase64(whole));
    call.headers.emplace_back("x-amz-checksum-type", "FULL_OBJECT");
  }
  if (options.if_none_match) call.headers.emplace_back("if-none-match", "*");
  call.body = body.data();
  call.body_size = body.size();
  call.error_in_200 = true;
  int attempts = 0;
  Result<HttpResponse> r = Execute(call, &attempts);
  if (r.ok() || r.status().code() != Code::kNotFound || attempts <= 1) return r.status();
  // NoSuchUpload after a retry: perhaps our earlier attempt completed it and
  // its response was lost. The object is ours if it has the parts' length.
  uint64_t total = 0;
  for (const CompletedPart& p : parts) total += p.size;
  Result<ObjectInfo> head = HeadObject(key);
  if (head.ok() && head->size == total) return Status::Ok();
  return r.status();
}

Status S3Client::AbortMultipartUpload(std::string_view key, std::string_view upload_id) {
  Call call;
  call.op = "AbortMultipartUpload";
  call.method = "DELETE";
  call.key = key;
  call.query.emplace_back("uploadId", std::string(upload_id));
  return Execute(call).status();
}

Status S3Client::MultipartOnce(std::string_view key, const void* data, size_t size,
                               bool if_none_match) {
  TC_ASSIGN_OR_RETURN(UploadPlan plan, PlanMultipart(size, config_.part_size));
  return SendPlan({UploadItem{std::string(key), data, size}}, plan, nullptr, if_none_match);
}

void S3Client::AbortQuietly(std::string_view key, std::string_view upload_id) {
  Status aborted = AbortMultipartUpload(key, upload_id);
  if (aborted.ok()) return;
  Log(LogLevel::kWarn, "s3_abort_failed")
      .Kv("bucket", config_.bucket)
      .Kv("key", key)
      .Kv("upload_id", upload_id)
      .Err(aborted);
}

Result<std::vector<MultipartUpload>> S3Client::ListMultipartUploads(std::string_view prefix) {
  std::vector<MultipartUpload> out;
  std::string key_marker;
  std::string upload_id_marker;
  for (;;) {
    Call call;
    call.op = "ListMultipartUploads";
    call.query.emplace_back("uploads", "");
    call.query.emplace_back("encoding-type", "url");
    if (!prefix.empty()) call.query.emplace_back("prefix", std::string(prefix));
    if (!key_marker.empty()) call.query.emplace_back("key-marker", key_marker);
    if (!upload_id_marker.empty()) call.query.emplace_back("upload-id-marker", upload_id_marker);
    TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
    Result<UploadsPage> page = ParseListMultipartUploads(r.body);
    if (!page.ok()) return page.status().WithContext(What(call.op, std::nullopt) + " at " + endpoint_);
    for (MultipartUpload& u : page->uploads) {
      // Filtered here too: not every compatible store applies the prefix.
      if (u.key.compare(0, prefix.size(), prefix) == 0) out.push_back(std::move(u));
    }
    if (!page->truncated) break;
    if (page->next_key_marker == key_marker && page->next_upload_id_marker == upload_id_marker) {
      return ProtocolError(What(call.op, std::nullopt) + " at " + endpoint_ +
                           ": a truncated page did not advance the markers");
    }
    key_marker = page->next_key_marker;
    upload_id_marker = page->next_upload_id_marker;
  }
  return out;
}

Result<int> S3Client::AbortMultipartUploads(std::string_view prefix) {
  TC_ASSIGN_OR_RETURN(std::vector<MultipartUpload> uploads, ListMultipartUploads(prefix));
  std::atomic<int> aborted{0};
  TC_RETURN_IF_ERROR(ParallelFor(uploads.size(), config_.concurrency, [&](size_t i) -> Status {
    Status s = AbortMultipartUpload(uploads[i].key, uploads[i].upload_id);
    if (!s.ok() && s.code() != Code::kNotFound) return s;  // NoSuchUpload: gone already
    aborted.fetch_add(1);
    Log(LogLevel::kInfo, "s3_aborted_upload")
        .Kv("bucket", config_.bucket)
        .Kv("key", uploads[i].key)
        .Kv("upload_id", uploads[i].upload_id);
    return Status::Ok();
  }));
  return aborted.load();
}

}  // namespace tierckpt::s3
