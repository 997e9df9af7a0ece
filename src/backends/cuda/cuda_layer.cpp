// cuda_layer.cpp -- the CUDA attention layer: validation (shared
// forward_check), then on the caller's stream: cache write, attention over
// the plan's work items, merge pass.  Allocates nothing, never synchronizes.
//
// Per attention type (same rules as the CPU backend, cpu_layer.cpp):
//  DECODER          paged keys [0, seq_len), causal unless md.causal = 0;
//                   sliding window w: keys with qpos - j <= w - 1 (and j <= qpos)
//  ENCODER_DECODER  paged keys [0, seq_len = encoder length), never causal;
//                   a window is one-sided as FlashAttention's (w - 1, 0)
//  ENCODER          dense keys: the request's own key/value rows, never causal
//  ENCODER_ONLY     dense keys, two-sided window |qpos - j| <= w - 1
#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_backend_impl.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_util.h"
#include "backends/forward_check.h"
#include "core/cuda_runtime.h"

namespace vattn {
namespace {

class CudaLayer final : public LayerImpl {
 public:
  explicit CudaLayer(const LayerParams &p) : p_(p) {}
  ~CudaLayer() override {
    if (dev_params_) {
      DeviceGuard g(device_);
      (void)cudaFree(dev_params_);
    }
  }
  vattn_status_t init();
  vattn_status_t forward(const PlanImpl &plan, const vattn_forward_args_t &a) const override;

 private:
  LayerParams p_;
  int device_ = -1;
  float *dev_params_ = nullptr;  // [alibi (H) | sinks (H)] on device_
  const float *alibi_ = nullptr, *sinks_ = nullptr;
};

vattn_status_t CudaLayer::init() {
  const int32_t elem = elem_kind_of_dtype(p_.dtype);
  const int32_t cache = cache_kind_of(p_.kv_cache_dtype);
  // Raise the kernel's shared-memory limit on every device, now: it is not
  // a stream operation and must not happen inside a graph capture.
  const int n = cuda_device_count();
  for (int d = 0; d < n; ++d) {
    DeviceGuard g(d);
    if (!g.ok()) continue;
    VATTN_CUDA_TRY(kern::attention_prepare(elem, cache, p_.head_size), "preparing the attention kernel");
    if (kern::decode_supported(elem, cache, p_.head_size))
      VATTN_CUDA_TRY(kern::decode_prepare(elem, cache, p_.head_size), "preparing the decode kernel");
  }
  if (p_.alibi_slopes.empty() && p_.sinks.empty()) return VATTN_OK;
  if (n == 0)
    return fail(VATTN_ERR_NO_DEVICE, "CUDA layer with ALiBi / sinks needs a CUDA device");
  VATTN_CUDA_TRY(cudaGetDevice(&device_), "cudaGetDevice");
  std::vector<float> host(2 * static_cast<size_t>(p_.num_heads), 0.f);
  for (int32_t h = 0; h < p_.num_heads; ++h) {
    if (!p_.alibi_slopes.empty()) host[h] = p_.alibi_slopes[h];
    if (!p_.sinks.empty()) host[p_.num_heads + h] = p_.sinks[h];
  }
  void *d = nullptr;
  VATTN_CUDA_TRY(cudaMalloc(&d, host.size() * sizeof(float)), "layer parameters");
  dev_params_ = static_cast<float *>(d);
  VATTN_CUDA_TRY(cudaMemcpy(dev_params_, host.data(), host.size() * sizeof(float),
                            cudaMemcpyHostToDevice),
                 "layer parameters");
  if (!p_.alibi_slopes.empty()) alibi_ = dev_params_;
  if (!p_.sinks.empty()) sinks_ = dev_params_ + p_.num_heads;
  return VATTN_OK;
}

vattn_status_t CudaLayer::forward(const PlanImpl &pb, const vattn_forward_args_t &a) const {
  const CudaPlan *plan = dynamic_cast<const CudaPlan *>(&pb);
  if (!plan) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'plan' was not built by a CUDA builder");
  if (plan->num_heads != p_.num_heads || plan->num_kv_heads != p_.num_kv_heads ||
      plan->head_size != p_.head_size)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument 'plan': built for %d heads / %d KV heads / head size %d but the layer "
                "has %d / %d / %d",
                plan->num_heads, plan->num_kv_heads, plan->head_size, p_.num_heads,
                p_.num_kv_heads, p_.head_size);
  if (dev_params_ && device_ != plan->device)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument 'plan': on CUDA device %d but the layer's ALiBi / sink parameters were "
                "created on device %d",
                plan->device, device_);
  const Metadata &md = plan->md;
  ForwardPlanSummary sum;
  DeviceReq dev;
  dev.device_type = kDLCUDA;
  dev.device_id = plan->device;
  VATTN_TRY(check_forward(p_, md, plan->block_size, plan->common_prefix_len, a, dev, &sum));
  VATTN_TRY(require_16b_rows(a.query, "args.query"));
  VATTN_TRY(require_16b_rows(a.output, "args.output"));
  if (sum.writes_cache || sum.dense_kv) {
    VATTN_TRY(require_16b_rows(a.key, "args.key"));
    VATTN_TRY(require_16b_rows(a.value, "args.value"));
  }
  if (sum.reads_cache) VATTN_TRY(require_16b_rows(a.kv_cache, "args.kv_cache"));

