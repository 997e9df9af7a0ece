"""CommonAttentionMetadata and the batch utilities of vLLM's
v1/attention/backends/utils.py, with vLLM's names, arguments and results."""
import numpy as np

from ._dlpack import DLPackView, TensorArgs, from_dlpack_like
from ._ffi import check, ffi, lib, new_struct
from ._types import as_int_array, ptr
from .errors import InvalidArgumentError

PAD_SLOT_ID = lib.VATTN_PAD_SLOT_ID

_ARRAY_FIELDS = ("query_start_loc", "seq_lens", "num_computed_tokens", "block_table_tensor",
                 "slot_mapping", "encoder_seq_lens", "logits_indices_padded",
                 "dcp_local_seq_lens")


def _ro(a):
    a.flags.writeable = False
    return a


def _copy(p, n, dtype):
    if p == ffi.NULL or n <= 0:
        return np.zeros(max(n, 0), dtype=dtype) if p != ffi.NULL or n == 0 else None
    return np.frombuffer(ffi.buffer(p, n * np.dtype(dtype).itemsize), dtype=dtype).copy()


class CommonAttentionMetadata:
    """Per-batch metadata shared by every layer (vLLM CommonAttentionMetadata).

    Built from host arrays (lists, numpy, torch tensors), validated and
    deep-copied by the library.  Array attributes are read-only numpy copies.
    """

    def __init__(self, query_start_loc=None, seq_lens=None, block_table_tensor=None,
                 slot_mapping=None, num_computed_tokens=None, num_actual_tokens=None,
                 max_query_len=None, max_seq_len=None, causal=True, *,
                 query_start_loc_cpu=None, seq_lens_cpu=None, num_computed_tokens_cpu=None,
                 num_reqs=None, block_size=0, num_cache_blocks=0, encoder_seq_lens=None,
                 encoder_seq_lens_cpu=None, logits_indices_padded=None, num_logits_indices=None,
                 dcp_local_seq_lens=None, **ignored):
        qsl = query_start_loc if query_start_loc is not None else query_start_loc_cpu
        sl = seq_lens if seq_lens is not None else seq_lens_cpu
        nct = num_computed_tokens if num_computed_tokens is not None else num_computed_tokens_cpu
        enc = encoder_seq_lens if encoder_seq_lens is not None else encoder_seq_lens_cpu
        if qsl is None or sl is None:
            raise InvalidArgumentError(
                "CommonAttentionMetadata: query_start_loc and seq_lens are required", 1)
        qsl = as_int_array(qsl, np.int32, "query_start_loc", 1)
        sl = as_int_array(sl, np.int32, "seq_lens", 1)
        if num_reqs is None:
            num_reqs = max(len(qsl) - 1, 0)
        num_reqs = int(num_reqs)
        # padded persistent buffers: only the first num_reqs (+1) entries count
        qsl = qsl[:num_reqs + 1]
        sl = sl[:num_reqs]
        nct = as_int_array(nct, np.int32, "num_computed_tokens", 1)
        if nct is not None:
            nct = nct[:num_reqs]
        bt = as_int_array(block_table_tensor if block_table_tensor is not None
                          else np.zeros((num_reqs, 0), np.int32), np.int32,
                          "block_table_tensor", 2)
        sm = as_int_array(slot_mapping if slot_mapping is not None else [], np.int64,
                          "slot_mapping", 1)
        enc = as_int_array(enc, np.int32, "encoder_seq_lens", 1)
        lip = as_int_array(logits_indices_padded, np.int32, "logits_indices_padded", 1)
        dcp = as_int_array(dcp_local_seq_lens, np.int32, "dcp_local_seq_lens", 1)
        d = new_struct("vattn_metadata_desc_t", lib.vattn_metadata_desc_init)
        d.num_reqs = num_reqs
        if num_actual_tokens is None:
            num_actual_tokens = int(qsl[num_reqs]) if len(qsl) > num_reqs else 0
        d.num_actual_tokens = num_actual_tokens
        d.query_start_loc = ptr("int32_t", qsl)
        d.seq_lens = ptr("int32_t", sl)
        d.num_computed_tokens = ptr("int32_t", nct)
        d.block_table = ptr("int32_t", bt)
        d.block_table_rows = bt.shape[0]
        d.block_table_cols = bt.shape[1]
        d.slot_mapping = ptr("int64_t", sm)
        d.slot_mapping_len = len(sm)
        d.causal = int(bool(causal))
        d.max_query_len = -1 if max_query_len is None else int(max_query_len)
        d.max_seq_len = -1 if max_seq_len is None else int(max_seq_len)
        d.block_size = int(block_size or 0)
        d.num_cache_blocks = int(num_cache_blocks or 0)
        d.encoder_seq_lens = ptr("int32_t", enc)
        d.logits_indices_padded = ptr("int32_t", lip)
        d.logits_indices_len = 0 if lip is None else len(lip)
        d.num_logits_indices = int(num_logits_indices or 0) if lip is not None or \
            num_logits_indices else 0
        d.dcp_local_seq_lens = ptr("int32_t", dcp)
        out = ffi.new("vattn_metadata_t **")
        check(lib.vattn_metadata_create(out, d))
        self._set(out[0])

    @classmethod
    def _wrap(cls, raw):
        self = cls.__new__(cls)
        self._set(raw)
        return self

    def _set(self, raw):
        self._h = ffi.gc(raw, lib.vattn_metadata_destroy)
        d = new_struct("vattn_metadata_desc_t")
        check(lib.vattn_metadata_describe(self._h, d))
        n = d.num_reqs
        self.num_reqs = n
        self.num_actual_tokens = d.num_actual_tokens
        self.max_query_len = d.max_query_len
        self.max_seq_len = d.max_seq_len
        self.causal = bool(d.causal)
        self.block_size = d.block_size
        self.num_cache_blocks = d.num_cache_blocks
        self.query_start_loc = _ro(_copy(d.query_start_loc, n + 1, np.int32))
        self.seq_lens = _ro(_copy(d.seq_lens, n, np.int32))
        nct = _copy(d.num_computed_tokens, n, np.int32)
        if nct is None:
            nct = self.seq_lens - np.diff(self.query_start_loc)
        self.num_computed_tokens_cpu = _ro(nct.astype(np.int32))
        rows, cols = d.block_table_rows, d.block_table_cols
        bt = _copy(d.block_table, rows * cols, np.int32)
        self.block_table_tensor = _ro((bt if bt is not None else np.zeros(0, np.int32))
                                      .reshape(rows, cols))
        sm = _copy(d.slot_mapping, d.slot_mapping_len, np.int64)
        self.slot_mapping = _ro(sm if sm is not None else np.zeros(0, np.int64))
        enc = _copy(d.encoder_seq_lens, n, np.int32) if d.encoder_seq_lens != ffi.NULL else None
        self.encoder_seq_lens = None if enc is None else _ro(enc)
        lip = _copy(d.logits_indices_padded, d.logits_indices_len, np.int32) \
            if d.logits_indices_padded != ffi.NULL else None
        self.logits_indices_padded = None if lip is None else _ro(lip)
        self.num_logits_indices = d.num_logits_indices if lip is not None else None
        dcp = _copy(d.dcp_local_seq_lens, n, np.int32) if d.dcp_local_seq_lens != ffi.NULL \
            else None
        self.dcp_local_seq_lens = None if dcp is None else _ro(dcp)

    # host copies under vLLM's names (all arrays here are host arrays)
    @property
    def query_start_loc_cpu(self):
        return self.query_start_loc

    @property
    def seq_lens_cpu(self):
        return self.seq_lens

    @property
    def encoder_seq_lens_cpu(self):
        return self.encoder_seq_lens

    @property
    def num_computed_tokens(self):
        return self.num_computed_tokens_cpu

    def batch_size(self):
        return self.num_reqs

    def naive_query_lens(self):
        return np.diff(self.query_start_loc)

    def compute_num_computed_tokens(self):
        return self.num_computed_tokens_cpu

    def unpadded(self, num_tokens, num_reqs):
        """A copy truncated to num_tokens tokens and num_reqs requests."""
        out = ffi.new("vattn_metadata_t **")
        check(lib.vattn_metadata_unpadded(self._h, num_tokens, num_reqs, out))
        return CommonAttentionMetadata._wrap(out[0])

    def _local_block_table(self, block_table):
        """(Local-attention metadata only) re-gathers this metadata's local block
        table from another block table of the original's shape (vLLM's
        make_block_table closure); returns int32 [num_reqs, cols]."""
        bt = as_int_array(block_table, np.int32, "block_table", 2)
        cols = self.block_table_tensor.shape[1]
        out = np.zeros((self.num_reqs, cols), np.int32)
        check(lib.vattn_local_attention_update_block_table(
            self._h, ptr("int32_t", bt), bt.shape[0], bt.shape[1], ptr("int32_t", out),
            out.size))
        return out

    def replace(self, **changes):
        """dataclasses.replace: a new metadata with some fields changed."""
        fields = dict(query_start_loc=self.query_start_loc, seq_lens=self.seq_lens,
                      block_table_tensor=self.block_table_tensor, slot_mapping=self.slot_mapping,
                      num_computed_tokens=self.num_computed_tokens_cpu,
                      num_actual_tokens=self.num_actual_tokens, max_query_len=self.max_query_len,
                      max_seq_len=self.max_seq_len, causal=self.causal,
                      block_size=self.block_size, num_cache_blocks=self.num_cache_blocks,
                      encoder_seq_lens=self.encoder_seq_lens,
                      logits_indices_padded=self.logits_indices_padded,
                      num_logits_indices=self.num_logits_indices,
                      dcp_local_seq_lens=self.dcp_local_seq_lens)
        if "query_start_loc_cpu" in changes:
            changes["query_start_loc"] = changes.pop("query_start_loc_cpu")
        if "seq_lens_cpu" in changes:
            changes["seq_lens"] = changes.pop("seq_lens_cpu")
        if "num_computed_tokens_cpu" in changes:
            changes["num_computed_tokens"] = changes.pop("num_computed_tokens_cpu")
        if ("query_start_loc" in changes or "seq_lens" in changes) and \
                "num_computed_tokens" not in changes:
            fields["num_computed_tokens"] = None
        for k in ("num_actual_tokens", "max_query_len", "max_seq_len"):
            if "query_start_loc" in changes and k not in changes:
                fields[k] = None
        fields.update(changes)
        return CommonAttentionMetadata(**fields)

    def __repr__(self):
        return ("CommonAttentionMetadata(num_reqs=%d, num_actual_tokens=%d, max_query_len=%d, "
                "max_seq_len=%d, query_start_loc=%s, seq_lens=%s, causal=%s)"
                % (self.num_reqs, self.num_actual_tokens, self.max_query_len, self.max_seq_len,
                   self.query_start_loc.tolist(), self.seq_lens.tolist(), self.causal))


