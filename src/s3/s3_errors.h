// s3_errors.h — what an S3 response means: success, a retryable failure, or
// a final error, and the Status a final error becomes.
//
// Classification (s3.md, the AWS SDKs' standard retry mode):
//   retryable   HTTP 500, 502, 503, 504, 429; S3 codes InternalError, SlowDown,
//               ServiceUnavailable, RequestTimeout, RequestTimeTooSkewed
//               (the retry is signed with a fresh date), Throttling*,
//               RequestLimitExceeded, ConditionalRequestConflict (409: another
//               conditional write of the key is in flight; the retry then
//               sees 412), OperationAborted, ExpiredToken (the signer
//               fetches fresh credentials); and transport failures
//               (kUnavailable, kTimeout from HttpTransport).
//   final       everything else: 403, 404, 412, 400s like InvalidArgument.
// A 200 whose body is an <Error> document (CompleteMultipartUpload,
// CopyObject) is judged by its code like any other error.
//
// Status codes of final errors: 404 → kNotFound, 403 → kPermissionDenied,
// 412 → kAlreadyExists (we only send If-None-Match: *), 416 →
// kCorruption (the object is shorter than the range asked for), 501 →
// kUnimplemented, 400 → kInvalidArgument, other 4xx → kFailedPrecondition,
// 5xx → kUnavailable. Transport failures keep their code.
//
// Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "s3/http.h"
#include "s3/s3_xml.h"
#include "tierckpt/status.h"

namespace tierckpt::s3 {

// One failed attempt, as the retry loop sees it.
struct AttemptError {
  int http_status = 0;         // 0 = no response (transport failure)
  S3ErrorBody s3;              // code/message/request id when the body had them
  Status transport;            // the transport's error when http_status == 0
};

// An AttemptError from a response that is not a success (non-2xx, or a 2xx
// whose body is an <Error> document). The request id falls back to the
// x-amz-request-id header.
AttemptError ErrorFromResponse(const HttpResponse& response);
AttemptError ErrorFromTransport(Status status);

bool IsRetryable(const AttemptError& error);
// Whether the retry should open a fresh connection (transport failures and
// 5xx: the connection or the server behind it may be bad).
bool WantsFreshConnection(const AttemptError& error);

// The final Status. `what` is "<Operation> s3://bucket/key" and `endpoint`
// where it was sent; the message adds the HTTP status, the S3 code, message
// and request id, the attempts made, and what to do about it.
Status FinalError(const AttemptError& error, std::string_view what, std::string_view endpoint,
                  int attempts);

}  // namespace tierckpt::s3
