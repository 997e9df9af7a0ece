// error.h -- status codes + the thread-local error message, and the guard
// that every extern "C" body runs inside.
//
// Internal code reports failure in one of two ways:
//  - return vattn::fail(status, "fmt", ...)   (sets the message, returns status)
//  - throw vattn::Error(status, "message")    (deep helpers; the guard catches)
// The guard turns std::bad_alloc into VATTN_ERR_OUT_OF_MEMORY and anything
// else into VATTN_ERR_INTERNAL, so nothing ever crosses the C boundary.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "vattn.h"

namespace vattn {

// Sets this thread's message (printf format) and returns `status`.
vattn_status_t fail(vattn_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void clear_error() noexcept;
// Prepends "fn: " to the current message (the guard names the entry point).
void prefix_error(const char *fn) noexcept;
const char *last_error() noexcept;

// Thrown by internal helpers that are too deep to return a status.
class Error : public std::exception {
 public:
  Error(vattn_status_t status, std::string message)
      : status_(status), message_(std::move(message)) {}
  vattn_status_t status() const noexcept { return status_; }
  const char *what() const noexcept override { return message_.c_str(); }

 private:
  vattn_status_t status_;
  std::string message_;
};

// Formats like printf into a std::string.
std::string format(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

// Runs `body` (returning vattn_status_t) with the error cleared first and
// every exception converted to a status + message.
template <class F>
vattn_status_t guard(const char *fn, F &&body) noexcept {
  try {
    clear_error();
    vattn_status_t st = body();
    if (st != VATTN_OK) prefix_error(fn);
    return st;
  } catch (const Error &e) {
    return fail(e.status(), "%s: %s", fn, e.what());
  } catch (const std::bad_alloc &) {
    return fail(VATTN_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  } catch (const std::exception &e) {
    return fail(VATTN_ERR_INTERNAL, "%s: internal error: %s", fn, e.what());
  } catch (...) {
    return fail(VATTN_ERR_INTERNAL, "%s: internal error: unknown exception", fn);
  }
}

// For void entry points (destroy functions): swallows everything.
template <class F>
void guard_void(F &&body) noexcept {
  try {
    body();
  } catch (...) {
  }
}

}  // namespace vattn

// Argument checks: return a status with a message naming the argument.
#define VATTN_CHECK_ARG(cond, ...)                                   \
  do {                                                               \
    if (!(cond)) return ::vattn::fail(VATTN_ERR_INVALID_ARGUMENT, __VA_ARGS__); \
  } while (0)

#define VATTN_CHECK_NOT_NULL(ptr)                                                    \
  do {                                                                               \
    if ((ptr) == nullptr)                                                            \
      return ::vattn::fail(VATTN_ERR_INVALID_ARGUMENT, "argument '%s' is NULL", #ptr); \
  } while (0)

// Propagates a non-OK status (the callee already set the message).
#define VATTN_TRY(expr)                          \
  do {                                           \
    vattn_status_t vattn_try_st_ = (expr);       \
    if (vattn_try_st_ != VATTN_OK) return vattn_try_st_; \
  } while (0)