def _md(md, name="common_attn_metadata"):
    if not isinstance(md, CommonAttentionMetadata):
        raise InvalidArgumentError("%s: expected CommonAttentionMetadata, got %s"
                                   % (name, type(md).__name__), 1)
    return md._h


# ------------------------------------------------------------ batch utils ----
def split_decodes_and_prefills(common_attn_metadata, decode_threshold=1, require_uniform=False):
    """-> (num_decodes, num_prefills, num_decode_tokens, num_prefill_tokens)"""
    out = ffi.new("vattn_decode_prefill_split_t *")
    check(lib.vattn_split_decodes_and_prefills(_md(common_attn_metadata), decode_threshold,
                                               int(bool(require_uniform)), out))
    return (out.num_decodes, out.num_prefills, out.num_decode_tokens, out.num_prefill_tokens)


def split_decodes_prefills_and_extends(common_attn_metadata, decode_threshold=1):
    """-> (num_decodes, num_extends, num_prefills, num_decode_tokens,
    num_extend_tokens, num_prefill_tokens)"""
    out = ffi.new("vattn_decode_extend_prefill_split_t *")
    check(lib.vattn_split_decodes_prefills_and_extends(_md(common_attn_metadata),
                                                       decode_threshold, out))
    return (out.num_decodes, out.num_extends, out.num_prefills, out.num_decode_tokens,
            out.num_extend_tokens, out.num_prefill_tokens)


