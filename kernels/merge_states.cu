// merge_states.cu -- launcher of merge_states.cuh.
#include "merge_states.cuh"

namespace vattn {
namespace kern {

cudaError_t launch_merge_states(const MergeStatesParams &p, int32_t elem, cudaStream_t s) {
  const int64_t rows = p.num_tokens * p.num_heads;
  if (rows <= 0) return cudaSuccess;
  int64_t g = (rows + 3) / 4;  // 4 warps per block
  if (g > 65535) g = 65535;
  switch (elem) {
    case kF16: merge_states_kernel<__half><<<static_cast<int>(g), 128, 0, s>>>(p); break;
    case kBF16: merge_states_kernel<__nv_bfloat16><<<static_cast<int>(g), 128, 0, s>>>(p); break;
    case kF32: merge_states_kernel<float><<<static_cast<int>(g), 128, 0, s>>>(p); break;
    default: return cudaErrorNotSupported;
  }
  return cudaGetLastError();
}

}  // namespace kern
}  // namespace vattn
