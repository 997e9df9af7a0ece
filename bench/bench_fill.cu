// bench_fill.cu -- device-side helpers of vattn-bench (CUDA builds only).
// Random fill: element i of the buffer gets uniform_pm1(seed, i) * scale in
// the buffer's element kind, so multi-GB inputs are generated in
// milliseconds and are never zeros.  Read reference: a streaming read of a
// given number of bytes (vbench_read_device, at the end).
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

// ---- same-size read reference ------------------------------------------------------------
// A plain streaming read of the workload's byte count, timed by vattn-bench
// exactly like the workload: the floor a memory-bound kernel of that size can
// reach, launch overhead and ramp-up included (the 1 GiB copy ceiling is not
// reachable for small shapes).

namespace {

// Reads n16 16-byte vectors from base (+ `tail` < 16 bytes after them) with
// streaming loads.  Every thread XOR-reduces what it read and stores it only
// when it equals a fixed constant (random data: ~2^-32 per thread), so the
// loads cannot be optimised away and practically nothing is written.
__global__ void read_kernel(const int4 *__restrict__ base, long long n16, int tail, int *sink) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  int acc = 0;
  // Four independent loads per step keep enough bytes in flight per SM.
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const int4 a = __ldcs(base + i), b = __ldcs(base + i + stride);
    const int4 c = __ldcs(base + i + 2 * stride), d = __ldcs(base + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n16; i += stride) {
    const int4 a = __ldcs(base + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  // The last bytes % 16 bytes: one byte each for the first `tail` threads.
  const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < tail) acc ^= __ldcs(reinterpret_cast<const signed char *>(base + n16) + t);
  if (acc == 0x5bd1e995) *sink = acc;
}

}  // namespace

// Reads `bytes` bytes from `base` (16-byte aligned) on `stream`; `sink` is
// one device int that is practically never written.  Grid: SM count x 8
// blocks of 256 threads.  Returns a cudaError_t value (0 = success);
// asynchronous on `stream`.
extern "C" int vbench_read_device(const void *base, long long bytes, void *sink, void *stream) {
  if (bytes <= 0) return 0;
  static int sms = 0;  // SM count of the current device, queried on the first call
  if (sms == 0) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) {
      sms = 0;
      return static_cast<int>(e);
    }
  }
  read_kernel<<<static_cast<unsigned>(sms) * 8, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const int4 *>(base), bytes / 16, static_cast<int>(bytes % 16), static_cast<int *>(sink));
  return static_cast<int>(cudaGetLastError());
}
