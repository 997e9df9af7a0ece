// cuda_builder.cpp -- the CUDA metadata builder: turns CommonAttentionMetadata
// into a plan of work items for kernels/attention.cuh (see launch.h).
//
// The schedule itself (tiles, splits, cost model, tables) is host code in
// cuda_schedule.cpp; this file owns the device side: the plan's buffers,
// the staging mirrors and their uploads, and the launch shapes.
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_backend_impl.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_schedule.h"
#include "backends/cuda/cuda_util.h"
#include "core/cuda_runtime.h"

namespace vattn {
namespace {

class CudaBuilder final : public BuilderImpl {
 public:
  explicit CudaBuilder(const CudaBuilderCfg &c) : c_(c) {}
  int32_t cudagraph_support() const override { return VATTN_CUDAGRAPH_ALWAYS; }
  int32_t reorder_batch_threshold() const override { return 1; }
  vattn_status_t create_plan(std::unique_ptr<PlanImpl> *out) const override;
  vattn_status_t build(PlanImpl &plan, int64_t common_prefix_len, const Metadata &md,
                       bool fast_build, BuildMode mode, void *stream) override;

 private:
  CudaBuilderCfg c_;
};

vattn_status_t CudaBuilder::create_plan(std::unique_ptr<PlanImpl> *out) const {
  const auto &o = c_.o;
  auto plan = std::make_unique<CudaPlan>();
  plan->device = o.device_id;
  plan->num_heads = o.num_heads;
  plan->num_kv_heads = o.num_kv_heads;
  plan->head_size = o.head_size;
  plan->block_size = o.block_size;
  plan->num_sms = c_.num_sms;
  plan->max_num_splits = c_.max_splits;
  plan->dec_heads = c_.dec_heads;
  plan->cap_items = c_.cap_items;
  plan->cap_parts = c_.cap_parts;
  plan->ws_rows = c_.ws_rows;

  const CudaPlanLayout &L = plan->lay = cuda_plan_layout(c_);
  DeviceGuard g(o.device_id);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make CUDA device %d current", o.device_id);
  void *d = nullptr;
  VATTN_CUDA_TRY(cudaMalloc(&d, L.total), "plan device buffers");
  plan->dev = static_cast<char *>(d);
  for (int i = 0; i < 2; ++i) {
    void *h = nullptr;
    VATTN_CUDA_TRY(cudaMallocHost(&h, L.meta_end), "plan pinned staging buffer");
    plan->host_buf[i] = static_cast<char *>(h);
    std::memset(plan->host_buf[i], 0, L.meta_end);
    cudaEvent_t ev = nullptr;
    VATTN_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "plan event");
    plan->events[i] = ev;
  }
  plan->host = plan->host_buf[0];
  // Zero everything once so that a forward on a never-built region reads
  // an empty batch, never garbage.
  VATTN_CUDA_TRY(cudaMemset(plan->dev, 0, L.meta_end), "plan device buffers");
  VATTN_CUDA_TRY(cudaDeviceSynchronize(), "plan device buffers");
  *out = std::move(plan);
  return VATTN_OK;
}

vattn_status_t CudaBuilder::build(PlanImpl &pb, int64_t P, const Metadata &md, bool, BuildMode mode,
                                  void *stream_v) {
  CudaPlan *plan = dynamic_cast<CudaPlan *>(&pb);
  if (!plan) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'plan' was not created by a CUDA builder");
  const auto &o = c_.o;
  if (static_cast<int64_t>(md.slot_mapping.size()) > o.max_num_tokens)
    return fail(VATTN_ERR_WORKSPACE_TOO_SMALL,
                "argument 'md': slot mapping of %zu entries exceeds the plan's max_num_tokens %lld",
                md.slot_mapping.size(), (long long)o.max_num_tokens);
  if (md.block_size > 0 && md.block_size != o.block_size)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument 'md': block_size %d differs from the builder's block_size %d",
                md.block_size, o.block_size);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_v);

  DeviceGuard dg(o.device_id);
  if (!dg.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make CUDA device %d current", o.device_id);
  // Alternate staging mirrors: the one used two builds ago is normally
  // uploaded long since (its event is complete and the query costs no
  // wait); only a host running two builds ahead of the stream waits here.
  const int slot = plan->slot ^ 1;
  cudaEvent_t slot_ev = static_cast<cudaEvent_t>(plan->events[slot]);
  const cudaError_t q = cudaEventQuery(slot_ev);
  if (q == cudaErrorNotReady)
    VATTN_CUDA_TRY(cudaEventSynchronize(slot_ev), "plan build");
  else if (q != cudaSuccess)
    return cuda_status(q, "plan build");
  plan->host = plan->host_buf[slot];

  const CudaPlanLayout &L = plan->lay;
  const bool capture = mode == BuildMode::kCudagraphCapture;
  CudaSchedule sc;
  VATTN_TRY(cuda_schedule(c_, L, plan->host, md, P, capture, &plan->scratch, &sc));
  const int64_t n_items = sc.n_items, n_gen = sc.n_gen, ntok_out = sc.ntok_out;

  // ---- upload (asynchronous on the build's stream)
  auto up = [&](size_t off, size_t bytes) -> vattn_status_t {
    if (bytes == 0) return VATTN_OK;
    return cuda_status(cudaMemcpyAsync(plan->dev + off, plan->host + off, bytes,
                                       cudaMemcpyHostToDevice, stream),
                       "plan upload");
  };
  // The header and the requests are adjacent: one copy (each copy is a
  // driver call of a microsecond or two on the host).
  VATTN_TRY(up(L.header, L.reqs + sizeof(kern::AttnReq) * sc.n_reqs - L.header));
  VATTN_TRY(up(L.items, sizeof(kern::AttnItem) * n_items));
  VATTN_TRY(up(L.units, sizeof(int32_t) * n_gen * o.num_kv_heads));
  if (sc.merge_pass) {
    VATTN_TRY(up(L.tok_parts, sizeof(int2) * ntok_out));
    VATTN_TRY(up(L.part_list, sizeof(int32_t) * sc.n_parts));
  }
  const int64_t nreq = md.num_reqs, width = sc.bt_width;
  if (nreq > 0 && width > 0) {  // rows of `width` entries, one 2-D copy
    const size_t pitch = sizeof(int32_t) * static_cast<size_t>(o.max_blocks_per_req);
    VATTN_CUDA_TRY(cudaMemcpy2DAsync(plan->dev + L.block_table, pitch, plan->host + L.block_table, pitch,
                                     sizeof(int32_t) * static_cast<size_t>(width), static_cast<size_t>(nreq),
                                     cudaMemcpyHostToDevice, stream),
                   "plan upload");
  }
  VATTN_TRY(up(L.slot_mapping, sizeof(int64_t) * md.slot_mapping.size()));
  VATTN_CUDA_TRY(cudaEventRecord(slot_ev, stream), "plan upload");
  plan->slot = slot;

  // ---- grids (host-side launch shapes; the kernels read counts on device)
  auto clampi = [](int64_t v, int64_t lo, int64_t hi) {
    return static_cast<int32_t>(std::max(lo, std::min(hi, v)));
  };
  const int64_t attn_floor = capture ? (4LL * c_.num_sms + o.num_kv_heads - 1) / o.num_kv_heads : 1;
  // General items first: a captured graph launches both kernels with these
  // floors, each reading its item range on the device.
  const int64_t n_dec = n_items - n_gen;
  plan->grid_attn = clampi(std::max<int64_t>(n_gen, attn_floor), 1, 65535);
  const int64_t dec_floor =
      capture ? (2LL * c_.dec_slots * c_.dec_heads + o.num_kv_heads - 1) / o.num_kv_heads : 1;
  plan->grid_dec = clampi(std::max<int64_t>(n_dec, dec_floor), 1, 65535);
  const int64_t merge_units = ntok_out * o.num_heads;  // one CTA per (token, head)
  plan->grid_merge = clampi(capture ? 16LL * c_.num_sms : merge_units, 1, 16LL * c_.num_sms);
  plan->num_gen_items = static_cast<int32_t>(n_gen);
  plan->capture = capture;
  plan->needs_merge = sc.merge_pass;
  plan->grid_cache = clampi(capture ? o.max_num_tokens : static_cast<int64_t>(md.slot_mapping.size()),
                            1, o.max_num_tokens);
  plan->num_items = static_cast<int32_t>(n_items);
  plan->cascade_active = sc.cascade;
  plan->md = md;
  plan->common_prefix_len = P;
  plan->built = true;
  return VATTN_OK;
}

}  // namespace

