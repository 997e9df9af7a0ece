// cache_kernels.cu -- launchers of cache_kernels.cuh.
#include "cache_kernels.cuh"

namespace vattn {
namespace kern {

namespace {
constexpr int kThreads = 256;

int grid_for(int64_t units) {
  // Grid-stride loops: bound the grid, never depend on it for coverage.
  int64_t g = (units + kThreads - 1) / kThreads;
  if (g < 1) g = 1;
  if (g > 65535) g = 65535;
  return static_cast<int>(g);
}

template <class T, int CACHE>
cudaError_t cache_write_t(const CacheWriteParams &p, cudaStream_t s) {
  // 8-wide = 16 bytes of a 16-bit type; fp32 input takes the scalar path.
  int vec = p.vec == 8 && sizeof(T) == 2 ? 8 : 1;
  int64_t units = p.num_tokens * p.num_heads * (p.head_size / vec);
  if (vec == 8)
    cache_write_kernel<T, CACHE, 8><<<grid_for(units), kThreads, 0, s>>>(p);
  else
    cache_write_kernel<T, CACHE, 1><<<grid_for(units), kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

template <class T>
cudaError_t cache_write_cache(const CacheWriteParams &p, int32_t cache, cudaStream_t s) {
  switch (cache) {
    case kCacheAuto: return cache_write_t<T, kCacheAuto>(p, s);
    case kCacheE4M3: return cache_write_t<T, kCacheE4M3>(p, s);
    case kCacheE5M2: return cache_write_t<T, kCacheE5M2>(p, s);
    default: return cudaErrorNotSupported;
  }
}
}  // namespace

bool cache_write_supported(int32_t elem, int32_t cache) {
  return (elem == kF16 || elem == kBF16 || elem == kF32) && cache >= kCacheAuto &&
         cache <= kCacheE5M2;
}

cudaError_t launch_cache_write(const CacheWriteParams &p, int32_t elem, int32_t cache,
                               cudaStream_t s) {
  if (p.num_tokens <= 0) return cudaSuccess;
  switch (elem) {
    case kF16: return cache_write_cache<__half>(p, cache, s);
    case kBF16: return cache_write_cache<__nv_bfloat16>(p, cache, s);
    case kF32: return cache_write_cache<float>(p, cache, s);
    default: return cudaErrorNotSupported;
  }
}

cudaError_t launch_slot_mapping(const int32_t *block_table, int64_t bt_stride,
                                const int32_t *num_blocks_per_row, int64_t max_blocks,
                                const int32_t *query_start_loc, int64_t num_reqs,
                                const int64_t *positions, int64_t num_tokens, int32_t block_size,
                                int64_t num_cache_blocks, int64_t *slot_mapping, int64_t slot_len,
                                cudaStream_t s) {
  if (slot_len <= 0) return cudaSuccess;
  if (num_reqs <= 0) num_tokens = 0;
  slot_mapping_kernel<<<grid_for(slot_len), kThreads, 0, s>>>(
      block_table, bt_stride, num_blocks_per_row, max_blocks, query_start_loc,
      num_reqs > 0 ? num_reqs : 0, positions, num_tokens, block_size, num_cache_blocks,
      slot_mapping, slot_len);
  return cudaGetLastError();
}

cudaError_t launch_copy_blocks(const CopyBlocksParams &p, cudaStream_t s) {
  if (p.num_pairs <= 0) return cudaSuccess;
  copy_blocks_kernel<<<dim3(p.num_pairs, p.num_kv), kThreads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace kern
}  // namespace vattn
