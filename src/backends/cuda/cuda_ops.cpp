// cuda_ops.cpp -- header section 12 on CUDA tensors: reshape_and_cache,
// merge_attn_states, copy_blocks (kernels) and swap_blocks (async copies).
// Validation is the shared forward_check.h; everything runs on `stream`.
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cuda/cuda_backend_impl.h"
#include "backends/cuda/cuda_util.h"
#include "backends/forward_check.h"
#include "core/cuda_runtime.h"

namespace vattn {
namespace {

DeviceReq cuda_dev(const DLTensor *t) {
  DeviceReq d;
  d.device_type = kDLCUDA;
  d.device_id = t->device.device_id;
  return d;
}

// Dense sub-block test: dims [d0, ndim) of t with their strides cover a
// compact region of prod(shape) elements (in some order).
bool dense_tail(const DLTensor *t, int d0, int64_t *elems) {
  std::vector<std::pair<int64_t, int64_t>> sd;  // (stride, extent)
  int64_t n = 1;
  for (int i = d0; i < t->ndim; ++i) {
    n *= t->shape[i];
    if (t->shape[i] > 1) sd.emplace_back(tensor_stride(t, i), t->shape[i]);
  }
  std::sort(sd.begin(), sd.end());
  int64_t expect = 1;
  for (auto &e : sd) {
    if (e.first != expect) return false;
    expect *= e.second;
  }
  *elems = n;
  return true;
}

}  // namespace

vattn_status_t cuda_reshape_and_cache(const DLTensor *key, const DLTensor *value,
                                      DLTensor *kv_cache, const DLTensor *slot_mapping,
                                      int32_t kv_cache_dtype, float k_scale, float v_scale,
                                      void *stream) {
  int64_t n = 0;
  VATTN_TRY(check_reshape_and_cache(key, value, kv_cache, slot_mapping, kv_cache_dtype,
                                    cuda_dev(kv_cache), false, &n));
  if (n > 1 && tensor_stride(slot_mapping, 0) != 1)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'slot_mapping': must be contiguous");
  for (const DLTensor *t : {key, value, static_cast<const DLTensor *>(kv_cache)})
    if (tensor_stride(t, t->ndim - 1) != 1 && t->shape[t->ndim - 1] > 1)
      return fail(VATTN_ERR_UNSUPPORTED,
                  "tensor '%s': the CUDA kernel needs a contiguous last dim",
                  t == key ? "key" : t == value ? "value" : "kv_cache");
  if (n == 0) return VATTN_OK;
  const int32_t elem = elem_kind_of(key->dtype);
  const int32_t cache = cache_kind_of(kv_cache_dtype);
  if (!kern::cache_write_supported(elem, cache))
    return fail(VATTN_ERR_UNSUPPORTED, "reshape_and_cache: key dtype %s is not supported on CUDA",
                dl_dtype_name(key->dtype));
  DeviceGuard g(kv_cache->device.device_id);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make the cache's CUDA device current");
  const int64_t es = static_cast<int64_t>(dl_dtype_bytes(kv_cache->dtype));
  char *cb = tensor_data(kv_cache);
  kern::CacheWriteParams w{};
  w.key = tensor_data(key);
  w.value = tensor_data(value);
  w.k_stride_tok = tensor_stride(key, 0);
  w.k_stride_head = tensor_stride(key, 1);
  w.v_stride_tok = tensor_stride(value, 0);
  w.v_stride_head = tensor_stride(value, 1);
  w.k_cache = cb;
  w.v_cache = cb + tensor_stride(kv_cache, 0) * es;
  w.kc_stride_block = w.vc_stride_block = tensor_stride(kv_cache, 1);
  w.kc_stride_tok = w.vc_stride_tok = tensor_stride(kv_cache, 2);
  w.kc_stride_head = w.vc_stride_head = tensor_stride(kv_cache, 3);
  w.slot_mapping = reinterpret_cast<const int64_t *>(tensor_data(slot_mapping));
  w.num_tokens = n;
  w.num_heads = static_cast<int32_t>(kv_cache->shape[3]);
  w.head_size = static_cast<int32_t>(kv_cache->shape[4]);
  w.block_size = static_cast<int32_t>(kv_cache->shape[2]);
  w.num_slots = kv_cache->shape[1] * kv_cache->shape[2];
  w.k_scale = k_scale;
  w.v_scale = v_scale;
  // 8-wide vectors need 16-byte aligned source rows and 8-element aligned
  // cache rows (8 bytes for fp8, 16 for 16-bit).
  const bool src_ok = rows_16b_aligned(key) && rows_16b_aligned(value);
  bool dst_ok = (w.head_size % 8) == 0 && reinterpret_cast<uintptr_t>(cb) % 16 == 0;
  for (int i = 0; i < 4; ++i) dst_ok = dst_ok && (tensor_stride(kv_cache, i) % 8) == 0;
  w.vec = src_ok && dst_ok ? 8 : 1;
  return cuda_status(kern::launch_cache_write(w, elem, cache, static_cast<cudaStream_t>(stream)),
                     "reshape_and_cache kernel");
}

vattn_status_t cuda_merge_attn_states(DLTensor *output, DLTensor *output_lse,
                                      const DLTensor *prefix_output, const DLTensor *prefix_lse,
                                      const DLTensor *suffix_output, const DLTensor *suffix_lse,
                                      void *stream) {
  VATTN_TRY(check_merge(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse,
                        cuda_dev(output)));
  const int64_t T = output->shape[0];
  if (T == 0 || output->shape[1] == 0) return VATTN_OK;
  const int32_t elem = elem_kind_of(output->dtype);
  DeviceGuard g(output->device.device_id);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make the output's CUDA device current");
  kern::MergeStatesParams m{};
  m.out = tensor_data(output);
  m.o_st = tensor_stride(output, 0);
  m.o_sh = tensor_stride(output, 1);
  if (tensor_stride(output, 2) != 1 || tensor_stride(prefix_output, 2) != 1 ||
      tensor_stride(suffix_output, 2) != 1)
    if (output->shape[2] > 1)
      return fail(VATTN_ERR_UNSUPPORTED, "merge_attn_states: the CUDA kernel needs a contiguous head dim");
  if (output_lse) {
    m.out_lse = reinterpret_cast<float *>(tensor_data(output_lse));
    m.ol_sh = tensor_stride(output_lse, 0);
    m.ol_st = tensor_stride(output_lse, 1);
  }
  m.pre = tensor_data(prefix_output);
  m.p_st = tensor_stride(prefix_output, 0);
  m.p_sh = tensor_stride(prefix_output, 1);
  m.pre_lse = reinterpret_cast<const float *>(tensor_data(prefix_lse));
  m.pl_sh = tensor_stride(prefix_lse, 0);
  m.pl_st = tensor_stride(prefix_lse, 1);
  m.suf = tensor_data(suffix_output);
  m.s_st = tensor_stride(suffix_output, 0);
  m.s_sh = tensor_stride(suffix_output, 1);
  m.suf_lse = reinterpret_cast<const float *>(tensor_data(suffix_lse));
  m.sl_sh = tensor_stride(suffix_lse, 0);
  m.sl_st = tensor_stride(suffix_lse, 1);
  m.num_tokens = T;
  m.num_heads = static_cast<int32_t>(output->shape[1]);
  m.head_size = static_cast<int32_t>(output->shape[2]);
  return cuda_status(kern::launch_merge_states(m, elem, static_cast<cudaStream_t>(stream)),
                     "merge_attn_states kernel");
}

vattn_status_t cuda_copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                                const int64_t *block_mapping, size_t num_pairs, void *stream) {
  VATTN_TRY(check_copy_blocks(kv_caches, num_layers, block_mapping, num_pairs,
                              cuda_dev(kv_caches[0])));
  for (size_t l = 0; l < num_layers; ++l) {
    const DLTensor *c = kv_caches[l];
    if (c->ndim != 5 && c->ndim != 3)
      return fail(VATTN_ERR_UNSUPPORTED,
                  "tensor 'kv_caches[%zu]': rank %d; CUDA copy_blocks takes (2, nb, bs, H, D) or "
                  "(nb, bs, D) caches", l, c->ndim);
    if (tensor_stride(c, c->ndim - 1) != 1 && c->shape[c->ndim - 1] > 1)
      return fail(VATTN_ERR_UNSUPPORTED, "tensor 'kv_caches[%zu]': last dim must be contiguous", l);
  }
  if (num_pairs == 0) return VATTN_OK;
  DeviceGuard g(kv_caches[0]->device.device_id);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make the caches' CUDA device current");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  kern::CopyBlocksParams p{};
  for (size_t l = 0; l < num_layers; ++l) {
    const DLTensor *c = kv_caches[l];
    const int64_t es = static_cast<int64_t>(dl_dtype_bytes(c->dtype));
    p.cache = tensor_data(c);
    if (c->ndim == 5) {
      p.num_kv = 2;
      p.s_kv = tensor_stride(c, 0) * es;
      p.s_block = tensor_stride(c, 1) * es;
      p.s_tok = tensor_stride(c, 2) * es;
      p.s_head = tensor_stride(c, 3) * es;
      p.block_size = static_cast<int32_t>(c->shape[2]);
      p.num_heads = static_cast<int32_t>(c->shape[3]);
      p.row_bytes = c->shape[4] * es;
    } else {
      p.num_kv = 1;
      p.s_kv = 0;
      p.s_block = tensor_stride(c, 0) * es;
      p.s_tok = tensor_stride(c, 1) * es;
      p.s_head = 0;
      p.block_size = static_cast<int32_t>(c->shape[1]);
      p.num_heads = 1;
      p.row_bytes = c->shape[2] * es;
    }
    p.vec16 = reinterpret_cast<uintptr_t>(p.cache) % 16 == 0 && p.row_bytes % 16 == 0 &&
              p.s_kv % 16 == 0 && p.s_block % 16 == 0 && p.s_tok % 16 == 0 && p.s_head % 16 == 0;
    if (p.block_size == 0 || p.num_heads == 0 || p.row_bytes == 0) continue;
    for (size_t i = 0; i < num_pairs; i += kern::kCopyPairsPerLaunch) {
      const size_t n = std::min<size_t>(kern::kCopyPairsPerLaunch, num_pairs - i);
      p.num_pairs = static_cast<int32_t>(n);
      for (size_t k = 0; k < 2 * n; ++k) p.pairs[k] = block_mapping[2 * i + k];
      VATTN_CUDA_TRY(kern::launch_copy_blocks(p, s), "copy_blocks kernel");
    }
  }
  return VATTN_OK;
}

