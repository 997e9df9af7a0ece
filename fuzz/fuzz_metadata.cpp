// fuzz_metadata -- vattn_metadata_create/describe/unpadded and every batch
// utility of header section 8 on fuzzed (mostly consistent, sometimes
// corrupted) batches.
#include <algorithm>

#include "fuzz_util.h"

namespace {

struct MdPtr {
  vattn_metadata_t *p = nullptr;
  ~MdPtr() { vattn_metadata_destroy(p); }
};

// Every handle returned must describe itself and satisfy the invariants.
void check_handle(const vattn_metadata_t *md) {
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  vattn_status_t st = vattn_metadata_describe(md, &d);
  fz::check_status(st);
  FZ_REQUIRE(st == VATTN_OK);
  FZ_REQUIRE(d.num_reqs >= 0 && d.query_start_loc != nullptr);
  FZ_REQUIRE(d.query_start_loc[0] == 0);
  for (int64_t r = 0; r < d.num_reqs; ++r) {
    int32_t q = d.query_start_loc[r + 1] - d.query_start_loc[r];
    FZ_REQUIRE(q >= 0);
    FZ_REQUIRE(d.seq_lens[r] >= q);
  }
  FZ_REQUIRE(d.query_start_loc[d.num_reqs] <= d.num_actual_tokens);
  // Round trip: the description creates an equal handle.
  MdPtr again;
  st = vattn_metadata_create(&again.p, &d);
  fz::check_status(st);
  FZ_REQUIRE(st == VATTN_OK);
}

void utilities(fz::In &in, const fz::Batch &b, const vattn_metadata_t *md) {
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  FZ_REQUIRE(vattn_metadata_describe(md, &d) == VATTN_OK);
  const int64_t n = d.num_reqs;
  std::vector<int32_t> qlens(n), seqs(d.seq_lens, d.seq_lens + n);
  for (int64_t r = 0; r < n; ++r) qlens[r] = d.query_start_loc[r + 1] - d.query_start_loc[r];

  {
    MdPtr u;
    vattn_status_t st = vattn_metadata_unpadded(md, in.val<int64_t>(0, d.num_actual_tokens),
                                                in.val<int64_t>(0, n), &u.p);
    fz::check_status(st);
    FZ_REQUIRE((st == VATTN_OK) == (u.p != nullptr));
    if (u.p) check_handle(u.p);
  }
  {
    vattn_decode_prefill_split_t s;
    vattn_status_t st =
        vattn_split_decodes_and_prefills(md, in.val<int32_t>(0, 4), in.range<int32_t>(0, 1), &s);
    fz::check_status(st);
    if (st == VATTN_OK) {
      FZ_REQUIRE(s.num_decodes + s.num_prefills == n);
      FZ_REQUIRE(s.num_decode_tokens >= 0 && s.num_prefill_tokens >= 0);
    }
  }
  {
    vattn_decode_extend_prefill_split_t s;
    vattn_status_t st = vattn_split_decodes_prefills_and_extends(md, in.val<int32_t>(0, 4), &s);
    fz::check_status(st);
    if (st == VATTN_OK) FZ_REQUIRE(s.num_decodes + s.num_extends + s.num_prefills == n);
  }
  {
    MdPtr v;
    vattn_status_t st = vattn_make_local_attention_virtual_batches(
        in.val<int32_t>(1, 64), md, in.val<int32_t>(1, 32), &v.p);
    fz::check_status(st);
    FZ_REQUIRE((st == VATTN_OK) == (v.p != nullptr));
    if (v.p) check_handle(v.p);
  }
  {
    MdPtr v;
    vattn_status_t st = vattn_make_kv_sharing_fast_prefill_metadata(md, &v.p);
    fz::check_status(st);
    FZ_REQUIRE((st == VATTN_OK) == (v.p != nullptr));
    if (v.p) check_handle(v.p);
  }
  if (n >= 0) {
    int64_t a = in.val<int64_t>(0, n), z = in.val<int64_t>(0, n);
    std::vector<int32_t> out(n + 2, 0);
    // out must hold stop - start + 1 entries when the call accepts them.
    if (a <= z && z <= n && a >= 0) {
      fz::check_status(vattn_slice_query_start_locs(d.query_start_loc, n + 1, a, z, out.data()));
    } else {
      // Invalid ranges are rejected before anything is written.
      vattn_status_t st = vattn_slice_query_start_locs(d.query_start_loc, n + 1, a, z, out.data());
      fz::check_status(st);
      FZ_REQUIRE(st != VATTN_OK);
    }
  }
  {
    int32_t nub = in.val<int32_t>(1, 3);
    std::vector<vattn_ubatch_slice_t> sl(nub > 0 && nub <= 16 ? nub : 1), slp(sl.size());
    int64_t tokens = d.query_start_loc[n];
    vattn_status_t st = vattn_ubatch_slices_create(
        qlens.data(), n, in.val<int64_t>(tokens, tokens + 4), in.val<int64_t>(n, n + 2),
        nub > 0 && nub <= 16 ? nub : -in.range<int32_t>(0, 3) /* must be rejected */,
        in.val<int64_t>(0, tokens), sl.data(), slp.data());
    fz::check_status(st);
    if (st != VATTN_OK) {
      // Hand-made slices instead, sometimes out of range.
      for (auto &s : sl) {
        s.request_start = in.val<int64_t>(0, n);
        s.request_stop = in.val<int64_t>(s.request_start, n);
        s.token_start = in.val<int64_t>(0, tokens);
        s.token_stop = in.val<int64_t>(s.token_start, tokens);
      }
    }
    std::vector<vattn_metadata_t *> outs(sl.size(), nullptr);
    st = vattn_split_attn_metadata(in.flag() ? sl.data() : slp.data(), sl.size(), md, outs.data());
    fz::check_status(st);
    for (auto *o : outs) {
      FZ_REQUIRE((st == VATTN_OK) == (o != nullptr));
      if (o) check_handle(o);
      vattn_metadata_destroy(o);
    }
  }
  {
    int32_t out = -1;
    vattn_status_t st = vattn_use_cascade_attention(
        in.val<int64_t>(0, 256), qlens.data(), n, in.val<int32_t>(1, 64), in.val<int32_t>(1, 8),
        in.range<int32_t>(0, 1), in.range<int32_t>(0, 1), in.range<int32_t>(0, 1),
        in.val<int32_t>(1, 132), in.val<int32_t>(1, 4), &out);
    fz::check_status(st);
    if (st == VATTN_OK) FZ_REQUIRE(out == 0 || out == 1);
  }
  {
    int64_t cap = in.range<int64_t>(0, n + 1);
    std::vector<int64_t> out(2 * cap + 2);
    int64_t nch = -1;
    vattn_status_t st = vattn_split_prefill_chunks(seqs.data(), n, in.val<int64_t>(1, 128),
                                                   in.val<int64_t>(0, 8), out.data(), cap, &nch);
    fz::check_status(st);
    if (st == VATTN_OK) FZ_REQUIRE(nch >= 0 && nch <= cap);
  }
  {
    int32_t size = in.val<int32_t>(1, 8);
    int32_t rank = in.val<int32_t>(-1, 8);
    size_t cap = size > 0 && size <= 64 ? size_t(n) * size : size_t(n);
    std::vector<int32_t> out(std::max<size_t>(cap, 1));
    // dcp_rank < 0 writes n * size entries: only pass sizes we allocated for.
    if (!(rank < 0 && (size <= 0 || size > 64))) {
      fz::check_status(vattn_get_dcp_local_seq_lens(seqs.data(), n, size, rank,
                                                    in.val<int32_t>(1, 4), out.data()));
    }
  }
  {
    std::vector<int32_t> comp(n);
    for (int64_t r = 0; r < n; ++r) comp[r] = seqs[r] - qlens[r];
    std::vector<int64_t> swaps(2 * n + 2), order(n + 1);
    int64_t nsw = -1;
    int32_t mod = -1;
    vattn_status_t st = vattn_reorder_batch_to_split_decodes_and_prefills(
        qlens.data(), comp.data(), n, in.val<int32_t>(0, 4), in.flag() ? swaps.data() : nullptr,
        &nsw, in.flag() ? order.data() : nullptr, &mod);
    fz::check_status(st);
    if (st == VATTN_OK) FZ_REQUIRE(nsw >= 0 && nsw <= n && (mod == 0 || mod == 1));
  }
  (void)b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz::In in(data, size);
  fz::Batch b;
  b.make(in);
  bool corrupt = in.flag();
  if (corrupt) b.corrupt(in);
  MdPtr md;
  bool null_arg = in.range<int>(0, 63) == 0;
  vattn_status_t st = null_arg ? vattn_metadata_create(in.flag() ? &md.p : nullptr,
                                                       in.flag() ? &b.d : nullptr)
                               : vattn_metadata_create(&md.p, &b.d);
  fz::check_status(st);
  FZ_REQUIRE((st == VATTN_OK) == (md.p != nullptr));
  // A batch consistent by construction must be accepted.
  if (!corrupt && !null_arg) FZ_REQUIRE(st == VATTN_OK);
  if (md.p) {
    check_handle(md.p);
    utilities(in, b, md.p);
  }
  return 0;
}
