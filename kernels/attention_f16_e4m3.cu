// attention_f16_e4m3.cu -- attention kernels for __half activations with a e4m3 cache
// (one translation unit per pair keeps the CUDA build parallel).
#include "attention_dispatch.cuh"

namespace vattn {
namespace kern {
VATTN_ATTN_INSTANTIATE(__half, kCacheE4M3)
}  // namespace kern
}  // namespace vattn
