// error.cpp -- thread-local error message storage.
#include "core/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace vattn {
namespace {
// Fixed-size buffer: setting the message never allocates (so an
// out-of-memory failure can still be reported).
thread_local char t_message[1024] = {0};

void vformat_into(char *buf, size_t n, const char *fmt, va_list ap) {
  int r = std::vsnprintf(buf, n, fmt, ap);
  if (r < 0) buf[0] = '\0';
}
}  // namespace

vattn_status_t fail(vattn_status_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vformat_into(t_message, sizeof t_message, fmt, ap);
  va_end(ap);
  return status;
}

void clear_error() noexcept { t_message[0] = '\0'; }
const char *last_error() noexcept { return t_message; }

void prefix_error(const char *fn) noexcept {
  size_t fl = std::strlen(fn), ml = std::strlen(t_message);
  if (fl + 3 >= sizeof t_message) return;
  size_t keep = ml < sizeof t_message - fl - 3 ? ml : sizeof t_message - fl - 3;
  std::memmove(t_message + fl + 2, t_message, keep);
  std::memcpy(t_message, fn, fl);
  t_message[fl] = ':';
  t_message[fl + 1] = ' ';
  t_message[fl + 2 + keep] = '\0';
}

std::string format(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vformat_into(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return std::string(buf);
}

}  // namespace vattn
