// launch.h -- host-side interface of the CUDA kernels: plain parameter
// structs (raw pointers, sizes, strides in elements) and launchers that take
// the stream last and return cudaError_t.  Includable from host C++ (no
// device code); never sees a vattn handle or metadata object.
//
// Launchers return cudaErrorNotSupported from the default branch of their
// dispatch (head size / dtype / cache kind not compiled); callers turn it
// into VATTN_ERR_UNSUPPORTED.  Layer creation checks *_supported() first so
// that this never happens in a forward.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace vattn {
namespace kern {

// Element kinds understood by the launchers.
enum ElemKind : int32_t { kF16 = 0, kBF16 = 1, kF32 = 2 };
// Cache element kinds: auto = the activation type, else fp8 bytes.
enum CacheKind : int32_t { kCacheAuto = 0, kCacheE4M3 = 1, kCacheE5M2 = 2 };

// ---- reshape_and_cache -------------------------------------------------------
// key/value [T', H, D] (any strides, d contiguous) -> cache (the K half and V
// half of a logical (2, num_blocks, block_size, H, D) tensor, any strides, d
// contiguous) at slot_mapping[i], i < num_tokens.  Slot -1 (and any negative
// slot) is skipped; slots >= num_slots (= num_blocks * block_size) are
// skipped too and never written (the C API documents this).  When
// num_tokens_dev is non-NULL the token count is read from it on the device
// (CUDA-graph replay with a new batch) and num_tokens is only the grid bound.
struct CacheWriteParams {
  const void *key, *value;
  int64_t k_stride_tok, k_stride_head, v_stride_tok, v_stride_head;
  void *k_cache, *v_cache;
  int64_t kc_stride_block, kc_stride_tok, kc_stride_head;
  int64_t vc_stride_block, vc_stride_tok, vc_stride_head;
  const int64_t *slot_mapping;
  int64_t num_tokens;
  const int32_t *num_tokens_dev;  // optional
  int32_t num_heads, head_size, block_size;
  int64_t num_slots;
  float k_scale, v_scale;  // fp8 only: stored = x / scale
  int32_t vec;             // 8: 16-byte aligned rows (checked by the caller), else 1
};
bool cache_write_supported(int32_t elem, int32_t cache);
cudaError_t launch_cache_write(const CacheWriteParams &p, int32_t elem, int32_t cache,
                               cudaStream_t stream);

// ---- v1 slot mapping on the device ------------------------------------------------
// slot[i] = block_table[req(i) * bt_stride + pos[i] / block_size] * block_size
//           + pos[i] % block_size for i < num_tokens, req(i) from
// query_start_loc (num_reqs + 1 entries); PAD (-1) for i in [num_tokens,
// slot_len).  The device path never faults and reports nothing: -1 for a
// token outside [qsl[0], qsl[num_reqs]), a negative position, a block index
// past the row's valid blocks (num_blocks_per_row[r], else max_blocks) or a
// block id outside [0, num_cache_blocks) (num_cache_blocks > 0).
cudaError_t launch_slot_mapping(const int32_t *block_table, int64_t bt_stride,
                                const int32_t *num_blocks_per_row, int64_t max_blocks,
                                const int32_t *query_start_loc, int64_t num_reqs,
                                const int64_t *positions, int64_t num_tokens, int32_t block_size,
                                int64_t num_cache_blocks, int64_t *slot_mapping, int64_t slot_len,
                                cudaStream_t stream);

// ---- paged / varlen attention --------------------------------------------------------
// One request of a plan (device array).  Query rows of a request are the
// pairs (token, head-in-group) packed token-major: row = t * G + g, so the
// G query heads that share one KV head are processed together.
struct AttnReq {
  int32_t q_start;   // first token of this request in query / output
  int32_t q_len;     // query tokens
  int32_t q_pos0;    // absolute position of its first query token (context length)
  int32_t kv_len;    // keys [0, kv_len)
  int32_t bt_row;    // block-table row (paged)
  int32_t kv_start;  // first token in key/value tensors (non-paged)
  int32_t causal;    // 0 / 1
  int32_t pad_;
};
// A unit of work: up to kAttnRowsPerTile rows of one request against the
// keys [kv_begin, kv_end).  ws_base < 0: the item covers every key of its
// rows and writes the final output; else it writes fp32 partials (output
// normalised by its own sum, and its LSE) to workspace rows
// (ws_base + row) * num_kv_heads + kv_head, combined by the merge pass.
// merge = 0, or self_merge_word(parts, index, group) when the item is one
// of `parts` (<= kMaxMergeTileParts) key splits of a tile that merges its
// partials itself (no plan merge pass for its tokens; every attention
// kernel does this).  group >= parts: the last of the parts to finish
// merges them all.  group < parts: a tree of two levels, since one merge
// step combines at most kMaxSelfMergeParts partials: the parts form groups
// of `group` (the last may hold fewer), the last CTA of each group merges
// the group into its first part's workspace rows, and the last group to
// finish merges the groups' results.  The builder keeps group and the
// number of groups <= kMaxSelfMergeParts.  merge_slot is the
// tile's first arrival counter (each counter is one per KV head):
// merge_slot for the tile, then merge_slot + 1 + g for group g when there
// are groups.  The counters of a plan number at most its decode items
// (self_merge_counters).
struct AttnItem {
  int32_t req, q_row0, num_rows, kv_begin, kv_end, ws_base, merge, merge_slot;
};
constexpr int kMaxSelfMergeParts = 64;   // partials one merge step combines (<= 2 x warp size)
constexpr int kMaxMergeTileParts = 128;  // parts of a self-merging tile (in groups past kMaxSelfMergeParts)
// Floats of a merging CTA's shared scratch: the weights
// [16][kMaxSelfMergeParts] and two stats per row (attention_item.cuh).
constexpr int kMergeScratchFloats = 16 * kMaxSelfMergeParts + 32;
// The merge word: parts in bits 0-11, the part's index in 12-23, the group
// size in 24-30 (<= kMaxSelfMergeParts, so bit 31 stays clear).
constexpr int32_t self_merge_word(int parts, int index, int group) {
  return parts | index << 12 | (group < parts ? group : parts) << 24;
}
constexpr int self_merge_parts(int32_t w) { return w & 0xfff; }
constexpr int self_merge_index(int32_t w) { return (w >> 12) & 0xfff; }
constexpr int self_merge_group(int32_t w) { return (w >> 24) & 0x7f; }
// Arrival counters a tile of `parts` self-merging parts in groups of
// `group` uses: 1 + its number of groups when there are several, else 1;
// at most `parts` for group >= 2 (so a plan's counters number at most its
// items).
constexpr int self_merge_counters(int parts, int group) {
  return group >= parts ? 1 : 1 + (parts + group - 1) / group;
}
constexpr int kAttnRowsPerTile = 64;  // the smallest BM of attention_kernel (head size 256)
constexpr int kAttnMaxItemRows = 128;  // the most rows of an item (the Hopper kernel's BM)
// Rows per item of the kernel that runs a cache kind and head size on CUDA
// device `device`: the Hopper kernel's 128 where it serves them
// (sm90_attention_enabled_on), else attention_kernel's BM (128 up to head
// size 128, 64 above); the builder sizes its tiles with it.  Either kernel
// runs items of up to kAttnMaxItemRows rows (attention_kernel in ranges of
// its BM), so a plan runs on any cache kind.
int32_t attention_rows_per_tile(int32_t head_size, int32_t cache, int32_t device);

struct AttnParams {
  const void *q;
  int64_t q_stride_tok, q_stride_head;
  int64_t q_extent;  // rows (tokens) of Q: the Hopper kernel's Q tensor map
  // K / V: paged cache halves (paged = 1: strides block / token-in-block /
  // head) or [T, H, D] tensors (paged = 0: stride_block unused).
  const void *k, *v;
  int64_t k_stride_block, k_stride_tok, k_stride_head;
  int64_t v_stride_block, v_stride_tok, v_stride_head;
  int32_t paged, block_size;
  int64_t kv_extent;  // paged: blocks in the cache; dense: rows of K (and of V)
  const int32_t *block_table;
  int64_t bt_stride;
  void *out;
  int64_t o_stride_tok, o_stride_head;
  float *lse;  // optional [num_heads, >= tokens]
  int64_t lse_stride_head, lse_stride_tok;
  float *ws_o, *ws_lse;  // [ws_rows, D], [ws_rows]
  const AttnReq *reqs;
  const AttnItem *items;
  const int32_t *num_items;  // device
  int32_t num_heads, num_kv_heads, group;
  float scale;         // softmax scale
  float k_scale, v_scale;
  float softcap;       // 0 = off
  const float *alibi;  // [num_heads] or NULL
  const float *sinks;  // [num_heads] or NULL
  int32_t window_left;   // < 0: none.  key j visible iff qpos - j <= window_left
  int32_t window_right;  // < 0: none.  key j visible iff j - qpos <= window_right
  int32_t allow_causal;  // 0: ignore the requests' causal flag (encoder / cross)
  // decode_kernel only: its items are [*first_item, *num_items) (device).
  const int32_t *first_item;
  // decode_kernel only: tiles a warp keeps in flight ahead of the one it
  // computes, where the instance lets it vary (DecShape::kVarAhead): 2 for
  // items that cover their rows' keys, else 1.  Set by launch_decode
  // (decode_fp8_ahead); callers leave it 0.
  int32_t dec_ahead;
  // decode_kernel, 16-bit caches at head size 128 on TMA (DecShape::kAhead16):
  // an item of at least 4 x dec_one_ahead_tiles 16-key tiles (one per warp
  // in turn) keeps one tile per warp in flight ahead of the one computed,
  // not two, when the launch's working CTAs (items x KV-head CTAs) are more
  // than dec_sms.  dec_one_ahead_tiles 0: two for every item.  Set by
  // launch_decode (decode_16bit_ahead); callers leave them 0.
  int32_t dec_one_ahead_tiles;
  int32_t dec_sms;
  // Arrival counters of self-merging tiles [merge slots][num_kv_heads], zero
  // between launches (the merging CTA resets its counter).
  int32_t *merge_counters;
  // attention_sm90_kernel only.  units: the order in which the persistent
  // CTAs take the units (unit = item * num_kv_heads + kv head) of the items
  // [0, *first_item) -- a permutation of [0, *first_item * num_kv_heads);
  // later items' units follow in plain order.  unit_ctr[2]: the claim
  // counter and the CTAs' exit counter, zero between launches (the last
  // CTA to exit resets both).
  const int32_t *units;
  int32_t *unit_ctr;
};
bool attention_supported(int32_t elem, int32_t cache, int32_t head_size);
// Whether launch_attention uses the Hopper kernel (attention_sm90.cuh) on the
// current device: compute capability 9.0 and VATTN_CUDA_SM90 unset or not
// "0" (read once per process).  Cached per device; safe during capture.
bool sm90_attention_enabled();
bool sm90_attention_enabled_on(int device);
// Grid of the persistent Hopper kernel: the current device's multiprocessor
// count (cached per device; 1 when the query fails), capped by
// VATTN_CUDA_SM90_CTAS when set (read once per process; tests use it).
int sm90_max_ctas();
// Raises the dynamic shared-memory limit of the kernel (once per process;
// not a stream operation: call it outside graph capture).
cudaError_t attention_prepare(int32_t elem, int32_t cache, int32_t head_size);
cudaError_t launch_attention(const AttnParams &p, int32_t elem, int32_t cache, int32_t head_size,
                             int32_t grid_x, cudaStream_t stream);

// Decode-specialised kernel (kernels/decode.cuh) over the paged cache: items
// [*p.first_item, *p.num_items), each of at most 16 rows, kv_begin a multiple
// of 16; block_size a multiple of 16.  Compiled for fewer head sizes than
// attention_kernel (decode_supported); the caller routes the rest there.
bool decode_supported(int32_t elem, int32_t cache, int32_t head_size);
cudaError_t decode_prepare(int32_t elem, int32_t cache, int32_t head_size);
// heads_per_cta: the plan's decode_kv_heads_per_cta (1, or 2 where that
// rule can give it); the kernels of both shapes serve every cache kind.
cudaError_t launch_decode(const AttnParams &p, int32_t elem, int32_t cache, int32_t head_size,
                          int32_t heads_per_cta, int32_t grid_x, cudaStream_t stream);
// Resident decode_kernel CTAs per SM for a head size and CTA shape: the
// minimum over the compiled activation / cache kinds (occupancy API;
// prepares the kernels).
cudaError_t decode_ctas_per_sm(int32_t head_size, int32_t heads_per_cta, int32_t *out);
constexpr int kDecodeRows = 16;     // rows per decode item
constexpr int kDecodeKeyAlign = 16;  // decode items start at multiples of this
constexpr int kDecodeRoundKeys = 64;  // keys of one round of a decode CTA's 4 warps (16-key tiles each)
// Head sizes with a two-head decode kernel (64 only: the one where the pair
// pays, see decode_kv_heads_per_cta).
constexpr bool decode_two_head_kernel(int32_t head_size) { return head_size == 64; }
// Shapes the two-head decode CTA serves: a head size with that kernel, KV
// heads in pairs, and one head's rows in half a decode item.
constexpr bool decode_two_head_shape(int32_t head_size, int32_t num_kv_heads, int32_t group) {
  return decode_two_head_kernel(head_size) && num_kv_heads % 2 == 0 && group <= kDecodeRows / 2;
}
// KV heads per decode CTA, for the cache kind the builder is told
// (vattn_builder_options_t::kv_cache_dtype).  At head size 64 an fp8 key
// row of one head is 64 bytes; a CTA that runs two adjacent heads reads
// 128-byte spans of the NHD layout instead (H100, fp8 D64: 32x4096 18%
// faster, 8x8192 11%; such plans split half as far, see cuda_builder.cpp).
// A 16-bit cache keeps one head per CTA: its 128-byte rows gain little from
// the pair, and the larger CTA costs a resident CTA per SM and twice the
// splits (1x32768 D64: 13% slower).  The builder stores the choice in the
// plan and the launch follows the plan; with 2, a decode item holds one
// head's rows (at most kDecodeRows / 2 = 8) and CTA (x, y) runs KV heads 2x
// and 2x + 1.
constexpr int32_t decode_kv_heads_per_cta(int32_t head_size, int32_t cache, int32_t num_kv_heads,
                                          int32_t group) {
  return cache != kCacheAuto && decode_two_head_shape(head_size, num_kv_heads, group) ? 2 : 1;
}

// Merge pass of a plan: for every token t < *num_tokens and head h,
// tok_parts[t] = (offset, count): count > 0 merges the partial rows
// part_list[offset + i] + g (g = h % G, see AttnItem); 0 = written by the
// attention kernel already; -1 = padding (zeros, LSE -inf).  Applies sinks.
struct PlanMergeParams {
  void *out;
  int64_t o_stride_tok, o_stride_head;
  float *lse;
  int64_t lse_stride_head, lse_stride_tok;
  const float *ws_o, *ws_lse;
  const int2 *tok_parts;
  const int32_t *part_list;
  const int32_t *num_tokens;  // device
  int32_t num_heads, num_kv_heads, group, head_size;
  const float *sinks;
};
cudaError_t launch_plan_merge(const PlanMergeParams &p, int32_t elem, int32_t grid_x,
                              cudaStream_t stream);

// ---- merge_attn_states -----------------------------------------------------------
// out[t, h, :] = merge of prefix/suffix [T, H, D] with LSEs [H, T] (strides
// given); +inf LSE counts as -inf; both -inf -> prefix output, -inf LSE.
struct MergeStatesParams {
  void *out;
  int64_t o_st, o_sh;
  float *out_lse;
  int64_t ol_sh, ol_st;
  const void *pre;
  int64_t p_st, p_sh;
  const float *pre_lse;
  int64_t pl_sh, pl_st;
  const void *suf;
  int64_t s_st, s_sh;
  const float *suf_lse;
  int64_t sl_sh, sl_st;
  int64_t num_tokens;
  int32_t num_heads, head_size;
};
cudaError_t launch_merge_states(const MergeStatesParams &p, int32_t elem, cudaStream_t stream);

// ---- copy_blocks -------------------------------------------------------------------
// For each pair (src, dst) and each of K, V of one layer cache: copies the
// block's (block_size x H x D) elements.  Strides in bytes here (any dtype).
constexpr int kCopyPairsPerLaunch = 128;  // keeps the parameter block under 4 KiB
struct CopyBlocksParams {
  char *cache;
  int64_t s_kv, s_block, s_tok, s_head;  // bytes
  int32_t num_kv;  // 2: K and V halves (s_kv apart); 1: single cache (MLA)
  int32_t block_size, num_heads;
  int64_t row_bytes;  // head_size * element bytes (d contiguous)
  int32_t vec16;      // rows and strides 16-byte aligned
  int32_t num_pairs;  // <= kCopyPairsPerLaunch
  int64_t pairs[2 * kCopyPairsPerLaunch];
};
cudaError_t launch_copy_blocks(const CopyBlocksParams &p, cudaStream_t stream);

}  // namespace kern
}  // namespace vattn
