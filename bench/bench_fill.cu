// bench_fill.cu -- device-side random fill for vattn-bench (CUDA builds only):
// element i of the buffer gets uniform_pm1(seed, i) * scale in the buffer's
// element kind, so multi-GB inputs are generated in milliseconds and are
// never zeros.
#include <cuda_runtime_api.h>

#include "bench_values.h"

namespace {

__global__ void fill_kernel(void *base, long long n, int kind, unsigned long long seed, float scale) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    vbench::store_elem(base, i, kind, vbench::uniform_pm1(seed, static_cast<uint64_t>(i)) * scale);
}

}  // namespace

// Returns a cudaError_t value (0 = success); asynchronous on `stream`.
extern "C" int vbench_fill_device(void *base, long long n, int kind, unsigned long long seed,
                                  float scale, void *stream) {
  if (n <= 0) return 0;
  const int threads = 256;
  long long blocks = (n + threads - 1) / threads;
  if (blocks > 132LL * 64) blocks = 132LL * 64;
  fill_kernel<<<static_cast<unsigned>(blocks), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      base, n, kind, seed, scale);
  return static_cast<int>(cudaGetLastError());
}