CudaPlan::~CudaPlan() {
  DeviceGuard g(device);
  for (int i = 0; i < 2; ++i) {
    if (events[i]) (void)cudaEventSynchronize(static_cast<cudaEvent_t>(events[i]));
    if (events[i]) (void)cudaEventDestroy(static_cast<cudaEvent_t>(events[i]));
    if (host_buf[i]) (void)cudaFreeHost(host_buf[i]);
  }
  if (dev) (void)cudaFree(dev);
}

vattn_status_t cuda_create_builder(const vattn_builder_options_t &o,
                                   std::unique_ptr<BuilderImpl> *out) {
  VATTN_TRY(cuda_require_device(o.device_id, "argument 'opts': device_id"));
  const int32_t G = o.num_heads / o.num_kv_heads;
  if (G > kern::kAttnRowsPerTile)
    return fail(VATTN_ERR_UNSUPPORTED,
                "argument 'opts': %d query heads per KV head; the CUDA backend supports at most %d",
                G, kern::kAttnRowsPerTile);
  if (o.block_size % 16)
    return fail(VATTN_ERR_UNSUPPORTED,
                "argument 'opts': block_size %d is not a multiple of 16 (CUDA backend)", o.block_size);
  // What the configuration needs from the device (cuda_builder_cfg).
  const int32_t cache = cache_kind_of(o.kv_cache_dtype);
  CudaDeviceFacts d;
  d.rows_per_tile = kern::attention_rows_per_tile(o.head_size, cache, o.device_id);
  d.num_sms = o.num_sms;
  if (d.num_sms == 0) {
    int n = 0;
    VATTN_CUDA_TRY(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, o.device_id),
                   "querying the SM count");
    d.num_sms = n > 0 ? n : 1;
  }
  if (kern::decode_supported(kern::kBF16, kern::kCacheAuto, o.head_size)) {
    int32_t n = 0;
    const int32_t heads = kern::decode_kv_heads_per_cta(o.head_size, cache, o.num_kv_heads, G);
    if (kern::decode_ctas_per_sm(o.head_size, heads, &n) == cudaSuccess && n > 0) d.dec_ctas_per_sm = n;
    (void)cudaGetLastError();  // a failed query leaves the default; clear it
  }
  *out = std::make_unique<CudaBuilder>(cuda_builder_cfg(o, d));
  return VATTN_OK;
}

}  // namespace vattn
