// buffer.cpp -- host / CUDA allocations (see buffer.h).
#include "kv_cache/buffer.h"

#include <cstring>
#include <new>

#include "core/cuda_runtime.h"

namespace vattn {

Buffer &Buffer::operator=(Buffer &&o) noexcept {
  if (this != &o) {
    release();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    dev_ = o.dev_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::release() noexcept {
  if (!ptr_) return;
  if (dev_.device_type == kDLCUDA)
    cuda_free(ptr_, dev_.device_id);
  else
    ::operator delete(ptr_, std::align_val_t(kHostAlignment));
  ptr_ = nullptr;
  bytes_ = 0;
}

vattn_status_t Buffer::allocate(DLDevice dev, int64_t bytes, bool zero, const char *what,
                                Buffer *out) {
  if (bytes <= 0)
    return fail(VATTN_ERR_INTERNAL, "%s: allocation of %lld bytes requested", what,
                static_cast<long long>(bytes));
  Buffer b;
  b.dev_ = dev;
  const size_t n = static_cast<size_t>(bytes);
  if (dev.device_type == kDLCPU) {
    try {
      b.ptr_ = ::operator new(n, std::align_val_t(kHostAlignment));
    } catch (const std::bad_alloc &) {
      return fail(VATTN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes of host memory", what,
                  static_cast<long long>(bytes));
    }
    if (!b.ptr_)  // some sanitizer allocators return NULL instead of throwing
      return fail(VATTN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes of host memory", what,
                  static_cast<long long>(bytes));
    b.bytes_ = bytes;
    if (zero) std::memset(b.ptr_, 0, n);
  } else if (dev.device_type == kDLCUDA) {
    void *p = nullptr;
    VATTN_TRY(cuda_malloc(&p, n, dev.device_id, what));
    b.ptr_ = p;
    b.bytes_ = bytes;
    if (zero) VATTN_TRY(cuda_memset_sync(b.ptr_, 0, n, dev.device_id, what));  // b frees on failure
  } else {
    return fail(VATTN_ERR_INTERNAL, "%s: device type %d cannot be allocated", what,
                static_cast<int>(dev.device_type));
  }
  *out = static_cast<Buffer &&>(b);
  return VATTN_OK;
}

}  // namespace vattn
