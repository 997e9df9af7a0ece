// split_plan.cpp -- vattn_split_plan: the decode split counts the CUDA
// builder picks for given batches, without a GPU.  It runs the builder's own
// configuration (cuda_builder_cfg) and schedule (cuda_schedule) on device
// facts given on the command line, so a change of the split model, or of
// VATTN_CUDA_DECODE_CTA_KEYS / VATTN_CUDA_DECODE_MERGE_KEYS, can be read off
// before it is timed on a GPU (docs/benchmarks.md, "H200, session 28").
//
//   vattn_split_plan [options] BATCH...
//     BATCH: BxL (B decode requests of L keys) or BxLO-HI (contexts spread
//     evenly from LO to HI), e.g. 6x8192 16x1024-16384
//   options (defaults: an H100 / H200 and issue 5's model shape):
//     --sms N (132) --ctas-per-sm N (2) --rows-per-tile N (128)
//     --heads H (32) --kv-heads K (8) --head-size D (128) --block-size S (16)
//     --kv-dtype auto|fp8|fp8_e5m2 (auto) --max-splits N (0: the builder's)
//
// One line per batch: the decode split count, the decode items (parts over
// all requests), the CTAs they launch and the waves of resident CTAs.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/cuda_schedule.h"
#include "metadata/metadata.h"

namespace {

[[noreturn]] void usage(const char *msg) {
  if (msg) std::fprintf(stderr, "vattn_split_plan: %s\n", msg);
  std::fprintf(stderr,
               "usage: vattn_split_plan [--sms N] [--ctas-per-sm N] [--rows-per-tile N] [--heads H]\n"
               "         [--kv-heads K] [--head-size D] [--block-size S] [--kv-dtype auto|fp8|fp8_e5m2]\n"
               "         [--max-splits N] BATCH...   (BATCH: BxL or BxLO-HI, e.g. 6x8192 16x1024-16384)\n");
  std::exit(2);
}

int to_int(const char *s, const char *what) {
  char *end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > (1L << 30)) usage((std::string("bad value for ") + what).c_str());
  return static_cast<int>(v);
}

