// fuzz_backend -- backend selection (every selector field), layer creation
// (every options field), builder / plan creation and build, and a CPU
// forward on tiny shapes with fuzzed metadata and fuzzed tensors.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "fuzz_util.h"

namespace {

struct Tensor {  // owning host tensor
  std::vector<int64_t> shape, strides;
  std::vector<unsigned char> bytes;
  DLTensor t{};
  void make(std::vector<int64_t> shp, DLDataType dt, std::vector<int64_t> strd = {}) {
    shape = std::move(shp);
    strides = std::move(strd);
    int64_t span = 1;
    bool empty = false;
    for (auto s : shape) empty |= s <= 0;
    if (strides.empty()) {
      for (auto s : shape) span *= std::max<int64_t>(s, 0);
    } else {
      span = 1;
      for (size_t i = 0; i < shape.size(); ++i) span += (std::max<int64_t>(shape[i], 1) - 1) * strides[i];
    }
    if (empty) span = 0;
    // bytes[i] = i * 37 % 61.  Only the first period is written byte by byte;
    // the rest is doubled with memcpy: a per-byte loop here is instrumented by
    // -fsanitize=fuzzer (a coverage callback per compare) and took ~70% of
    // the harness's time on a 12 MB cache.
    const size_t n = std::max<size_t>(size_t(span) * std::max(1, dt.bits / 8), 1);
    bytes.resize(n);
    size_t filled = std::min<size_t>(n, 61);
    for (size_t i = 0; i < filled; ++i) bytes[i] = (unsigned char)(i * 37 % 61);
    while (filled < n) {  // filled stays a multiple of the period until the last copy
      const size_t c = std::min(filled, n - filled);
      std::memcpy(bytes.data() + filled, bytes.data(), c);
      filled += c;
    }
    t = DLTensor{};
    t.data = bytes.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = int32_t(shape.size());
    t.dtype = dt;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
};

DLDataType dl_of(int32_t dtype) {
  switch (dtype) {
    case VATTN_DTYPE_FLOAT32: return {kDLFloat, 32, 1};
    case VATTN_DTYPE_FLOAT16: return {kDLFloat, 16, 1};
    case VATTN_DTYPE_BFLOAT16: return {kDLBfloat, 16, 1};
    default: return {kDLUInt, 8, 1};
  }
}

void selector(fz::In &in) {
  vattn_backend_selector_t s;
  vattn_backend_selector_init(&s);
  s.head_size = in.val<int32_t>(1, 256);
  s.dtype = in.val<int32_t>(0, 6);
  s.kv_cache_dtype = in.val<int32_t>(0, 2);
  s.block_size = in.val<int32_t>(1, 64);
  s.use_mla = in.val<int32_t>(0, 1);
  s.has_sink = in.val<int32_t>(0, 1);
  s.attn_type = in.val<int32_t>(0, 3);
  s.device_type = in.pick<int32_t>({0, kDLCPU, kDLCUDA, kDLCUDAHost, -1, 99});
  s.features = in.val<uint32_t>(0, 511);
  if (in.range<int>(0, 15) == 0) s.struct_size = in.struct_size(sizeof s);
  const vattn_backend_t *b = nullptr;
  vattn_status_t st = vattn_get_attn_backend(in.range<int>(0, 31) ? &s : nullptr, &b);
  fz::check_status(st);
  FZ_REQUIRE((st == VATTN_OK) == (b != nullptr));
  if (b) {
    vattn_backend_info_t info;
    info.struct_size = sizeof info;
    FZ_REQUIRE(vattn_backend_get_info(b, &info) == VATTN_OK);
    int64_t shape[5];
    int32_t nd = 0, order[6];
    fz::check_status(vattn_backend_kv_cache_shape(b, in.val<int64_t>(0, 64), in.val<int32_t>(1, 32),
                                                  in.val<int32_t>(1, 8), in.val<int32_t>(1, 256),
                                                  in.val<int32_t>(0, 1), shape, &nd));
    fz::check_status(vattn_backend_kv_cache_stride_order(b, in.val<int32_t>(0, 1),
                                                         in.val<int32_t>(0, 1), order, &nd));
  }
  const vattn_backend_t *g = nullptr;
  fz::check_status(vattn_backend_get(in.val<size_t>(0, 2), &g));
}

void forward(fz::In &in) {
  const vattn_backend_t *cpu = nullptr;
  FZ_REQUIRE(vattn_backend_find("cpu", &cpu) == VATTN_OK);
  // Layer options: small shapes, every field fuzzed.
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  int32_t kvh = in.range<int32_t>(1, 2);
  lo.num_kv_heads = in.range<int>(0, 15) ? kvh : in.val<int32_t>(0, 4);
  lo.num_heads = kvh * in.range<int32_t>(1, 2);
  if (in.range<int>(0, 15) == 0) lo.num_heads = in.val<int32_t>(1, 4);
  lo.head_size = in.range<int>(0, 15) ? in.pick<int32_t>({8, 16, 32}) : in.val<int32_t>(1, 64);
  lo.scale = in.range<int>(0, 3) ? 0.f : in.fval();
  lo.dtype = in.range<int>(0, 15) ? in.pick<int32_t>({VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16,
                                                      VATTN_DTYPE_BFLOAT16})
                                  : in.val<int32_t>(0, 6);
  lo.kv_cache_dtype = in.range<int>(0, 3) ? 0 : in.val<int32_t>(0, 2);
  lo.attn_type = in.range<int>(0, 3) ? VATTN_ATTN_DECODER : in.val<int32_t>(0, 3);
  lo.sliding_window = in.range<int>(0, 3) ? 0 : in.val<int32_t>(0, 16);
  lo.logits_soft_cap = in.range<int>(0, 3) ? 0.f : in.fval();
  std::vector<float> alibi(64), sinks(64);
  for (auto &a : alibi) a = in.fval();
  for (auto &s : sinks) s = in.fval();
  // The arrays are [num_heads]: only pass them when num_heads fits.
  bool heads_ok = lo.num_heads > 0 && lo.num_heads <= 64;
  lo.alibi_slopes = heads_ok && in.range<int>(0, 5) == 0 ? alibi.data() : nullptr;
  lo.sinks = heads_ok && in.range<int>(0, 5) == 0 ? sinks.data() : nullptr;
  lo.kv_sharing = in.range<int>(0, 7) ? 0 : in.val<int32_t>(0, 1);
  fz::Batch b;
  b.make(in, 4, 6, 20);
  lo.block_size = in.range<int>(0, 15) ? b.block_size : in.val<int32_t>(1, 32);
  if (in.range<int>(0, 31) == 0) lo.struct_size = in.struct_size(sizeof lo);
  vattn_layer_t *layer = nullptr;
  vattn_status_t st = vattn_layer_create(&layer, cpu, &lo);
  fz::check_status(st);
  FZ_REQUIRE((st == VATTN_OK) == (layer != nullptr));
  if (!layer) return;

  vattn_builder_options_t bo;
  vattn_builder_options_init(&bo);
  bo.num_heads = lo.num_heads;
  bo.num_kv_heads = lo.num_kv_heads ? lo.num_kv_heads : lo.num_heads;
  bo.head_size = lo.head_size;
  bo.block_size = lo.block_size;
  bo.max_num_reqs = in.range<int>(0, 7) ? 8 : in.val<int32_t>(1, 8);
  bo.max_num_tokens = in.range<int>(0, 7) ? 64 : in.val<int64_t>(1, 64);
  bo.max_blocks_per_req = in.range<int>(0, 7) ? 64 : in.val<int32_t>(1, 64);
  bo.num_threads = in.range<int32_t>(0, 2);
  bo.max_num_splits = in.range<int>(0, 7) ? 0 : in.val<int32_t>(0, 8);
  bo.kv_cache_dtype = in.range<int>(0, 7) ? lo.kv_cache_dtype : in.val<int32_t>(0, 2);
  if (in.range<int>(0, 31) == 0) bo.struct_size = in.struct_size(sizeof bo);
  vattn_builder_t *builder = nullptr;
  vattn_plan_t *plan = nullptr;
  vattn_metadata_t *md = nullptr;
  st = vattn_builder_create(&builder, cpu, &bo);
  fz::check_status(st);
  if (builder) {
    st = vattn_plan_create(&plan, builder);
    fz::check_status(st);
    FZ_REQUIRE(st == VATTN_OK);
  }
  if (in.range<int>(0, 3) == 0) b.corrupt(in);
  st = vattn_metadata_create(&md, &b.d);
  fz::check_status(st);
  if (builder && plan && md) {
    int64_t cpl = in.range<int>(0, 3) ? 0 : in.val<int64_t>(0, 32);
    switch (in.range<int>(0, 5)) {
      case 0: st = vattn_builder_build_for_cudagraph_capture(builder, plan, md, nullptr); break;
      case 1: st = vattn_builder_build_for_drafting(builder, plan, md, in.val<int32_t>(0, 3), nullptr); break;
      default: st = vattn_builder_build(builder, plan, cpl, md, in.range<int32_t>(0, 1), nullptr);
    }
    fz::check_status(st);
    // Forward, built or not (an unbuilt plan must be refused).
    vattn_metadata_desc_t d;
    vattn_metadata_desc_init(&d);
    FZ_REQUIRE(vattn_metadata_describe(md, &d) == VATTN_OK);
    int32_t H = std::max(1, std::min(lo.num_heads, 8)), D = std::max(1, std::min(lo.head_size, 64));
    int32_t KH = std::max(1, std::min(bo.num_kv_heads, 8));
    int64_t T = std::min<int64_t>(std::max<int64_t>(d.num_actual_tokens, 0), 128) + (in.range<int>(0, 7) ? 0 : in.range<int64_t>(-1, 1));
    T = std::max<int64_t>(0, std::min<int64_t>(T, 128));
    DLDataType dt = dl_of(lo.dtype);
    int64_t nb = in.range<int>(0, 7) ? b.num_cache_blocks : in.val<int64_t>(0, 96);
    nb = std::max<int64_t>(0, std::min<int64_t>(nb, 96));
    int32_t bs = std::max(1, std::min(lo.block_size, 32));
    Tensor q, k, v, cache, out, lse;
    q.make({T, H, D}, in.range<int>(0, 15) ? dt : dl_of(in.val<int32_t>(0, 6)));
    int64_t TK = std::max<int64_t>(0, std::min<int64_t>(d.slot_mapping_len + in.range<int64_t>(-1, 1), 128));
    k.make({TK, KH, D}, dt);
    v.make({TK, KH, D}, dt);
    DLDataType cdt = lo.kv_cache_dtype ? DLDataType{kDLUInt, 8, 1} : dt;
    if (in.flag()) {
      cache.make({2, nb, bs, KH, D}, cdt);
    } else {  // HND physical order, expressed through strides
      cache.make({2, nb, bs, KH, D}, cdt,
                 {nb * KH * bs * D, KH * bs * D, D, int64_t(bs) * D, 1});
    }
    out.make({T, H, D}, dt);
    lse.make({H, T}, DLDataType{kDLFloat, 32, 1});
    if (in.range<int>(0, 7) == 0) {  // a hostile shape edit
      Tensor *ts[] = {&q, &k, &v, &cache, &out};
      Tensor &x = *ts[in.range<int>(0, 4)];
      if (x.t.ndim > 0) {
        int i = in.range<int>(0, x.t.ndim - 1);
        int64_t nv = in.val<int64_t>(0, x.shape[i]);
        if (nv <= x.shape[i] && nv >= 0) x.shape[i] = nv;  // shrink only: stays in bounds
        else x.shape[i] = -1;                                // must be refused
      }
    }
    vattn_forward_args_t a;
    vattn_forward_args_init(&a);
    a.query = &q.t;
    a.key = in.range<int>(0, 15) ? &k.t : nullptr;
    a.value = in.range<int>(0, 15) ? &v.t : nullptr;
    a.kv_cache = in.range<int>(0, 15) ? &cache.t : nullptr;
    a.output = &out.t;
    a.output_lse = in.range<int>(0, 3) ? nullptr : &lse.t;
    a.k_scale = in.range<int>(0, 7) ? 1.f : in.fval();
    a.v_scale = in.range<int>(0, 7) ? 1.f : in.fval();
    if (in.range<int>(0, 31) == 0) a.struct_size = in.struct_size(sizeof a);
    st = vattn_layer_forward(layer, plan, &a);
    fz::check_status(st);
  }
  vattn_metadata_destroy(md);
  vattn_plan_destroy(plan);
  vattn_builder_destroy(builder);
  vattn_layer_destroy(layer);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz::In in(data, size);
  if (in.range<int>(0, 3) == 0) selector(in); else forward(in);
  return 0;
}