  DeviceGuard g(plan->device);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make CUDA device %d current", plan->device);
  cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  const int32_t elem = elem_kind_of_dtype(p_.dtype);
  const int32_t cache = cache_kind_of(p_.kv_cache_dtype);
  const CudaPlanLayout &L = plan->lay;
  const int32_t *hdr = plan->d<int32_t>(L.header);

  // ---- logical cache (2, nb, bs, H, D): K half at index 0, V at 1
  const DLTensor *kc = a.kv_cache;
  int64_t cs[5] = {0, 0, 0, 0, 0};
  char *cbase = nullptr;
  int64_t ces = 1;
  if (sum.reads_cache) {
    for (int i = 0; i < 5; ++i) cs[i] = tensor_stride(kc, i);
    cbase = tensor_data(kc);
    ces = static_cast<int64_t>(dl_dtype_bytes(kc->dtype));
  }

  if (sum.writes_cache && sum.num_slots > 0) {
    kern::CacheWriteParams w{};
    w.key = tensor_data(a.key);
    w.value = tensor_data(a.value);
    w.k_stride_tok = tensor_stride(a.key, 0);
    w.k_stride_head = tensor_stride(a.key, 1);
    w.v_stride_tok = tensor_stride(a.value, 0);
    w.v_stride_head = tensor_stride(a.value, 1);
    w.k_cache = cbase;
    w.v_cache = cbase + cs[0] * ces;
    w.kc_stride_block = w.vc_stride_block = cs[1];
    w.kc_stride_tok = w.vc_stride_tok = cs[2];
    w.kc_stride_head = w.vc_stride_head = cs[3];
    w.slot_mapping = plan->d<int64_t>(L.slot_mapping);
    w.num_tokens = plan->grid_cache;  // grid bound; the count is read on the device
    w.num_tokens_dev = hdr + 2;
    w.num_heads = p_.num_kv_heads;
    w.head_size = p_.head_size;
    w.block_size = plan->block_size;
    w.num_slots = sum.num_cache_blocks * plan->block_size;
    w.k_scale = a.k_scale;
    w.v_scale = a.v_scale;
    w.vec = 8;  // rows checked 16-byte aligned above
    VATTN_CUDA_TRY(kern::launch_cache_write(w, elem, cache, stream), "reshape_and_cache kernel");
  }

