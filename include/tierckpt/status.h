// tierckpt/status.h — the one error model of tierckpt.
//
// Every fallible call returns a Status (no value) or a Result<T> (a value or
// a Status). Both are [[nodiscard]]. Codes are defined once, in the
// TIERCKPT_STATUS_CODES table below; ToString(code) gives their names.
//
// A message says what failed, on which object or endpoint, and what to do.
// As an error travels up, callers add context with Status::WithContext(),
// which prefixes "context: " to the message and keeps the code.
//
// Propagation uses exactly two macros:
//   TC_RETURN_IF_ERROR(expr)        — return the Status if it is not ok.
//   TC_ASSIGN_OR_RETURN(lhs, expr)  — unwrap a Result<T> or return its Status.
//
// Thread safety: Status and Result are values; distinct objects may be used
// from distinct threads freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tierckpt {

// X(name, number, description). Numbers are part of the wire protocol:
// never renumber, only append.
#define TIERCKPT_STATUS_CODES(X)                                             \
  X(kOk, 0, "ok")                                                            \
  X(kInvalidArgument, 1, "invalid argument")                                 \
  X(kNotFound, 2, "not found")                                               \
  X(kAlreadyExists, 3, "already exists")                                     \
  X(kResourceExhausted, 4, "resource exhausted")                             \
  X(kCorruption, 5, "corruption")                                            \
  X(kIoError, 6, "I/O error")                                                \
  X(kUnavailable, 7, "unavailable")                                          \
  X(kPermissionDenied, 8, "permission denied")                               \
  X(kFailedPrecondition, 9, "failed precondition")                           \
  X(kProtocolError, 10, "protocol error")                                    \
  X(kTimeout, 11, "timeout")                                                 \
  X(kAborted, 12, "aborted")                                                 \
  X(kInternal, 13, "internal error")                                         \
  X(kUnimplemented, 14, "unimplemented")

enum class Code : uint32_t {
#define TIERCKPT_STATUS_ENUM(name, number, desc) name = number,
  TIERCKPT_STATUS_CODES(TIERCKPT_STATUS_ENUM)
#undef TIERCKPT_STATUS_ENUM
};

// Returns the code's description, e.g. "not found"; "unknown code" otherwise.
std::string_view ToString(Code code);
// Maps a wire number to a code; unknown numbers become kInternal.
Code CodeFromNumber(uint32_t number);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "<code description>: <message>", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is "context: message". Ok stays ok.
  Status WithContext(std::string_view context) const;

  // Marks an intentionally ignored status (e.g. best-effort cleanup).
  void IgnoreError() const {}

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Shorthand constructors: tierckpt::InvalidArgument("step must be ...").
inline Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
inline Status AlreadyExists(std::string m) { return Status(Code::kAlreadyExists, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(Code::kResourceExhausted, std::move(m)); }
inline Status Corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
inline Status IoError(std::string m) { return Status(Code::kIoError, std::move(m)); }
inline Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
inline Status PermissionDenied(std::string m) { return Status(Code::kPermissionDenied, std::move(m)); }
inline Status FailedPrecondition(std::string m) { return Status(Code::kFailedPrecondition, std::move(m)); }
inline Status ProtocolError(std::string m) { return Status(Code::kProtocolError, std::move(m)); }
inline Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
inline Status Aborted(std::string m) { return Status(Code::kAborted, std::move(m)); }
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
inline Status Unimplemented(std::string m) { return Status(Code::kUnimplemented, std::move(m)); }

// A value of T, or a non-ok Status explaining why there is none.
// Precondition for value()/operator*: ok(). Constructing from an ok Status is
// a programming error and is turned into kInternal.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Internal("Result constructed from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

namespace internal {
inline const Status& AsStatus(const Status& s) { return s; }
template <typename T>
const Status& AsStatus(const Result<T>& r) { return r.status(); }
}  // namespace internal

}  // namespace tierckpt

#define TC_STATUS_CONCAT_INNER(a, b) a##b
#define TC_STATUS_CONCAT(a, b) TC_STATUS_CONCAT_INNER(a, b)

#define TC_RETURN_IF_ERROR(expr)                                         \
  do {                                                                   \
    const ::tierckpt::Status tc_status_ = ::tierckpt::internal::AsStatus(expr); \
    if (!tc_status_.ok()) return tc_status_;                             \
  } while (0)

#define TC_ASSIGN_OR_RETURN(lhs, expr) \
  TC_ASSIGN_OR_RETURN_IMPL(TC_STATUS_CONCAT(tc_result_, __LINE__), lhs, expr)
#define TC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
