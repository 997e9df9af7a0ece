// cuda_util.h -- small host helpers of the CUDA backend: CUDA error ->
// status, current-device guard, DLPack -> kernel element kinds, alignment
// checks for the kernels' 16-byte accesses.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "core/tensor.h"
#include "launch.h"

namespace vattn {

// VATTN_ERR_CUDA with CUDA's error string (cudaErrorNotSupported from a
// launcher's dispatch default becomes VATTN_ERR_UNSUPPORTED).
inline vattn_status_t cuda_status(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return VATTN_OK;
  if (e == cudaErrorNotSupported)
    return fail(VATTN_ERR_UNSUPPORTED, "%s: no compiled kernel for this configuration", what);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return fail(VATTN_ERR_OUT_OF_MEMORY, "%s: %s", what, cudaGetErrorString(e));
  }
  return fail(VATTN_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define VATTN_CUDA_TRY(expr, what) VATTN_TRY(::vattn::cuda_status((expr), (what)))

// Makes `device` current for the scope and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (device >= 0 && device != prev_) {
      ok_ = cudaSetDevice(device) == cudaSuccess;
      set_ = true;
    }
  }
  ~DeviceGuard() {
    if (set_ && prev_ >= 0) (void)cudaSetDevice(prev_);
  }
  bool ok() const { return ok_; }
  DeviceGuard(const DeviceGuard &) = delete;
  DeviceGuard &operator=(const DeviceGuard &) = delete;

 private:
  int prev_ = -1;
  bool set_ = false, ok_ = true;
};

// Kernel element kind of a DLPack float type; -1 if none.
inline int32_t elem_kind_of(DLDataType t) {
  if (t.lanes != 1) return -1;
  if (t.code == kDLFloat && t.bits == 16) return kern::kF16;
  if (t.code == kDLBfloat && t.bits == 16) return kern::kBF16;
  if (t.code == kDLFloat && t.bits == 32) return kern::kF32;
  return -1;
}
inline int32_t elem_kind_of_dtype(int32_t vattn_dtype) {
  switch (vattn_dtype) {
    case VATTN_DTYPE_FLOAT16: return kern::kF16;
    case VATTN_DTYPE_BFLOAT16: return kern::kBF16;
    case VATTN_DTYPE_FLOAT32: return kern::kF32;
    default: return -1;
  }
}
inline int32_t cache_kind_of(int32_t kv_cache_dtype) {
  switch (kv_cache_dtype) {
    case VATTN_KV_CACHE_DTYPE_FP8_E4M3: return kern::kCacheE4M3;
    case VATTN_KV_CACHE_DTYPE_FP8_E5M2: return kern::kCacheE5M2;
    default: return kern::kCacheAuto;
  }
}

// True when the innermost dim is contiguous and every other stride and the
// base address are multiples of 16 bytes: the kernels' 16-byte accesses
// are then aligned.
inline bool rows_16b_aligned(const DLTensor *t) {
  const int64_t es = static_cast<int64_t>(dl_dtype_bytes(t->dtype));
  if (t->ndim < 1) return false;
  if (tensor_stride(t, t->ndim - 1) != 1 && t->shape[t->ndim - 1] > 1) return false;
  if ((t->shape[t->ndim - 1] * es) % 16) return false;
  for (int i = 0; i + 1 < t->ndim; ++i)
    if ((tensor_stride(t, i) * es) % 16 && t->shape[i] > 1) return false;
  return reinterpret_cast<uintptr_t>(tensor_data(t)) % 16 == 0;
}

inline vattn_status_t require_16b_rows(const DLTensor *t, const char *name) {
  if (rows_16b_aligned(t)) return VATTN_OK;
  return fail(VATTN_ERR_UNSUPPORTED,
              "tensor '%s': the CUDA kernels need a contiguous last dim and 16-byte aligned base "
              "address and strides (shape %s)",
              name, shape_string(t).c_str());
}

}  // namespace vattn