def _reorder(num_scheduled_tokens, num_computed_tokens, decode_threshold):
    s = as_int_array(num_scheduled_tokens, np.int32, "num_scheduled_tokens", 1)
    c = as_int_array(num_computed_tokens, np.int32, "num_computed_tokens", 1)
    n = len(s)
    if len(c) != n:
        raise InvalidArgumentError("num_computed_tokens: %d entries for %d requests"
                                   % (len(c), n), 1)
    swaps = np.zeros(2 * max(n, 1), np.int64)
    order = np.zeros(max(n, 1), np.int64)
    num_swaps = ffi.new("int64_t *")
    modified = ffi.new("int32_t *")
    check(lib.vattn_reorder_batch_to_split_decodes_and_prefills(
        ptr("int32_t", s), ptr("int32_t", c), n, decode_threshold, ptr("int64_t", swaps),
        num_swaps, ptr("int64_t", order), modified))
    k = num_swaps[0]
    return ([int(i) for i in order[:n]], [(int(swaps[2 * j]), int(swaps[2 * j + 1]))
                                         for j in range(k)], bool(modified[0]))


def reorder_batch_to_split_decodes_and_prefills(num_scheduled_tokens, num_computed_tokens,
                                                decode_threshold=1):
    """Era-B 3-way reorder (decode -> extend -> prefill) with minimal stable swaps,
    on per-request token counts.  Returns the new order: order[i] is the original
    index of the request that ends in slot i (use reorder_batch_swaps for the
    swap_states sequence and the 'modified' flag vLLM returns)."""
    return _reorder(num_scheduled_tokens, num_computed_tokens, decode_threshold)[0]


