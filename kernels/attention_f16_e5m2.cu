// attention_f16_e5m2.cu -- attention kernels for __half activations with a e5m2 cache
// (one translation unit per pair keeps the CUDA build parallel).
#include "attention_dispatch.cuh"

namespace vattn {
namespace kern {
VATTN_ATTN_INSTANTIATE(__half, kCacheE5M2)
}  // namespace kern
}  // namespace vattn
