// vattn-demo -- a small serving loop on top of vattn's C API.
//
// Requests arrive over time; each step the scheduler batches every running
// decode (1 token) with chunks of pending prompts (chunked prefill) under a
// token budget, decodes first.  Requests of the same "prefix group" share the
// KV-cache blocks of their common prompt prefix (prefix caching with a
// ref-counted free-block allocator).  Every step builds CommonAttentionMetadata,
// a slot mapping and a plan, runs attention over several layers with
// deterministic pseudo-random Q/K/V (a fixed seed; a token's K/V depend only on
// its content and position, so shared prefixes really are identical), and
// checks every output row against a dense float64 recomputation.
//
//   vattn-demo [--device cpu|cuda] [--quick] [--requests N] [--layers L] [--seed S]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "vattn.h"

#ifdef VATTN_DEMO_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

#define CHECK(call)                                                                     \
  do {                                                                                  \
    vattn_status_t st_ = (call);                                                        \
    if (st_ != VATTN_OK) {                                                              \
      std::fprintf(stderr, "\n%s failed: %s: %s\n", #call, vattn_status_string(st_),    \
                   vattn_last_error_message());                                         \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

// ---- configuration -----------------------------------------------------------------
struct Config {
  bool cuda = false;
  bool quick = false;
  int num_requests = 24;
  int num_layers = 4;
  int num_heads = 8;
  int num_kv_heads = 2;
  int head_size = 64;
  int block_size = 16;
  int token_budget = 256;   // tokens per step
  int max_running = 12;     // concurrent requests
  int64_t num_blocks = 2048;
  uint64_t seed = 20261121;
};

// ---- deterministic values --------------------------------------------------------------
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in [-1, 1) from a key.
float unit(uint64_t key) { return static_cast<float>((mix(key) >> 40) * (1.0 / (1ull << 23)) - 1.0); }

// bf16 round-to-nearest-even (CUDA path stores bf16).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- requests and the block allocator -------------------------------------------------
struct Request {
  int id = 0;
  int arrival_step = 0;
  int prefix_group = -1;          // -1 = no shared prefix
  std::vector<int64_t> tokens;    // prompt (+ generated) token ids
  int prompt_len = 0;             // original prompt length
  int gen_len = 0;
  int num_computed = 0;           // tokens whose K/V are in the cache
  int generated = 0;
  std::vector<int32_t> blocks;    // block table row
  bool admitted = false, finished = false;
};

struct BlockPool {
  std::vector<int32_t> free_list;
  std::vector<int32_t> refcount;
  explicit BlockPool(int64_t n) : refcount(n, 0) {
    // Block 0 is kept out of circulation (a null block, as vLLM does);
    // hand blocks out in a shuffled order so tables are non-contiguous.
    for (int64_t b = n - 1; b >= 1; --b) free_list.push_back(static_cast<int32_t>(b));
    for (size_t i = free_list.size(); i > 1; --i) std::swap(free_list[i - 1], free_list[mix(i) % i]);
  }
  bool alloc(int32_t *out) {
    if (free_list.empty()) return false;
    *out = free_list.back();
    free_list.pop_back();
    refcount[*out] = 1;
    return true;
  }
  void retain(int32_t b) { ++refcount[b]; }
  void release(int32_t b) {
    if (--refcount[b] == 0) free_list.push_back(b);
  }
};

// K, V and Q of one token: functions of (layer, token id, position) for K/V
// and of (layer, request, position) for Q.
struct Values {
  const Config &c;
  float k(int layer, int64_t token, int64_t pos, int h, int d) const {
    return unit(c.seed ^ mix(((uint64_t)layer << 56) ^ ((uint64_t)token << 20) ^ ((uint64_t)pos << 8) ^
                             ((uint64_t)h << 4) ^ 1u) ^ (uint64_t)d * 0x2545f4914f6cdd1dull);
  }
  float v(int layer, int64_t token, int64_t pos, int h, int d) const {
    return unit(c.seed ^ mix(((uint64_t)layer << 56) ^ ((uint64_t)token << 20) ^ ((uint64_t)pos << 8) ^
                             ((uint64_t)h << 4) ^ 2u) ^ (uint64_t)d * 0x9e3779b97f4a7c15ull);
  }
  float q(int layer, int req, int64_t pos, int h, int d) const {
    return unit(c.seed ^ mix(((uint64_t)layer << 56) ^ ((uint64_t)req << 36) ^ ((uint64_t)pos << 8) ^
                             ((uint64_t)h << 2) ^ 3u) ^ (uint64_t)d * 0xd1b54a32d192ed03ull);
  }
};

DLTensor make_tensor(void *data, DLDevice dev, DLDataType dt, int ndim, int64_t *shape) {
  DLTensor t;
  std::memset(&t, 0, sizeof t);
  t.data = data;
  t.device = dev;
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

void progress(int done, int total, double tok_per_s, int step, const vattn_decode_prefill_split_t &sp) {
  const int width = 32;
  int fill = total ? done * width / total : width;
  std::printf("\r[");
  for (int i = 0; i < width; ++i) std::putchar(i < fill ? '#' : '.');
  std::printf("] %3d/%d done | step %4d: %2lld decodes + %2lld prefill chunks (%4lld tokens) | %8.0f tok/s",
              done, total, step, (long long)sp.num_decodes, (long long)sp.num_prefills,
              (long long)(sp.num_decode_tokens + sp.num_prefill_tokens), tok_per_s);
  std::fflush(stdout);
}

int usage() {
  std::fprintf(stderr,
               "usage: vattn-demo [--device cpu|cuda] [--quick] [--requests N] [--layers L] [--seed S]\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  Config c;
  int32_t ngpu = 0;
  CHECK(vattn_cuda_device_count(&ngpu));
  c.cuda = ngpu > 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--device") {
      const char *d = next();
      if (!d) return usage();
      if (std::strcmp(d, "cpu") == 0) c.cuda = false;
      else if (std::strcmp(d, "cuda") == 0) c.cuda = true;
      else return usage();
    } else if (a == "--quick") {
      c.quick = true;
    } else if (a == "--requests") {
      const char *v = next();
      if (!v) return usage();
      c.num_requests = std::max(1, std::atoi(v));
    } else if (a == "--layers") {
      const char *v = next();
      if (!v) return usage();
      c.num_layers = std::max(1, std::atoi(v));
    } else if (a == "--seed") {
      const char *v = next();
      if (!v) return usage();
      c.seed = std::strtoull(v, nullptr, 10);
    } else {
      return usage();
    }
  }
  if (c.quick) {
    c.num_requests = std::min(c.num_requests, 8);
    c.num_layers = std::min(c.num_layers, 2);
    c.token_budget = 64;
    c.max_running = 6;
    c.num_blocks = 256;
  }
#ifndef VATTN_DEMO_CUDA
  if (c.cuda) {
    std::fprintf(stderr, "vattn-demo: built without CUDA; use --device cpu\n");
    return 2;
  }
#endif
  const int H = c.num_heads, KVH = c.num_kv_heads, D = c.head_size, BS = c.block_size;
  const int32_t dtype = c.cuda ? VATTN_DTYPE_BFLOAT16 : VATTN_DTYPE_FLOAT32;
  const double tol = c.cuda ? 3e-2 : 2e-5;  // bf16 output rounding vs fp32 accumulation
  const DLDevice dev{c.cuda ? kDLCUDA : kDLCPU, 0};
  const DLDataType dl_dt = c.cuda ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
  const size_t esz = c.cuda ? 2 : 4;

  std::printf("vattn %s demo: %s backend, %d layers, %d q heads / %d kv heads, head %d, block %d, %s\n",
              vattn_version_string(), c.cuda ? "CUDA" : "CPU", c.num_layers, H, KVH, D, BS,
              c.cuda ? "bf16" : "fp32");

  // ---- requests: three shared-prefix groups and some unique prompts --------------------
  const int kPrefixLen = 4 * BS;  // block aligned, so whole blocks are shared
  std::vector<Request> reqs(c.num_requests);
  for (int i = 0; i < c.num_requests; ++i) {
    Request &r = reqs[i];
    uint64_t h = mix(c.seed + 1000 + i);
    r.id = i;
    r.arrival_step = static_cast<int>(i * (c.quick ? 1 : 2) + h % 3);
    r.prefix_group = (h >> 8) % 4 == 3 ? -1 : static_cast<int>((h >> 8) % 4);
    int extra = 1 + static_cast<int>((h >> 16) % (c.quick ? 60 : 240));
    r.prompt_len = (r.prefix_group >= 0 ? kPrefixLen : 0) + extra;
    r.gen_len = 2 + static_cast<int>((h >> 32) % (c.quick ? 8 : 24));
    for (int t = 0; t < r.prompt_len; ++t) {
      bool shared = r.prefix_group >= 0 && t < kPrefixLen;
      r.tokens.push_back(shared ? static_cast<int64_t>(mix(777 + r.prefix_group * 100000 + t) % 50000)
                                : static_cast<int64_t>(mix(c.seed * 31 + i * 100000 + t) % 50000));
    }
  }

  // ---- KV cache, backend, builder, plan, layers ---------------------------------------
  vattn_kv_cache_spec_t spec;
  vattn_kv_cache_spec_init(&spec);
  spec.block_size = BS;
  spec.num_kv_heads = KVH;
  spec.head_size = D;
  spec.dtype = dtype;
  std::vector<vattn_kv_cache_spec_t> specs(c.num_layers, spec);
  vattn_kv_cache_options_t copts;
  vattn_kv_cache_options_init(&copts);
  copts.device_type = dev.device_type;
  copts.num_blocks = c.num_blocks;
  vattn_kv_cache_t *cache = nullptr;
  CHECK(vattn_kv_cache_create(&cache, specs.data(), nullptr, specs.size(), &copts));

  vattn_backend_selector_t sel;
  vattn_backend_selector_init(&sel);
  sel.head_size = D;
  sel.dtype = dtype;
  sel.block_size = BS;
  sel.device_type = dev.device_type;
  const vattn_backend_t *backend = nullptr;
  CHECK(vattn_get_attn_backend(&sel, &backend));

  const int max_blocks_per_req = 64;
  vattn_builder_options_t bopts;
  vattn_builder_options_init(&bopts);
  bopts.num_heads = H;
  bopts.num_kv_heads = KVH;
  bopts.head_size = D;
  bopts.block_size = BS;
  bopts.max_num_reqs = c.max_running;
  bopts.max_num_tokens = c.token_budget + c.max_running;
  bopts.max_blocks_per_req = max_blocks_per_req;
  vattn_builder_t *builder = nullptr;
  vattn_plan_t *plan = nullptr;
  CHECK(vattn_builder_create(&builder, backend, &bopts));
  CHECK(vattn_plan_create(&plan, builder));

  vattn_layer_options_t lopts;
  vattn_layer_options_init(&lopts);
  lopts.num_heads = H;
  lopts.num_kv_heads = KVH;
  lopts.head_size = D;
  lopts.dtype = dtype;
  lopts.block_size = BS;
  std::vector<vattn_layer_t *> layers(c.num_layers, nullptr);
  for (auto &l : layers) CHECK(vattn_layer_create(&l, backend, &lopts));
  std::vector<DLTensor> cache_views(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) CHECK(vattn_kv_cache_layer_tensor(cache, l, &cache_views[l]));

  // ---- I/O buffers (device or host) ---------------------------------------------------
  const int64_t max_tokens = bopts.max_num_tokens;
  std::vector<unsigned char> hq(max_tokens * H * D * esz), hk(max_tokens * KVH * D * esz),
      hv(max_tokens * KVH * D * esz), ho(max_tokens * H * D * esz);
  void *dq = hq.data(), *dk = hk.data(), *dv = hv.data(), *dout = ho.data();
#ifdef VATTN_DEMO_CUDA
  if (c.cuda) {
    if (cudaMalloc(&dq, hq.size()) != cudaSuccess || cudaMalloc(&dk, hk.size()) != cudaSuccess ||
        cudaMalloc(&dv, hv.size()) != cudaSuccess || cudaMalloc(&dout, ho.size()) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc failed\n");
      return 2;
    }
  }
#endif

  BlockPool pool(c.num_blocks);
  std::map<int, std::vector<int32_t>> prefix_blocks;  // group -> shared full blocks
  Values val{c};
  double max_err = 0, attn_seconds = 0;
  int64_t tokens_done = 0, rows_checked = 0;
  int step = 0, finished = 0, num_prefix_hits = 0;

  vattn_decode_prefill_split_t split{};
  while (finished < c.num_requests) {
    // ---- schedule: admit arrivals, decodes first, then prompt chunks -----------------
    int running = 0;
    for (auto &r : reqs) running += r.admitted && !r.finished;
    for (auto &r : reqs) {
      if (running >= c.max_running) break;
      if (r.admitted || r.arrival_step > step) continue;
      r.admitted = true;
      ++running;
      auto it = prefix_blocks.find(r.prefix_group);
      if (r.prefix_group >= 0 && it != prefix_blocks.end()) {
        for (int32_t b : it->second) pool.retain(b);  // prefix cache hit: reuse blocks
        r.blocks = it->second;
        r.num_computed = kPrefixLen;
        ++num_prefix_hits;
      }
    }
    struct Sched { Request *r; int q; };
    std::vector<Sched> batch;
    int budget = c.token_budget;
    // A request decodes once its prompt is done: one new token per step.
    for (auto &r : reqs)  // decodes
      if (r.admitted && !r.finished && r.generated > 0 && budget > 0) {
        batch.push_back({&r, 1});
        --budget;
      }
    for (auto &r : reqs)  // chunked prefills
      if (r.admitted && !r.finished && r.generated == 0 && budget > 0) {
        int q = std::min(r.prompt_len - r.num_computed, budget);
        batch.push_back({&r, q});
        budget -= q;
      }
    if (batch.empty()) {
      ++step;
      continue;
    }
    // Blocks for every position this step writes.
    for (auto &s : batch) {
      int need = (s.r->num_computed + s.q + BS - 1) / BS;
      while (static_cast<int>(s.r->blocks.size()) < need) {
        int32_t b;
        if (!pool.alloc(&b)) {
          std::fprintf(stderr, "\nout of KV cache blocks\n");
          return 2;
        }
        s.r->blocks.push_back(b);
      }
      if (need > max_blocks_per_req) {
        std::fprintf(stderr, "\nrequest too long for the block table\n");
        return 2;
      }
    }

    // ---- metadata for this step --------------------------------------------------------
    const int64_t nreq = static_cast<int64_t>(batch.size());
    std::vector<int32_t> qsl(nreq + 1, 0), seq_lens(nreq), table(nreq * max_blocks_per_req, 0);
    std::vector<int64_t> positions;
    for (int64_t i = 0; i < nreq; ++i) {
      Request &r = *batch[i].r;
      qsl[i + 1] = qsl[i] + batch[i].q;
      seq_lens[i] = r.num_computed + batch[i].q;
      std::copy(r.blocks.begin(), r.blocks.end(), table.begin() + i * max_blocks_per_req);
      for (int t = 0; t < batch[i].q; ++t) positions.push_back(r.num_computed + t);
    }
    const int64_t T = qsl[nreq];
    std::vector<int64_t> slots(T);
    vattn_slot_mapping_args_t sm;
    vattn_slot_mapping_args_init(&sm);
    sm.block_table = table.data();
    sm.num_rows = nreq;
    sm.row_stride = max_blocks_per_req;
    sm.query_start_loc = qsl.data();
    sm.num_reqs = nreq;
    sm.positions = positions.data();
    sm.num_tokens = T;
    sm.block_size = BS;
    sm.num_cache_blocks = c.num_blocks;
    CHECK(vattn_slot_mapping_compute(&sm, slots.data(), T));

    vattn_metadata_desc_t desc;
    vattn_metadata_desc_init(&desc);
    desc.num_reqs = nreq;
    desc.num_actual_tokens = T;
    desc.query_start_loc = qsl.data();
    desc.seq_lens = seq_lens.data();
    desc.block_table = table.data();
    desc.block_table_rows = nreq;
    desc.block_table_cols = max_blocks_per_req;
    desc.slot_mapping = slots.data();
    desc.slot_mapping_len = T;
    desc.block_size = BS;
    desc.num_cache_blocks = c.num_blocks;
    vattn_metadata_t *md = nullptr;
    CHECK(vattn_metadata_create(&md, &desc));
    CHECK(vattn_split_decodes_and_prefills(md, 1, 0, &split));
    CHECK(vattn_builder_build(builder, plan, 0, md, 0, nullptr));

    // ---- every layer: fill Q/K/V, run attention, check against a dense recompute ------
    for (int l = 0; l < c.num_layers; ++l) {
      int64_t row = 0;
      for (int64_t i = 0; i < nreq; ++i) {
        Request &r = *batch[i].r;
        for (int t = 0; t < batch[i].q; ++t, ++row) {
          int64_t pos = r.num_computed + t, tok = r.tokens[pos];
          for (int h = 0; h < H; ++h)
            for (int d = 0; d < D; ++d) {
              float x = val.q(l, r.id, pos, h, d);
              size_t idx = (row * H + h) * D + d;
              if (c.cuda) reinterpret_cast<uint16_t *>(hq.data())[idx] = to_bf16(x);
              else reinterpret_cast<float *>(hq.data())[idx] = x;
            }
          for (int h = 0; h < KVH; ++h)
            for (int d = 0; d < D; ++d) {
              size_t idx = (row * KVH + h) * D + d;
              float kx = val.k(l, tok, pos, h, d), vx = val.v(l, tok, pos, h, d);
              if (c.cuda) {
                reinterpret_cast<uint16_t *>(hk.data())[idx] = to_bf16(kx);
                reinterpret_cast<uint16_t *>(hv.data())[idx] = to_bf16(vx);
              } else {
                reinterpret_cast<float *>(hk.data())[idx] = kx;
                reinterpret_cast<float *>(hv.data())[idx] = vx;
              }
            }
        }
      }
      int64_t qshape[3] = {T, H, D}, kvshape[3] = {T, KVH, D};
#ifdef VATTN_DEMO_CUDA
      if (c.cuda) {
        cudaMemcpy(dq, hq.data(), T * H * D * esz, cudaMemcpyHostToDevice);
        cudaMemcpy(dk, hk.data(), T * KVH * D * esz, cudaMemcpyHostToDevice);
        cudaMemcpy(dv, hv.data(), T * KVH * D * esz, cudaMemcpyHostToDevice);
        cudaMemset(dout, 0xff, T * H * D * esz);  // poison (NaN)
      }
#endif
      if (!c.cuda) std::fill(ho.begin(), ho.begin() + T * H * D * esz, 0xff);  // poison (NaN)
      DLTensor tq = make_tensor(dq, dev, dl_dt, 3, qshape), tk = make_tensor(dk, dev, dl_dt, 3, kvshape),
               tv = make_tensor(dv, dev, dl_dt, 3, kvshape), to = make_tensor(dout, dev, dl_dt, 3, qshape);
      vattn_forward_args_t args;
      vattn_forward_args_init(&args);
      args.query = &tq;
      args.key = &tk;
      args.value = &tv;
      args.kv_cache = &cache_views[l];
      args.output = &to;
      auto t0 = std::chrono::steady_clock::now();
      CHECK(vattn_layer_forward(layers[l], plan, &args));
#ifdef VATTN_DEMO_CUDA
      if (c.cuda) {
        if (cudaDeviceSynchronize() != cudaSuccess) {
          std::fprintf(stderr, "\nCUDA error after forward\n");
          return 2;
        }
      }
#endif
      attn_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#ifdef VATTN_DEMO_CUDA
      if (c.cuda) cudaMemcpy(ho.data(), dout, T * H * D * esz, cudaMemcpyDeviceToHost);
#endif
      // Dense float64 reference over each request's whole history.
      row = 0;
      std::vector<double> kd, vd, s, qd;
      for (int64_t i = 0; i < nreq; ++i) {
        Request &r = *batch[i].r;
        const int64_t S = seq_lens[i];
        auto rd = [&](float x) { return c.cuda ? static_cast<double>(from_bf16(to_bf16(x))) : static_cast<double>(x); };
        kd.assign(S * KVH * D, 0);
        vd.assign(S * KVH * D, 0);
        for (int64_t p = 0; p < S; ++p)
          for (int h = 0; h < KVH; ++h)
            for (int d = 0; d < D; ++d) {
              kd[(p * KVH + h) * D + d] = rd(val.k(l, r.tokens[p], p, h, d));
              vd[(p * KVH + h) * D + d] = rd(val.v(l, r.tokens[p], p, h, d));
            }
        const double scale = 1.0 / std::sqrt(static_cast<double>(D));
        for (int t = 0; t < batch[i].q; ++t, ++row) {
          int64_t pos = r.num_computed + t;
          for (int h = 0; h < H; ++h) {
            int kh = h / (H / KVH);
            s.assign(pos + 1, 0);
            qd.resize(D);
            for (int d = 0; d < D; ++d) qd[d] = rd(val.q(l, r.id, pos, h, d));
            double m = -1e300;
            for (int64_t p = 0; p <= pos; ++p) {
              double acc = 0;
              for (int d = 0; d < D; ++d) acc += qd[d] * kd[(p * KVH + kh) * D + d];
              s[p] = acc * scale;
              m = std::max(m, s[p]);
            }
            double den = 0;
            for (int64_t p = 0; p <= pos; ++p) den += (s[p] = std::exp(s[p] - m));
            for (int d = 0; d < D; ++d) {
              double o = 0;
              for (int64_t p = 0; p <= pos; ++p) o += s[p] * vd[(p * KVH + kh) * D + d];
              o /= den;
              size_t idx = (row * H + h) * D + d;
              double got = c.cuda ? from_bf16(reinterpret_cast<uint16_t *>(ho.data())[idx])
                                  : reinterpret_cast<float *>(ho.data())[idx];
              double err = std::fabs(got - o);
              if (!(err <= max_err)) max_err = std::isnan(err) ? INFINITY : err;
            }
          }
          ++rows_checked;
        }
      }
    }
    vattn_metadata_destroy(md);

    // ---- advance requests ------------------------------------------------------------------
    for (auto &s : batch) {
      Request &r = *s.r;
      r.num_computed += s.q;
      tokens_done += s.q;
      if (r.prefix_group >= 0 && r.num_computed >= kPrefixLen && !prefix_blocks.count(r.prefix_group)) {
        // Publish the fully computed shared-prefix blocks for later requests.
        std::vector<int32_t> shared(r.blocks.begin(), r.blocks.begin() + kPrefixLen / BS);
        for (int32_t b : shared) pool.retain(b);  // the prefix cache holds a reference
        prefix_blocks[r.prefix_group] = shared;
      }
      if (r.num_computed == static_cast<int>(r.tokens.size())) {
        // The last computed token "samples" the next one, fed as the next decode query.
        if (r.generated < r.gen_len) {
          r.tokens.push_back(static_cast<int64_t>(mix(c.seed ^ (r.id * 7919 + r.generated)) % 50000));
          ++r.generated;
        } else {
          r.finished = true;
          ++finished;
          for (int32_t b : r.blocks) pool.release(b);
          r.blocks.clear();
        }
      }
    }
    ++step;
    progress(finished, c.num_requests, attn_seconds > 0 ? tokens_done * c.num_layers / attn_seconds : 0, step,
             split);
  }
  std::printf("\n");

  const bool pass = max_err <= tol;
  std::printf("%d steps, %lld tokens x %d layers, %lld output rows checked, %d prefix-cache hits\n", step,
              (long long)tokens_done, c.num_layers, (long long)rows_checked, num_prefix_hits);
  std::printf("attention throughput: %.0f tokens/s (token-layers per second of forward time, %s)\n",
              tokens_done * c.num_layers / std::max(attn_seconds, 1e-9), c.cuda ? "CUDA" : "CPU");
  std::printf("VERDICT: %s (max |error| %.3g vs dense float64 recomputation, tolerance %.0e)\n",
              pass ? "PASS" : "FAIL", max_err, tol);

  for (auto l : layers) vattn_layer_destroy(l);
  vattn_plan_destroy(plan);
  vattn_builder_destroy(builder);
  vattn_kv_cache_destroy(cache);
#ifdef VATTN_DEMO_CUDA
  if (c.cuda) {
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
  }
#endif
  return pass ? 0 : 1;
}