def reorder_batch_swaps(num_scheduled_tokens, num_computed_tokens, decode_threshold=1):
    """-> (swaps, modified): the swap_states(i, j) calls, in order, and whether anything moved."""
    _, swaps, modified = _reorder(num_scheduled_tokens, num_computed_tokens, decode_threshold)
    return swaps, modified


def make_local_attention_virtual_batches(attn_chunk_size, common_attn_metadata, block_size=0):
    """Chunked-local attention as virtual batches -> CommonAttentionMetadata."""
    out = ffi.new("vattn_metadata_t **")
    check(lib.vattn_make_local_attention_virtual_batches(
        attn_chunk_size, _md(common_attn_metadata), block_size, out))
    local = CommonAttentionMetadata._wrap(out[0])
    local.make_block_table = local._local_block_table
    return local


def _slice_bounds(s, n):
    if isinstance(s, slice):
        start, stop, step = s.indices(n)
        if step != 1:
            raise InvalidArgumentError("request_slice: step must be 1", 1)
        return start, stop
    start, stop = s
    return int(start), int(stop)


def slice_query_start_locs(query_start_loc, request_slice):
    """query_start_loc[start : stop + 1] - query_start_loc[start] (a new array)."""
    q = as_int_array(query_start_loc, np.int32, "query_start_loc", 1)
    start, stop = _slice_bounds(request_slice, max(len(q) - 1, 0))
    n = stop - start + 1
    out = np.zeros(max(n, 1), np.int32)
    check(lib.vattn_slice_query_start_locs(ptr("int32_t", q), len(q), start, stop,
                                           ptr("int32_t", out)))
    return out[:max(n, 0)]


