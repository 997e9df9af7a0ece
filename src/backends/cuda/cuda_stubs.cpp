// cuda_stubs.cpp -- transient: methods not implemented yet.
#include "backends/cuda/cuda_backend_impl.h"
#include "core/error.h"

namespace vattn {
static vattn_status_t not_yet(const char *w) {
  return fail(VATTN_ERR_UNSUPPORTED, "CUDA backend: %s is not yet implemented", w);
}
vattn_status_t cuda_check_layer(const LayerParams &) { return VATTN_OK; }
vattn_status_t cuda_create_builder(const vattn_builder_options_t &, std::unique_ptr<BuilderImpl> *) {
  return not_yet("builder");
}
vattn_status_t cuda_create_layer(const LayerParams &, std::unique_ptr<LayerImpl> *) {
  return not_yet("layer");
}
vattn_status_t cuda_reshape_and_cache(const DLTensor *, const DLTensor *, DLTensor *,
                                      const DLTensor *, int32_t, float, float, void *) {
  return not_yet("reshape_and_cache");
}
vattn_status_t cuda_merge_attn_states(DLTensor *, DLTensor *, const DLTensor *, const DLTensor *,
                                      const DLTensor *, const DLTensor *, void *) {
  return not_yet("merge_attn_states");
}
vattn_status_t cuda_copy_blocks(DLTensor *const *, size_t, const int64_t *, size_t, void *) {
  return not_yet("copy_blocks");
}
vattn_status_t cuda_swap_blocks(const DLTensor *, DLTensor *, const int64_t *, size_t, void *) {
  return not_yet("swap_blocks");
}
}  // namespace vattn