// "BxL" or "BxLO-HI" -> the requests' context lengths.
bool parse_batch(const std::string &s, std::vector<int32_t> *lens) {
  const size_t x = s.find('x'), dash = s.find('-');
  if (x == std::string::npos || x == 0) return false;
  const int b = std::atoi(s.substr(0, x).c_str());
  const std::string l = s.substr(x + 1);
  int lo = 0, hi = 0;
  if (dash == std::string::npos) {
    lo = hi = std::atoi(l.c_str());
  } else {
    lo = std::atoi(l.substr(0, dash - x - 1).c_str());
    hi = std::atoi(s.substr(dash + 1).c_str());
  }
  if (b < 1 || lo < 1 || hi < lo) return false;
  lens->clear();
  for (int r = 0; r < b; ++r)
    lens->push_back(b > 1 ? lo + static_cast<int32_t>(int64_t(hi - lo) * r / (b - 1)) : hi);
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  vattn_builder_options_t o;
  vattn_builder_options_init(&o);
  o.num_heads = 32;
  o.num_kv_heads = 8;
  o.head_size = 128;
  o.block_size = 16;
  vattn::CudaDeviceFacts d;
  d.num_sms = 132;
  d.rows_per_tile = 128;
  d.dec_ctas_per_sm = 2;
  std::vector<std::string> batches;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char * {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--sms") d.num_sms = to_int(val(), "--sms");
    else if (a == "--ctas-per-sm") d.dec_ctas_per_sm = to_int(val(), "--ctas-per-sm");
    else if (a == "--rows-per-tile") d.rows_per_tile = to_int(val(), "--rows-per-tile");
    else if (a == "--heads") o.num_heads = to_int(val(), "--heads");
    else if (a == "--kv-heads") o.num_kv_heads = to_int(val(), "--kv-heads");
    else if (a == "--head-size") o.head_size = to_int(val(), "--head-size");
    else if (a == "--block-size") o.block_size = to_int(val(), "--block-size");
    else if (a == "--max-splits") o.max_num_splits = to_int(val(), "--max-splits");
    else if (a == "--kv-dtype") {
      const std::string v = val();
      if (v == "auto") o.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
      else if (v == "fp8") o.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_FP8_E4M3;
      else if (v == "fp8_e5m2") o.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_FP8_E5M2;
      else usage("--kv-dtype must be auto, fp8 or fp8_e5m2");
    } else if (a == "-h" || a == "--help") usage(nullptr);
    else if (!a.empty() && a[0] == '-') usage(("unknown option " + a).c_str());
    else batches.push_back(a);
  }
  // What cuda_create_builder checks before it builds a configuration.
  if (o.num_kv_heads < 1 || o.num_heads < o.num_kv_heads || o.num_heads % o.num_kv_heads)
    usage("--heads must be a multiple of --kv-heads");
  if (o.num_heads / o.num_kv_heads > vattn::kern::kAttnRowsPerTile) usage("too many query heads per KV head");
  if (o.block_size < 16 || o.block_size % 16) usage("--block-size must be a multiple of 16");
  if (d.num_sms < 1 || d.rows_per_tile < o.num_heads / o.num_kv_heads) usage("--sms / --rows-per-tile too small");
  if (batches.empty()) usage("no batch given");

  std::printf("%-20s %7s %7s %7s %6s   (%d SMs, %d decode CTAs per SM, %d / %d heads, head size %d, kv %s)\n",
              "batch", "splits", "items", "CTAs", "waves", d.num_sms, d.dec_ctas_per_sm, o.num_heads,
              o.num_kv_heads, o.head_size,
              o.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_AUTO ? "16-bit" : "fp8");
  int rc = 0;
  for (const std::string &spec : batches) {
    std::vector<int32_t> lens;
    if (!parse_batch(spec, &lens)) {
      std::fprintf(stderr, "vattn_split_plan: bad batch '%s' (BxL or BxLO-HI)\n", spec.c_str());
      rc = 2;
      continue;
    }
    const int64_t n = static_cast<int64_t>(lens.size());
    const int64_t cols = (lens.back() + o.block_size - 1) / o.block_size;  // lens ascend
    std::vector<int32_t> qsl{0}, table(static_cast<size_t>(n * cols));
    std::vector<int64_t> slots;
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    for (int64_t r = 0; r < n; ++r) {
      qsl.push_back(static_cast<int32_t>(r + 1));
      const int32_t pos = lens[r] - 1;  // the decode token's slot
      slots.push_back(int64_t(table[r * cols + pos / o.block_size]) * o.block_size + pos % o.block_size);
    }
    vattn_metadata_desc_t md_desc;
    vattn_metadata_desc_init(&md_desc);
    md_desc.num_reqs = n;
    md_desc.num_actual_tokens = n;
    md_desc.query_start_loc = qsl.data();
    md_desc.seq_lens = lens.data();
    md_desc.block_table = table.data();
    md_desc.block_table_rows = n;
    md_desc.block_table_cols = cols;
    md_desc.slot_mapping = slots.data();
    md_desc.slot_mapping_len = n;
    md_desc.block_size = o.block_size;
    md_desc.num_cache_blocks = static_cast<int64_t>(table.size());
    vattn::Metadata md;
    if (vattn::metadata_from_desc(md_desc, "batch", &md) != VATTN_OK) {
      std::fprintf(stderr, "vattn_split_plan: %s: %s\n", spec.c_str(), vattn_last_error_message());
      rc = 1;
      continue;
    }
    vattn_builder_options_t ob = o;  // sized for this batch
    ob.max_num_reqs = n;
    ob.max_num_tokens = n;
    ob.max_blocks_per_req = cols;
    const vattn::CudaBuilderCfg c = vattn::cuda_builder_cfg(ob, d);
    const vattn::CudaPlanLayout L = vattn::cuda_plan_layout(c);
    std::vector<char> host(L.meta_end);
    vattn::CudaScheduleScratch scratch;
    vattn::CudaSchedule sc;
    if (vattn::cuda_schedule(c, L, host.data(), md, 0, false, &scratch, &sc) != VATTN_OK) {
      std::fprintf(stderr, "vattn_split_plan: %s: %s\n", spec.c_str(), vattn_last_error_message());
      rc = 1;
      continue;
    }
    const int64_t items = sc.n_items - sc.n_gen;
    const int64_t ctas = items * (o.num_kv_heads / c.dec_heads);
    std::printf("%-20s %7d %7lld %7lld %6lld\n", spec.c_str(), sc.dec_splits, static_cast<long long>(items),
                static_cast<long long>(ctas), static_cast<long long>((ctas + c.dec_slots - 1) / c.dec_slots));
  }
  return rc;
}