class UBatchSlice:
    """A micro-batch: request_slice and token_slice (half-open python slices)."""

    def __init__(self, request_slice, token_slice):
        self.request_slice = request_slice
        self.token_slice = token_slice

    def is_empty(self):
        return (self.request_slice.start == self.request_slice.stop
                or self.token_slice.start == self.token_slice.stop)

    @property
    def num_tokens(self):
        return self.token_slice.stop - self.token_slice.start

    def __eq__(self, other):
        return (isinstance(other, UBatchSlice) and self.request_slice == other.request_slice
                and self.token_slice == other.token_slice)

    def __repr__(self):
        return "UBatchSlice(request_slice=%r, token_slice=%r)" % (self.request_slice,
                                                                 self.token_slice)

    def _to_c(self, c):
        c.request_start, c.request_stop = self.request_slice.start, self.request_slice.stop
        c.token_start, c.token_stop = self.token_slice.start, self.token_slice.stop

    @staticmethod
    def _from_c(c):
        return UBatchSlice(slice(c.request_start, c.request_stop),
                           slice(c.token_start, c.token_stop))


def maybe_create_ubatch_slices(should_ubatch, num_scheduled_tokens, num_tokens_padded,
                               num_reqs_padded, num_ubatches=2, split_point=None):
    """-> (ubatch_slices, ubatch_slices_padded), or (None, None) when not ubatching."""
    if not should_ubatch:
        return None, None
    s = as_int_array(num_scheduled_tokens, np.int32, "num_scheduled_tokens", 1)
    out = ffi.new("vattn_ubatch_slice_t[]", max(1, num_ubatches))
    outp = ffi.new("vattn_ubatch_slice_t[]", max(1, num_ubatches))
    check(lib.vattn_ubatch_slices_create(ptr("int32_t", s), len(s), num_tokens_padded,
                                         num_reqs_padded, num_ubatches,
                                         0 if split_point is None else split_point, out, outp))
    return ([UBatchSlice._from_c(out[i]) for i in range(num_ubatches)],
            [UBatchSlice._from_c(outp[i]) for i in range(num_ubatches)])


def split_attn_metadata(ubatch_slices, common_attn_metadata):
    """One CommonAttentionMetadata per UBatchSlice; the input is not modified."""
    slices = list(ubatch_slices)
    arr = ffi.new("vattn_ubatch_slice_t[]", max(1, len(slices)))
    for i, s in enumerate(slices):
        s._to_c(arr[i])
    out = ffi.new("vattn_metadata_t *[]", max(1, len(slices)))
    check(lib.vattn_split_attn_metadata(arr, len(slices), _md(common_attn_metadata), out))
    return [CommonAttentionMetadata._wrap(out[i]) for i in range(len(slices))]


def make_kv_sharing_fast_prefill_common_attn_metadata(common_attn_metadata):
    out = ffi.new("vattn_metadata_t **")
    check(lib.vattn_make_kv_sharing_fast_prefill_metadata(_md(common_attn_metadata), out))
    if out[0] == common_attn_metadata._h:   # returned unchanged (max_query_len == 1)
        return common_attn_metadata
    return CommonAttentionMetadata._wrap(out[0])


def _reshape(fn, tensor, *args):
    ta = TensorArgs()
    try:
        dl = ta.get(tensor, "query")
        out = ffi.new("DLTensor *")
        shape = ffi.new("int64_t[4]")
        strides = ffi.new("int64_t[4]")
        check(fn(dl, *args, out, shape, strides))
    except BaseException:
        ta.close()
        raise
    # the view keeps the borrowed input (ta) alive; its __del__ releases it
    view = DLPackView(out, ta, (shape, strides))
    return from_dlpack_like(tensor, view)


def reshape_query_for_spec_decode(query, batch_size):
    """[T, H, D] -> [B, T/B, H, D], a view of the same memory."""
    return _reshape(lib.vattn_reshape_query_for_spec_decode, query, batch_size)


def reshape_attn_output_for_spec_decode(attn_output):
    """[B, L, H, D] -> [B*L, H, D] (3-D input returned as is)."""
    return _reshape(lib.vattn_reshape_attn_output_for_spec_decode, attn_output)


def use_cascade_attention(common_prefix_len, query_lens, num_query_heads, num_kv_heads,
                          use_alibi, use_sliding_window, use_local_attention, num_sms,
                          dcp_world_size=1):
    q = as_int_array(query_lens, np.int32, "query_lens", 1)
    out = ffi.new("int32_t *")
    check(lib.vattn_use_cascade_attention(common_prefix_len, ptr("int32_t", q), len(q),
                                          num_query_heads, num_kv_heads, int(bool(use_alibi)),
                                          int(bool(use_sliding_window)),
                                          int(bool(use_local_attention)), num_sms,
                                          dcp_world_size, out))
    return bool(out[0])


