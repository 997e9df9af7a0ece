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

}  // namespace vattn
