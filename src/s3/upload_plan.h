// upload_plan.h — how the objects of one step are cut into S3 requests.
//
// A step is uploaded through one pool of `concurrency` connections
// (S3Client::UploadMany). The plan keeps every connection busy with the
// fewest requests: fewer requests mean fewer round trips and signatures,
// fewer billed requests, and at scale fewer requests against S3's per-prefix
// request rate (3,500 PUTs/s): a thousand nodes each persisting 2 GiB in
// 16 MiB parts make 128,000 requests, in 256 MiB requests 8,000.
//
// PlanUpload(sizes, options):
//   share  = ceil(step bytes / concurrency), at least part_size and at most
//            max_part_size: each connection's fair share of the step.
//   An object of at most max(share, multipart_threshold) bytes (and at most
//   5 GiB) is one PutObject; a larger one is a multipart upload in parts of
//   `share` bytes (grown, as PlanParts does, to stay within 10,000 parts).
//   Requests run largest first. If, with every connection taking the next
//   request as it frees (list scheduling), the slowest connection would
//   carry more than 5/4 of the ideal (the larger of step bytes / concurrency
//   and the largest request), the share is halved and the step planned
//   again, down to part_size: nine equal objects on eight connections are
//   not nine whole PUTs, where the ninth would run alone.
// A step of one 2 GiB object on 8 connections is 8 parts of 256 MiB; 8
// objects of 256 MiB are 8 PutObjects; a .metadata of a few KiB is a PUT.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

struct UploadPlanOptions {
  uint64_t part_size = 16u << 20;            // the smallest part (S3Config::part_size)
  uint64_t max_part_size = 1ULL << 30;        // the largest request (S3Config::max_part_size)
  uint64_t multipart_threshold = 16u << 20;   // never multipart at or below this
  int concurrency = 8;
};

// One request: bytes [offset, offset + size) of objects[object]. part 0 is a
// whole-object PutObject; parts 1..N are the parts of a multipart upload.
struct UploadRequest {
  size_t object = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  int part = 0;
};

struct UploadPlan {
  uint64_t share = 0;                   // the request size the plan settled on
  std::vector<int> part_count;          // per object: 0 = one PutObject, else its parts
  std::vector<UploadRequest> requests;  // largest first (ties: object, then part order)
  uint64_t makespan = 0;                // bytes on the busiest connection (list scheduling)
};

// Precondition: options.part_size > 0, options.concurrency >= 1,
// options.max_part_size >= options.part_size. kInvalidArgument when an object
// cannot be uploaded at all (more than 10,000 parts of 5 GiB).
Result<UploadPlan> PlanUpload(const std::vector<uint64_t>& sizes, const UploadPlanOptions& options);

// One object of `size` bytes as one multipart upload in parts of part_size
// (PlanParts: grown to stay within 10,000 parts), in part order; makespan is
// the size. What S3Client::Upload sends above multipart_threshold. Errors as
// PlanParts.
Result<UploadPlan> PlanMultipart(uint64_t size, uint64_t part_size);

// Bytes on the busiest of `connections` when each takes the next of
// `request_sizes` (in that order) as soon as it is free. Pure.
uint64_t ListScheduleMakespan(const std::vector<uint64_t>& request_sizes, int connections);

}  // namespace tierckpt::s3
