// attention_bf16_e4m3.cu -- attention kernels for __nv_bfloat16 activations with a e4m3 cache
// (one translation unit per pair keeps the CUDA build parallel).
#include "attention_dispatch.cuh"

namespace vattn {
namespace kern {
VATTN_ATTN_INSTANTIATE(__nv_bfloat16, kCacheE4M3)
}  // namespace kern
}  // namespace vattn
