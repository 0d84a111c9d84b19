// s3_upload_many.cc — planned uploads through one pool of connections:
// S3Client::UploadMany (a step's objects, PlanUpload) and SendPlan, which
// also sends Upload's lone multipart uploads (PlanMultipart).
#include <atomic>
#include <mutex>

#include "os/parallel.h"
#include "s3/s3_client.h"
#include "s3/upload_plan.h"

namespace tierckpt::s3 {

Status S3Client::UploadMany(const std::vector<UploadItem>& items, const std::function<bool()>& cancelled) {
  std::vector<uint64_t> sizes;
  sizes.reserve(items.size());
  for (const UploadItem& item : items) sizes.push_back(item.size);
  UploadPlanOptions options;
  options.part_size = config_.part_size;
  options.max_part_size = config_.max_part_size;
  options.multipart_threshold = config_.multipart_threshold;
  options.concurrency = config_.concurrency;
  TC_ASSIGN_OR_RETURN(UploadPlan plan, PlanUpload(sizes, options));
  return SendPlan(items, plan, cancelled, /*if_none_match=*/false);
}

Status S3Client::SendPlan(const std::vector<UploadItem>& items, const UploadPlan& plan,
                          const std::function<bool()>& cancelled, bool if_none_match) {
  auto stop_now = [&]() -> Status {
    if (cancelled && cancelled()) return Aborted("upload cancelled");
    return Status::Ok();
  };
  std::vector<size_t> multipart;  // objects sent in parts
  for (size_t i = 0; i < items.size(); ++i) {
    if (plan.part_count[i] > 0) multipart.push_back(i);
  }
  std::vector<std::string> upload_ids(items.size());  // "" until created
  std::vector<std::vector<CompletedPart>> parts(items.size());
  for (size_t i : multipart) parts[i].resize(static_cast<size_t>(plan.part_count[i]));

  Status s = ParallelFor(multipart.size(), config_.concurrency, [&](size_t m) -> Status {
    TC_RETURN_IF_ERROR(stop_now());
    const size_t i = multipart[m];
    TC_ASSIGN_OR_RETURN(upload_ids[i], CreateMultipartUpload(items[i].key));
    return Status::Ok();
  });
  if (s.ok()) {
    s = ParallelFor(plan.requests.size(), config_.concurrency, [&](size_t r) -> Status {
      TC_RETURN_IF_ERROR(stop_now());
      const UploadRequest& req = plan.requests[r];
      const UploadItem& item = items[req.object];
      const char* bytes = static_cast<const char*>(item.data) + req.offset;
      const size_t size = static_cast<size_t>(req.size);
      if (req.part == 0) return PutObject(item.key, bytes, size);
      TC_ASSIGN_OR_RETURN(parts[req.object][static_cast<size_t>(req.part - 1)],
                          UploadPart(item.key, upload_ids[req.object], req.part, bytes, size));
      return Status::Ok();
    });
  }
  if (s.ok()) {
    s = ParallelFor(multipart.size(), config_.concurrency, [&](size_t m) -> Status {
      TC_RETURN_IF_ERROR(stop_now());
      const size_t i = multipart[m];
      TC_RETURN_IF_ERROR(CompleteMultipartUpload(items[i].key, upload_ids[i], parts[i], PutOptions{if_none_match}));
      upload_ids[i].clear();  // completed: nothing to abort
      return Status::Ok();
    });
  }
  if (!s.ok()) {
    std::vector<size_t> open;
    for (size_t i : multipart) {
      if (!upload_ids[i].empty()) open.push_back(i);
    }
    (void)ParallelFor(open.size(), config_.concurrency, [&](size_t o) -> Status {
      AbortQuietly(items[open[o]].key, upload_ids[open[o]]);
      return Status::Ok();
    });
  }
  return s;
}

}  // namespace tierckpt::s3