def split_prefill_chunks(seq_lens_cpu, workspace_size, request_offset=0):
    """Greedy packing -> list of (start, end) request ranges."""
    s = as_int_array(seq_lens_cpu, np.int32, "seq_lens", 1)
    cap = max(len(s), 1)
    out = np.zeros(2 * cap, np.int64)
    n = ffi.new("int64_t *")
    check(lib.vattn_split_prefill_chunks(ptr("int32_t", s), len(s), workspace_size,
                                         request_offset, ptr("int64_t", out), cap, n))
    return [(int(out[2 * i]), int(out[2 * i + 1])) for i in range(n[0])]


def get_dcp_local_seq_lens(seq_lens, dcp_size=1, dcp_rank=None, cp_kv_cache_interleave_size=1):
    """[num_reqs] for one rank, or [num_reqs, dcp_size] for every rank."""
    s = as_int_array(seq_lens, np.int32, "seq_lens", 1)
    n = len(s)
    if dcp_rank is None:
        out = np.zeros(max(n * dcp_size, 1), np.int32)
    else:
        out = np.zeros(max(n, 1), np.int32)
    check(lib.vattn_get_dcp_local_seq_lens(ptr("int32_t", s), n, dcp_size,
                                           -1 if dcp_rank is None else dcp_rank,
                                           cp_kv_cache_interleave_size, ptr("int32_t", out)))
    if dcp_rank is None:
        return out[:n * dcp_size].reshape(n, dcp_size)
    return out[:n]


class PerLayerParameters:
    """Per-layer attention hyperparameters (vLLM PerLayerParameters)."""

    def __init__(self, window_left, logits_soft_cap, sm_scale, has_sinks=False,
                 has_same_window_lefts=None, has_same_all_params=None):
        self.window_left = window_left
        self.logits_soft_cap = logits_soft_cap
        self.sm_scale = sm_scale
        self.has_sinks = has_sinks
        self.has_same_window_lefts = has_same_window_lefts
        self.has_same_all_params = has_same_all_params

    def __eq__(self, other):   # the two flags are excluded, as in vLLM
        return isinstance(other, PerLayerParameters) and (
            self.window_left, self.logits_soft_cap, self.sm_scale, bool(self.has_sinks)) == (
            other.window_left, other.logits_soft_cap, other.sm_scale, bool(other.has_sinks))

    def __repr__(self):
        return ("PerLayerParameters(window_left=%r, logits_soft_cap=%r, sm_scale=%r, "
                "has_sinks=%r, has_same_window_lefts=%r, has_same_all_params=%r)"
                % (self.window_left, self.logits_soft_cap, self.sm_scale, self.has_sinks,
                   self.has_same_window_lefts, self.has_same_all_params))


def infer_global_hyperparameters(per_layer_params):
    """dict name -> PerLayerParameters (or a list) -> the first layer's params with
    has_same_window_lefts / has_same_all_params set (never raises on mismatch)."""
    layers = list(per_layer_params.values()) if isinstance(per_layer_params, dict) \
        else list(per_layer_params)
    arr = ffi.new("vattn_per_layer_params_t[]", max(1, len(layers)))
    for i, p in enumerate(layers):
        arr[i].window_left = -1 if p.window_left is None else p.window_left
        arr[i].logits_soft_cap = p.logits_soft_cap or 0.0
        arr[i].sm_scale = p.sm_scale
        arr[i].has_sinks = int(bool(p.has_sinks))
    out = ffi.new("vattn_global_params_t *")
    check(lib.vattn_infer_global_hyperparameters(arr, len(layers), out))
    first = layers[0]
    return PerLayerParameters(first.window_left, first.logits_soft_cap, first.sm_scale,
                              first.has_sinks, bool(out.has_same_window_lefts),
                              bool(out.has_same_all_params))
