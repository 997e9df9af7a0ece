// cuda_runtime.cpp -- device discovery that degrades to "no GPU".
#include "core/cuda_runtime.h"

#include "core/error.h"

#ifdef VATTN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace vattn {

int32_t cuda_device_count() noexcept {
#ifdef VATTN_WITH_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: not sticky, clear it
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

bool built_with_cuda() noexcept {
#ifdef VATTN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

vattn_status_t cuda_require_device(int32_t id, const char *what) {
  if (!built_with_cuda())
    return fail(VATTN_ERR_NO_DEVICE, "%s: this build of vattn has no CUDA support", what);
  int32_t n = cuda_device_count();
  if (n == 0) return fail(VATTN_ERR_NO_DEVICE, "%s: no usable CUDA device", what);
  if (id < 0 || id >= n)
    return fail(VATTN_ERR_NO_DEVICE, "%s: CUDA device %d does not exist (%d devices)", what, id, n);
  return VATTN_OK;
}

// ---- device memory -------------------------------------------------------------

#ifdef VATTN_WITH_CUDA
namespace {

// Makes `id` the current device for the life of the object.
class DeviceScope {
 public:
  explicit DeviceScope(int32_t id) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      (void)cudaGetLastError();
      prev_ = -1;
    }
    if (prev_ != id) {
      err_ = cudaSetDevice(id);
      if (err_ != cudaSuccess) (void)cudaGetLastError();
      switched_ = err_ == cudaSuccess;
    }
  }
  ~DeviceScope() {
    if (switched_ && prev_ >= 0) (void)cudaSetDevice(prev_);
  }
  cudaError_t error() const { return err_; }

 private:
  int prev_ = -1;
  bool switched_ = false;
  cudaError_t err_ = cudaSuccess;
};

vattn_status_t cuda_fail(cudaError_t e, const char *op, const char *what, size_t bytes) {
  (void)cudaGetLastError();  // clear non-sticky errors so later calls are not poisoned
  if (e == cudaErrorMemoryAllocation)
    return fail(VATTN_ERR_OUT_OF_MEMORY, "%s: %s of %zu bytes: out of device memory (%s)", what,
                op, bytes, cudaGetErrorString(e));
  return fail(VATTN_ERR_CUDA, "%s: %s of %zu bytes failed: %s (%s)", what, op, bytes,
              cudaGetErrorName(e), cudaGetErrorString(e));
}

}  // namespace
#endif

vattn_status_t cuda_malloc(void **out, size_t bytes, int32_t device_id, const char *what) {
  VATTN_TRY(cuda_require_device(device_id, what));
#ifdef VATTN_WITH_CUDA
  DeviceScope scope(device_id);
  if (scope.error() != cudaSuccess) return cuda_fail(scope.error(), "cudaSetDevice", what, bytes);
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) return cuda_fail(e, "cudaMalloc", what, bytes);
  *out = p;
  return VATTN_OK;
#else
  (void)out;
  (void)bytes;
  return fail(VATTN_ERR_NO_DEVICE, "%s: this build of vattn has no CUDA support", what);
#endif
}

void cuda_free(void *ptr, int32_t device_id) noexcept {
#ifdef VATTN_WITH_CUDA
  if (!ptr) return;
  DeviceScope scope(device_id);
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
#else
  (void)ptr;
  (void)device_id;
#endif
}

vattn_status_t cuda_memset_sync(void *ptr, int value, size_t bytes, int32_t device_id,
                                const char *what) {
  VATTN_TRY(cuda_require_device(device_id, what));
#ifdef VATTN_WITH_CUDA
  DeviceScope scope(device_id);
  if (scope.error() != cudaSuccess) return cuda_fail(scope.error(), "cudaSetDevice", what, bytes);
  cudaError_t e = cudaMemset(ptr, value, bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return cuda_fail(e, "cudaMemset", what, bytes);
  return VATTN_OK;
#else
  (void)ptr;
  (void)value;
  (void)bytes;
  return fail(VATTN_ERR_NO_DEVICE, "%s: this build of vattn has no CUDA support", what);
#endif
}

}  // namespace vattn