  kern::AttnParams ap{};
  ap.q = tensor_data(a.query);
  ap.q_stride_tok = tensor_stride(a.query, 0);
  ap.q_stride_head = tensor_stride(a.query, 1);
  ap.q_extent = a.query->shape[0];
  if (sum.dense_kv) {
    ap.k = tensor_data(a.key);
    ap.v = tensor_data(a.value);
    ap.k_stride_tok = tensor_stride(a.key, 0);
    ap.k_stride_head = tensor_stride(a.key, 1);
    ap.v_stride_tok = tensor_stride(a.value, 0);
    ap.v_stride_head = tensor_stride(a.value, 1);
    ap.paged = 0;
    ap.kv_extent = a.key->shape[0] < a.value->shape[0] ? a.key->shape[0] : a.value->shape[0];
  } else {
    ap.k = cbase;
    ap.v = cbase + cs[0] * ces;
    ap.k_stride_block = ap.v_stride_block = cs[1];
    ap.k_stride_tok = ap.v_stride_tok = cs[2];
    ap.k_stride_head = ap.v_stride_head = cs[3];
    ap.paged = 1;
    ap.kv_extent = sum.num_cache_blocks;
  }
  ap.block_size = plan->block_size;
  ap.block_table = plan->d<int32_t>(L.block_table);
  ap.bt_stride = plan->max_blocks_per_req;
  ap.out = tensor_data(a.output);
  ap.o_stride_tok = tensor_stride(a.output, 0);
  ap.o_stride_head = tensor_stride(a.output, 1);
  if (a.output_lse) {
    ap.lse = reinterpret_cast<float *>(tensor_data(a.output_lse));
    ap.lse_stride_head = tensor_stride(a.output_lse, 0);
    ap.lse_stride_tok = tensor_stride(a.output_lse, 1);
  }
  ap.ws_o = plan->d<float>(L.ws_o);
  ap.ws_lse = plan->d<float>(L.ws_lse);
  ap.reqs = plan->d<kern::AttnReq>(L.reqs);
  ap.items = plan->d<kern::AttnItem>(L.items);
  ap.merge_counters = plan->d<int32_t>(L.merge_ctr);
  ap.units = plan->d<int32_t>(L.units);
  ap.unit_ctr = plan->d<int32_t>(L.unit_ctr);
  ap.num_items = hdr;
  ap.num_heads = p_.num_heads;
  ap.num_kv_heads = p_.num_kv_heads;
  ap.group = p_.queries_per_kv();
  ap.scale = p_.scale;
  const bool fp8 = p_.kv_cache_dtype != VATTN_KV_CACHE_DTYPE_AUTO && !sum.dense_kv;
  ap.k_scale = fp8 ? a.k_scale : 1.f;
  ap.v_scale = fp8 ? a.v_scale : 1.f;
  ap.softcap = p_.logits_soft_cap;
  ap.alibi = alibi_;
  ap.sinks = sinks_;
  ap.window_left = -1;
  ap.window_right = -1;
  if (p_.sliding_window > 0) {
    ap.window_left = p_.sliding_window - 1;
    ap.window_right = p_.attn_type == VATTN_ATTN_ENCODER_ONLY ? p_.sliding_window - 1 : 0;
  }
  ap.allow_causal = p_.attn_type == VATTN_ATTN_DECODER ? 1 : 0;
  // Dense K/V comes in the layer dtype even when the layer has an fp8 cache.
  const int32_t kv_cache_kind = sum.dense_kv ? kern::kCacheAuto : cache;
  // Paged layers run the plan's decode items (after the general ones) with
  // the decode kernel; dense K/V or a head size without a decode kernel
  // runs every item with attention_kernel.  A plan built for capture
  // launches both kernels (each reads its item count on the device).
  ap.first_item = hdr + 3;
  const bool dec = ap.paged && kern::decode_supported(elem, kv_cache_kind, p_.head_size);
  if (dec) {
    ap.num_items = hdr + 3;  // general items [0, header[3])
    if (plan->capture || plan->num_gen_items > 0)
      VATTN_CUDA_TRY(kern::launch_attention(ap, elem, kv_cache_kind, p_.head_size, plan->grid_attn, stream),
                     "attention kernel");
    ap.num_items = hdr;  // decode items [header[3], header[0])
    if (plan->capture || plan->num_items > plan->num_gen_items)
      VATTN_CUDA_TRY(kern::launch_decode(ap, elem, kv_cache_kind, p_.head_size, plan->dec_heads, plan->grid_dec,
                                         stream),
                     "decode kernel");
  } else {
    const int32_t grid = std::max<int32_t>(plan->grid_attn, std::min<int32_t>(plan->num_items, 65535));
    VATTN_CUDA_TRY(kern::launch_attention(ap, elem, kv_cache_kind, p_.head_size, grid, stream),
                   "attention kernel");
  }
  if (!plan->needs_merge) return VATTN_OK;

  kern::PlanMergeParams mp{};
  mp.out = ap.out;
  mp.o_stride_tok = ap.o_stride_tok;
  mp.o_stride_head = ap.o_stride_head;
  mp.lse = ap.lse;
  mp.lse_stride_head = ap.lse_stride_head;
  mp.lse_stride_tok = ap.lse_stride_tok;
  mp.ws_o = ap.ws_o;
  mp.ws_lse = ap.ws_lse;
  mp.tok_parts = plan->d<int2>(L.tok_parts);
  mp.part_list = plan->d<int32_t>(L.part_list);
  mp.num_tokens = hdr + 1;
  mp.num_heads = p_.num_heads;
  mp.num_kv_heads = p_.num_kv_heads;
  mp.group = ap.group;
  mp.head_size = p_.head_size;
  mp.sinks = sinks_;
  VATTN_CUDA_TRY(kern::launch_plan_merge(mp, elem, plan->grid_merge, stream), "merge kernel");
  return VATTN_OK;
}

}  // namespace

vattn_status_t cuda_check_layer(const LayerParams &p) {
  const int32_t elem = elem_kind_of_dtype(p.dtype);
  if (!kern::attention_supported(elem, cache_kind_of(p.kv_cache_dtype), p.head_size))
    return fail(VATTN_ERR_UNSUPPORTED,
                "backend CUDA: no kernel for head_size %d with dtype %d and kv_cache_dtype %d",
                p.head_size, p.dtype, p.kv_cache_dtype);
  if (p.queries_per_kv() > kern::kAttnRowsPerTile)
    return fail(VATTN_ERR_UNSUPPORTED,
                "backend CUDA: %d query heads per KV head (at most %d)", p.queries_per_kv(),
                kern::kAttnRowsPerTile);
  return VATTN_OK;
}

vattn_status_t cuda_create_layer(const LayerParams &p, std::unique_ptr<LayerImpl> *out) {
  auto l = std::make_unique<CudaLayer>(p);
  VATTN_TRY(l->init());
  *out = std::move(l);
  return VATTN_OK;
}

}  // namespace vattn