vattn_status_t cuda_swap_blocks(const DLTensor *src, DLTensor *dst, const int64_t *block_mapping,
                                size_t num_pairs, void *stream) {
  VATTN_TRY(check_swap_blocks(src, dst, block_mapping, num_pairs));
  const bool sc = src->device.device_type == kDLCUDA, dc = dst->device.device_type == kDLCUDA;
  if (sc && dc && src->device.device_id != dst->device.device_id)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor 'dst': CUDA device %d differs from src's device %d (swap between two GPUs "
                "is not supported)",
                (int)dst->device.device_id, (int)src->device.device_id);
  const int bd = block_dim_of(src);
  const int nkv = bd == 1 ? 2 : 1;
  int64_t es_n = 0, ed_n = 0;
  if (!dense_tail(src, bd + 1, &es_n) || !dense_tail(dst, bd + 1, &ed_n))
    return fail(VATTN_ERR_UNSUPPORTED,
                "swap_blocks on CUDA needs every block of src and dst to be one dense region "
                "(src %s, dst %s)",
                shape_string(src).c_str(), shape_string(dst).c_str());
  if (num_pairs == 0) return VATTN_OK;
  const size_t es = dl_dtype_bytes(src->dtype);
  const size_t bytes = static_cast<size_t>(es_n) * es;
  DeviceGuard g(sc ? src->device.device_id : dst->device.device_id);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make the CUDA device current");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const cudaMemcpyKind kind = sc && dc ? cudaMemcpyDeviceToDevice
                              : sc     ? cudaMemcpyDeviceToHost
                                       : cudaMemcpyHostToDevice;
  const char *sb = tensor_data(src);
  char *db = tensor_data(dst);
  for (size_t i = 0; i < num_pairs; ++i)
    for (int kv = 0; kv < nkv; ++kv) {
      const int64_t so = (nkv == 2 ? kv * tensor_stride(src, 0) : 0) +
                         block_mapping[2 * i] * tensor_stride(src, bd);
      const int64_t dof = (nkv == 2 ? kv * tensor_stride(dst, 0) : 0) +
                          block_mapping[2 * i + 1] * tensor_stride(dst, bd);
      VATTN_CUDA_TRY(cudaMemcpyAsync(db + dof * es, sb + so * es, bytes, kind, s),
                     "swap_blocks copy");
    }
  return VATTN_OK;
}

vattn_status_t cuda_slot_mapping_tensors(int32_t device, const int32_t *block_table,
                                         int64_t bt_stride, int64_t bt_cols,
                                         const int32_t *query_start_loc, int64_t num_reqs,
                                         const int64_t *positions, int64_t num_tokens,
                                         int32_t block_size, int64_t num_cache_blocks,
                                         int64_t *slot_mapping, int64_t slot_len, void *stream) {
  if (slot_len == 0) return VATTN_OK;
  DeviceGuard g(device);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make CUDA device %d current", device);
  VATTN_CUDA_TRY(kern::launch_slot_mapping(block_table, bt_stride, nullptr, bt_cols,
                                           query_start_loc, num_reqs, positions, num_tokens,
                                           block_size, num_cache_blocks, slot_mapping, slot_len,
                                           static_cast<cudaStream_t>(stream)),
                 "slot mapping kernel");
  return VATTN_OK;
}

}  // namespace vattn
