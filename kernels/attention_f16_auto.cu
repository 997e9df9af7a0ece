// attention_f16_auto.cu -- attention kernels for __half activations with a auto cache
// (one translation unit per pair keeps the CUDA build parallel).
#include "attention_dispatch.cuh"

namespace vattn {
namespace kern {
VATTN_ATTN_INSTANTIATE(__half, kCacheAuto)
}  // namespace kern
}  // namespace vattn
