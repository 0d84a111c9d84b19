// s3_listing.cc — ListObjectsV2 with pagination, DeleteObject, batched
// DeleteObjects.
#include <openssl/evp.h>

#include <algorithm>

#include "common/log.h"
#include "os/parallel.h"
#include "s3/s3_client.h"

namespace tierckpt::s3 {
namespace {

// Base64 of the MD5 of `body`: the Content-MD5 header DeleteObjects requires.
std::string Md5Base64(const std::string& body) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_Digest(body.data(), body.size(), md, &md_len, EVP_md5(), nullptr);
  unsigned char out[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(out, md, static_cast<int>(md_len));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

bool IsRetryableDeleteCode(std::string_view code) {
  return code == "InternalError" || code == "SlowDown" || code == "ServiceUnavailable" ||
         code == "RequestTimeout" || code == "OperationAborted";
}

}  // namespace

Result<ListResult> S3Client::ListObjects(std::string_view prefix, const ListOptions& options) {
  ListResult out;
  std::string token;
  const int page_size = std::clamp(options.page_size, 1, 1000);
  for (;;) {
    Call call;
    call.op = "ListObjectsV2";
    call.query.emplace_back("list-type", "2");
    call.query.emplace_back("encoding-type", "url");
    call.query.emplace_back("max-keys", std::to_string(page_size));
    call.query.emplace_back("prefix", std::string(prefix));
    if (!options.delimiter.empty()) call.query.emplace_back("delimiter", options.delimiter);
    if (!token.empty()) call.query.emplace_back("continuation-token", token);
    TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
    Result<ListPage> page = ParseListObjectsV2(r.body);
    if (!page.ok()) {
      return page.status().WithContext(What(call.op, std::nullopt) + " prefix " +
                                       std::string(prefix) + " at " + endpoint_);
    }
    for (ListedObject& o : page->objects) out.objects.push_back(std::move(o));
    for (std::string& p : page->common_prefixes) out.common_prefixes.push_back(std::move(p));
    if (!page->truncated) break;
    if (options.max_results != 0 &&
        out.objects.size() + out.common_prefixes.size() >= options.max_results) {
      break;
    }
    if (page->next_continuation_token == token) {
      return ProtocolError(What(call.op, std::nullopt) + " at " + endpoint_ +
                           ": a truncated page repeated its continuation token");
    }
    token = std::move(page->next_continuation_token);
  }
  return out;
}

Status S3Client::DeleteObject(std::string_view key) {
  Call call;
  call.op = "DeleteObject";
  call.method = "DELETE";
  call.key = key;
  return Execute(call).status();
}

Status S3Client::DeleteObjects(const std::vector<std::string>& keys) {
  const size_t batches = (keys.size() + kDeleteBatch - 1) / kDeleteBatch;
  return ParallelFor(batches, config_.concurrency, [&](size_t b) {
    const size_t start = b * kDeleteBatch;
    const size_t end = std::min(keys.size(), start + kDeleteBatch);
    return DeleteBatch(std::vector<std::string>(keys.begin() + static_cast<ptrdiff_t>(start),
                                                keys.begin() + static_cast<ptrdiff_t>(end)));
  });
}

Status S3Client::DeleteBatch(const std::vector<std::string>& batch) {
  std::vector<std::string> pending = batch;
  for (int attempt = 1;; ++attempt) {
    const std::string body = BuildDeleteObjects(pending);
    Call call;
    call.op = "DeleteObjects";
    call.method = "POST";
    call.query.emplace_back("delete", "");
    call.headers.emplace_back("content-type", "application/xml");
    call.headers.emplace_back("content-md5", Md5Base64(body));
    call.body = body.data();
    call.body_size = body.size();
    TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
    Result<std::vector<DeleteError>> errors = ParseDeleteResult(r.body);
    if (!errors.ok()) {
      return errors.status().WithContext(What(call.op, std::nullopt) + " at " + endpoint_);
    }
    if (errors->empty()) return Status::Ok();
    std::vector<std::string> retry;
    std::string final_errors;
    size_t final_count = 0;
    bool denied = false;
    for (const DeleteError& e : *errors) {
      if (e.code == "NoSuchKey") continue;  // already gone
      if (IsRetryableDeleteCode(e.code) && attempt < retry_.max_attempts()) {
        retry.push_back(e.key);
        continue;
      }
      denied = denied || e.code == "AccessDenied";
      if (++final_count <= 5) {
        final_errors += (final_errors.empty() ? "" : ", ") + e.key + " (" + e.code +
                        (e.message.empty() ? "" : ": " + e.message) + ")";
      }
    }
    if (final_count > 0) {
      std::string msg = What(call.op, std::nullopt) + " at " + endpoint_ + ": " +
                        std::to_string(final_count) + " of " + std::to_string(pending.size()) +
                        " keys were not deleted: " + final_errors +
                        (final_count > 5 ? ", ..." : "") + " after " + std::to_string(attempt) +
                        (attempt == 1 ? " attempt" : " attempts");
      if (denied) {
        return PermissionDenied(msg + "; check that the credentials may s3:DeleteObject here");
      }
      return IoError(msg + "; retry the deletion later");
    }
    if (retry.empty()) return Status::Ok();
    Log(LogLevel::kDebug, "s3_delete_retry")
        .Kv("bucket", config_.bucket)
        .Kv("keys", static_cast<uint64_t>(retry.size()))
        .Kv("attempt", attempt);
    retry_.Backoff(attempt);
    pending = std::move(retry);
  }
}

}  // namespace tierckpt::s3
