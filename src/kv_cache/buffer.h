// buffer.h -- one owned allocation of host or CUDA memory.
//
// Host memory is 64-byte aligned (a cache line, and enough for any vector
// load of the CPU kernels) and comes from the aligned operator new, so that
// a failed allocation is a catchable std::bad_alloc turned into
// VATTN_ERR_OUT_OF_MEMORY.  CUDA memory comes from cudaMalloc (256-byte
// aligned) through core/cuda_runtime.
#pragma once

#include <cstdint>

#include "core/error.h"

namespace vattn {

class Buffer {
 public:
  static constexpr size_t kHostAlignment = 64;

  Buffer() = default;
  ~Buffer() { release(); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  Buffer(Buffer &&o) noexcept { *this = static_cast<Buffer &&>(o); }
  Buffer &operator=(Buffer &&o) noexcept;

  // Allocates `bytes` (> 0) on `dev` (kDLCPU or kDLCUDA), zeroed when
  // `zero`.  `what` names the allocation in messages.  *out is replaced
  // only on success.
  static vattn_status_t allocate(DLDevice dev, int64_t bytes, bool zero, const char *what,
                                 Buffer *out);

  void *data() const { return ptr_; }
  int64_t bytes() const { return bytes_; }
  DLDevice device() const { return dev_; }

 private:
  void release() noexcept;
  void *ptr_ = nullptr;
  int64_t bytes_ = 0;
  DLDevice dev_{kDLCPU, 0};
};

}  // namespace vattn
