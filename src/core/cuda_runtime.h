// cuda_runtime.h -- the few CUDA runtime facts host code needs, callable in
// every build (a CPU-only build reports zero devices).
#pragma once

#include <cstddef>
#include <cstdint>

#include "vattn.h"

namespace vattn {

// Number of usable CUDA devices; 0 when built without CUDA or when no
// driver / GPU is present.
int32_t cuda_device_count() noexcept;

// True when this library was compiled with CUDA kernels.
bool built_with_cuda() noexcept;

// Checks that device `id` exists; otherwise VATTN_ERR_NO_DEVICE + message.
vattn_status_t cuda_require_device(int32_t id, const char *what);

// ---- device memory ---------------------------------------------------------
// Each call makes `device_id` current for its duration and restores the
// caller's current device.  Failures: VATTN_ERR_OUT_OF_MEMORY (cudaMalloc
// ran out), VATTN_ERR_CUDA (any other CUDA error; the message has CUDA's
// error string and `what`), VATTN_ERR_NO_DEVICE (built without CUDA, no GPU,
// or no such device).  *out is untouched on failure.

// cudaMalloc of `bytes` (> 0) on `device_id`.
vattn_status_t cuda_malloc(void **out, size_t bytes, int32_t device_id, const char *what);
// cudaFree; NULL is a no-op; errors are swallowed (used by destructors).
void cuda_free(void *ptr, int32_t device_id) noexcept;
// cudaMemset of `bytes` at `ptr`, then waits for it to finish, so the
// memory reads as `value` from any stream afterwards.
vattn_status_t cuda_memset_sync(void *ptr, int value, size_t bytes, int32_t device_id,
                                const char *what);

}  // namespace vattn
