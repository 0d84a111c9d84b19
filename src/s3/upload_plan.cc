// upload_plan.cc — see upload_plan.h.
#include "s3/upload_plan.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "s3/s3_client.h"

namespace tierckpt::s3 {
namespace {

// Adds objects[object] (size bytes) to plan as a multipart upload in parts of
// part_size (grown by PlanParts), in part order.
Status AppendParts(UploadPlan& plan, size_t object, uint64_t size, uint64_t part_size) {
  TC_ASSIGN_OR_RETURN(PartPlan parts, PlanParts(size, part_size));
  plan.part_count[object] = static_cast<int>(parts.part_count);
  for (uint64_t p = 0; p < parts.part_count; ++p) {
    const uint64_t offset = p * parts.part_size;
    plan.requests.push_back(
        UploadRequest{object, offset, std::min(parts.part_size, size - offset), static_cast<int>(p + 1)});
  }
  return Status::Ok();
}

// The plan for one share, or the error of an object that cannot be cut.
Result<UploadPlan> PlanWithShare(const std::vector<uint64_t>& sizes, uint64_t share,
                                 const UploadPlanOptions& options) {
  UploadPlan plan;
  plan.share = share;
  plan.part_count.assign(sizes.size(), 0);
  const uint64_t single_limit = std::min(std::max(share, options.multipart_threshold), kMaxPartSize);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= single_limit) {
      plan.requests.push_back(UploadRequest{i, 0, sizes[i], 0});
      continue;
    }
    TC_RETURN_IF_ERROR(AppendParts(plan, i, sizes[i], share));
  }
  std::stable_sort(plan.requests.begin(), plan.requests.end(),
                   [](const UploadRequest& a, const UploadRequest& b) { return a.size > b.size; });
  std::vector<uint64_t> order;
  order.reserve(plan.requests.size());
  for (const UploadRequest& r : plan.requests) order.push_back(r.size);
  plan.makespan = ListScheduleMakespan(order, options.concurrency);
  return plan;
}

}  // namespace

Result<UploadPlan> PlanMultipart(uint64_t size, uint64_t part_size) {
  UploadPlan plan;
  plan.share = part_size;
  plan.part_count.assign(1, 0);
  TC_RETURN_IF_ERROR(AppendParts(plan, 0, size, part_size));
  plan.makespan = size;
  return plan;
}

uint64_t ListScheduleMakespan(const std::vector<uint64_t>& request_sizes, int connections) {
  // Loads of the connections; the least loaded takes the next request.
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> loads;
  for (int c = 0; c < std::max(1, connections); ++c) loads.push(0);
  uint64_t busiest = 0;
  for (uint64_t size : request_sizes) {
    const uint64_t load = loads.top() + size;
    loads.pop();
    loads.push(load);
    busiest = std::max(busiest, load);
  }
  return busiest;
}

Result<UploadPlan> PlanUpload(const std::vector<uint64_t>& sizes, const UploadPlanOptions& options) {
  const uint64_t connections = static_cast<uint64_t>(std::max(1, options.concurrency));
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  const uint64_t fair = total / connections + (total % connections != 0 ? 1 : 0);
  uint64_t share = std::clamp(fair, options.part_size, std::max(options.part_size, options.max_part_size));
  for (;;) {
    TC_ASSIGN_OR_RETURN(UploadPlan plan, PlanWithShare(sizes, share, options));
    const uint64_t largest = plan.requests.empty() ? 0 : plan.requests.front().size;
    const uint64_t ideal = std::max(fair, largest);
    if (share <= options.part_size || plan.makespan * 4 <= ideal * 5) return plan;
    share = std::max(options.part_size, share / 2);
  }
}

}  // namespace tierckpt::s3
