// Status and StatusOr<T>: recoverable failures as values (g++ 12 has no std::expected).
//
// A Status is either OK (no allocation, no message) or a code plus a message that names what
// went wrong. Placement verdicts ("does not fit") are NOT Statuses: they are ordinary results of
// the placement core. A Status is for failures the caller may recover from: bad input, an
// unreachable API server, a missing library.
//
// Thread safety: const methods may be called concurrently; non-const ones need external
// synchronisation, like any value type.
#pragma once

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpupack {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is malformed; retrying the same input fails again
  kNotFound,            // the named object does not exist
  kAlreadyExists,       // create of an object that exists
  kConflict,            // optimistic-concurrency failure (HTTP 409); re-read and retry
  kFailedPrecondition,  // the system is not in a state that allows the call (e.g. not synced)
  kUnavailable,         // transient: connection refused, 5xx, timeout; retry with back-off
  kDeadlineExceeded,    // the call's deadline passed
  kPermissionDenied,    // 401/403
  kResourceExhausted,   // capacity or size limit hit
  kGone,                // HTTP 410: a watch's resourceVersion is too old; relist
  kInternal,            // a bug or an impossible state that was caught rather than aborted on
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) { return {StatusCode::kAlreadyExists, std::move(msg)}; }
  static Status Conflict(std::string msg) { return {StatusCode::kConflict, std::move(msg)}; }
  static Status FailedPrecondition(std::string msg) { return {StatusCode::kFailedPrecondition, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status DeadlineExceeded(std::string msg) { return {StatusCode::kDeadlineExceeded, std::move(msg)}; }
  static Status PermissionDenied(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }
  static Status ResourceExhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }
  static Status Gone(std::string msg) { return {StatusCode::kGone, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // The message without the code; empty for OK.
  const std::string& message() const;
  // "OK" or "InvalidArgument: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  // Null when OK, so the success path costs nothing. Shared and immutable, so copies are cheap.
  std::shared_ptr<const State> state_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

// Aborts the process with a message. For impossible states only (a broken invariant), never for
// bad input.
[[noreturn]] void Die(std::string_view what);

#define GPUPACK_CHECK(cond)                                                                                   \
  do {                                                                                                        \
    if (!(cond))                                                                                              \
      ::gpupack::Die(std::string("check failed: " #cond " at ") + __FILE__ + ":" + std::to_string(__LINE__)); \
  } while (0)

// StatusOr<T>: either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("StatusOr constructed from an OK Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok(). Calling these on an error is a programming error and aborts.
  const T& value() const& {
    Check();
    return *value_;
  }
  T& value() & {
    Check();
    return *value_;
  }
  T&& value() && {
    Check();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void Check() const {
    if (!value_) Die("StatusOr::value() on error: " + status_.ToString());
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace gpupack

// Evaluates an expression yielding Status; returns it from the current function if not OK.
#define GPUPACK_RETURN_IF_ERROR(expr)  \
  do {                                 \
    ::gpupack::Status _gp_st = (expr); \
    if (!_gp_st.ok()) return _gp_st;   \
  } while (0)

#define GPUPACK_CONCAT_INNER(a, b) a##b
#define GPUPACK_CONCAT(a, b) GPUPACK_CONCAT_INNER(a, b)
// GPUPACK_ASSIGN_OR_RETURN(auto x, Expr()); returns the Status from the function on error.
#define GPUPACK_ASSIGN_OR_RETURN(lhs, expr) GPUPACK_ASSIGN_OR_RETURN_IMPL(GPUPACK_CONCAT(_gp_sor_, __LINE__), lhs, expr)
#define GPUPACK_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
