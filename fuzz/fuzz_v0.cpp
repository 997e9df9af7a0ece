// fuzz_v0 -- the v0 per-sequence builder (add_seq / build), v0 metadata
// create / describe / queries, and the CUDA-graph state.
#include <algorithm>

#include "fuzz_util.h"

namespace {

void builder(fz::In &in) {
  vattn_v0_builder_options_t o;
  vattn_v0_builder_options_init(&o);
  o.block_size = in.val<int32_t>(1, 16);
  o.sliding_window = in.range<int>(0, 3) ? 0 : in.val<int32_t>(0, 32);
  o.chunked_prefill_enabled = in.val<int32_t>(0, 1);
  o.num_cache_blocks = in.range<int>(0, 3) ? 0 : in.val<int64_t>(0, 64);
  o.max_blocks_per_seq = in.range<int32_t>(-1, 16);  // a size request: kept small
  if (in.range<int>(0, 31) == 0) o.struct_size = in.struct_size(sizeof o);
  vattn_v0_builder_t *b = nullptr;
  vattn_status_t st = vattn_v0_builder_create(&b, in.range<int>(0, 15) ? &o : nullptr);
  fz::check_status(st);
  FZ_REQUIRE((st == VATTN_OK) == (b != nullptr));
  if (!b) return;
  int nseq = in.range<int>(0, 6);
  std::vector<int32_t> seq_lens, query_lens;
  for (int i = 0; i < nseq; ++i) {
    vattn_v0_seq_t s;
    vattn_v0_seq_init(&s);
    s.is_prompt = in.val<int32_t>(0, 1);
    s.context_len = in.val<int64_t>(0, 32);
    s.query_len = in.val<int64_t>(1, 16);
    if (__builtin_add_overflow(s.context_len, s.query_len, &s.seq_len)) s.seq_len = INT64_MAX;
    if (in.range<int>(0, 7) == 0) s.seq_len = in.val<int64_t>(0, 48);
    s.curr_seq_len = s.seq_len;
    s.token_len = s.query_len;
    s.curr_sliding_window_blocks = in.range<int>(0, 3) ? 0 : in.val<int32_t>(0, 8);
    s.prefix_cache_hit = in.range<int>(0, 7) ? 0 : 1;
    std::vector<int32_t> table(in.range<size_t>(0, 8));
    for (auto &t : table) t = in.val<int32_t>(0, 63);
    s.block_table = in.range<int>(0, 7) ? table.data() : nullptr;
    s.block_table_len = s.block_table ? int64_t(table.size()) : in.range<int64_t>(0, 2);
    // A profile run (no table) pads seq_len slots of 8 bytes: a size request
    // like batch_size below -- kept small when the builder must accept it
    // (hostile lengths past INT32_MAX stay, the builder refuses them).
    if (!s.block_table && s.seq_len > 4096 && s.seq_len <= INT32_MAX) s.curr_seq_len = s.seq_len %= 4096;
    if (in.range<int>(0, 15) == 0) s.block_table_len = in.range<int64_t>(INT64_MIN, -1);
    if (in.range<int>(0, 31) == 0) s.struct_size = in.struct_size(sizeof s);
    st = vattn_v0_builder_add_seq(b, in.range<int>(0, 63) ? &s : nullptr);
    fz::check_status(st);
    if (st == VATTN_OK) {
      seq_lens.push_back(int32_t(std::min<int64_t>(s.seq_len, INT32_MAX)));
      query_lens.push_back(int32_t(std::min<int64_t>(s.query_len, INT32_MAX)));
    }
  }
  for (size_t i = 0; i < seq_lens.size(); ++i)
    if (in.range<int>(0, 7) == 0) seq_lens[i] = in.val<int32_t>(0, 48);
  vattn_v0_metadata_t *md = nullptr;
  int64_t n = int64_t(seq_lens.size());
  if (in.range<int>(0, 7) == 0) n = in.range<int64_t>(INT64_MIN, -1);
  seq_lens.push_back(0);
  query_lens.push_back(0);
  // batch_size / pad are size requests: small, or hostile values the builder must refuse.
  auto small_or_hostile = [&](int64_t lo, int64_t hi) {
    return in.range<int>(0, 15) ? in.range<int64_t>(lo, hi)
                                : in.pick<int64_t>({INT64_MAX, INT64_MIN, -2, (INT64_C(1) << 31) + 1});
  };
  st = vattn_v0_builder_build(b, seq_lens.data(), query_lens.data(), n, small_or_hostile(-1, 8),
                              small_or_hostile(-1, 16), &md);
  fz::check_status(st);
  FZ_REQUIRE((st == VATTN_OK) == (md != nullptr));
  if (md) {
    vattn_v0_metadata_desc_t d;
    vattn_v0_metadata_desc_init(&d);
    FZ_REQUIRE(vattn_v0_metadata_describe(md, &d) == VATTN_OK);
    vattn_v0_metadata_t *again = nullptr;
    st = vattn_v0_metadata_create(&again, &d);
    fz::check_status(st);
    FZ_REQUIRE(st == VATTN_OK);
    vattn_v0_metadata_destroy(again);
    int64_t out3[3];
    fz::check_status(vattn_v0_get_num_prefill_decode_query_kv_tokens(md, in.val<int32_t>(0, 3), out3));
    const int32_t *sl = nullptr, *bt = nullptr;
    int64_t ns = 0, cols = 0;
    int32_t mx = 0;
    st = vattn_v0_get_seq_len_block_table_args(md, in.val<int32_t>(0, 1), in.val<int32_t>(0, 3),
                                               &sl, &ns, &mx, &bt, &cols);
    fz::check_status(st);
    if (st == VATTN_OK && ns > 0 && sl) {
      volatile int32_t x = sl[ns - 1];
      (void)x;
    }
    // Graph state replay of this batch.
    {
      vattn_graph_state_t *gs = nullptr;
      // Buffer sizes are a request: keep them small (negative / zero still fuzzed).
      st = vattn_graph_state_create(&gs, in.range<int64_t>(-1, 8), in.range<int32_t>(-1, 16),
                                    in.val<int32_t>(1, 64));
      fz::check_status(st);
      if (gs) {
        fz::check_status(vattn_graph_state_prepare_replay(gs, md));
        vattn_v0_metadata_t *gm = nullptr;
        st = vattn_graph_state_metadata_for_batch(gs, in.val<int64_t>(1, 8), &gm);
        fz::check_status(st);
        FZ_REQUIRE((st == VATTN_OK) == (gm != nullptr));
        vattn_v0_metadata_destroy(gm);
        vattn_graph_state_destroy(gs);
      }
    }
    vattn_v0_metadata_destroy(md);
  }
  vattn_v0_builder_destroy(b);
}

void desc(fz::In &in) {
  // A v0 description from scratch: arrays sized by the declared counts.
  vattn_v0_metadata_desc_t d;
  vattn_v0_metadata_desc_init(&d);
  int64_t n = in.range<int64_t>(0, 6);
  int64_t cols = in.range<int64_t>(0, 4);
  std::vector<int32_t> seq(n), ctx(n), qsl(n + 1), ssl(n + 1), bt(n * cols), enc(n), cbt(n * cols);
  std::vector<int64_t> slots(in.range<size_t>(0, 32));
  for (auto &x : seq) x = in.val<int32_t>(0, 32);
  for (auto &x : ctx) x = in.val<int32_t>(0, 32);
  for (auto &x : qsl) x = in.val<int32_t>(0, 64);
  for (auto &x : ssl) x = in.val<int32_t>(0, 64);
  for (auto &x : bt) x = in.val<int32_t>(0, 64);
  for (auto &x : enc) x = in.val<int32_t>(0, 32);
  for (auto &x : cbt) x = in.val<int32_t>(0, 64);
  for (auto &x : slots) x = in.val<int64_t>(-1, 512);
  if (in.flag()) std::sort(qsl.begin(), qsl.end());
  if (in.flag()) std::sort(ssl.begin(), ssl.end());
  d.num_prefills = in.val<int64_t>(0, n);
  d.num_prefill_tokens = in.val<int64_t>(0, 64);
  d.num_decode_tokens = in.val<int64_t>(0, 64);
  d.num_seqs = n;
  if (in.range<int>(0, 15) == 0) d.num_seqs = in.range<int64_t>(INT64_MIN, -1);
  d.slot_mapping = slots.data();
  d.slot_mapping_len = int64_t(slots.size());
  d.seq_lens = seq.data();
  d.context_lens = in.flag() ? ctx.data() : nullptr;
  d.query_start_loc = in.range<int>(0, 7) ? qsl.data() : nullptr;
  d.seq_start_loc = in.range<int>(0, 7) ? ssl.data() : nullptr;
  d.block_tables = bt.data();
  d.block_tables_cols = cols;
  d.max_query_len = in.val<int32_t>(0, 64);
  d.max_prefill_seq_len = in.val<int32_t>(0, 64);
  d.max_decode_seq_len = in.val<int32_t>(0, 64);
  d.max_decode_query_len = in.val<int32_t>(0, 64);
  d.use_cuda_graph = in.val<int32_t>(0, 1);
  if (in.range<int>(0, 3) == 0) {
    d.encoder_seq_lens = enc.data();
    d.num_encoder_tokens = in.val<int64_t>(0, 128);
    d.max_encoder_seq_len = in.val<int32_t>(0, 32);
    d.cross_block_tables = cbt.data();
    d.cross_block_tables_cols = cols;
  }
  if (in.range<int>(0, 31) == 0) d.struct_size = in.struct_size(sizeof d);
  vattn_v0_metadata_t *md = nullptr;
  vattn_status_t st = vattn_v0_metadata_create(&md, &d);
  fz::check_status(st);
  FZ_REQUIRE((st == VATTN_OK) == (md != nullptr));
  if (md) {
    int64_t out3[3];
    for (int t = 0; t < 4; ++t)
      fz::check_status(vattn_v0_get_num_prefill_decode_query_kv_tokens(md, t, out3));
    const int32_t *sl = nullptr, *btp = nullptr;
    int64_t ns = 0, c = 0;
    int32_t mx = 0;
    st = vattn_v0_get_seq_len_block_table_args(md, in.val<int32_t>(0, 1), in.val<int32_t>(0, 3),
                                               &sl, &ns, &mx, &btp, &c);
    fz::check_status(st);
    if (st == VATTN_OK && ns > 0 && sl) {
      volatile int32_t x = sl[0];
      x = sl[ns - 1];
      (void)x;
      if (btp && c > 0) {
        volatile int32_t y = btp[ns * c - 1];
        (void)y;
      }
    }
  }
  vattn_v0_metadata_destroy(md);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz::In in(data, size);
  if (in.flag()) builder(in); else desc(in);
  return 0;
}
