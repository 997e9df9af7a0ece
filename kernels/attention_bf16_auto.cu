// attention_bf16_auto.cu -- attention kernels for __nv_bfloat16 activations with a auto cache
// (one translation unit per pair keeps the CUDA build parallel).
#include "attention_dispatch.cuh"

namespace vattn {
namespace kern {
VATTN_ATTN_INSTANTIATE(__nv_bfloat16, kCacheAuto)
}  // namespace kern
}  // namespace vattn
