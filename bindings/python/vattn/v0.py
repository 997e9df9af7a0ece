"""vLLM v0 attention metadata: the per-sequence builder, the metadata, its
helpers and the CUDA-graph state (CommonAttentionState)."""
import numpy as np

from ._ffi import check, ffi, lib, new_struct
from ._types import as_int_array, attn_type_code, ptr
from .errors import InvalidArgumentError


def _arr(p, n, dtype):
    if p == ffi.NULL:
        return None
    if n <= 0:
        return np.zeros(0, dtype)
    a = np.frombuffer(ffi.buffer(p, n * np.dtype(dtype).itemsize), dtype=dtype).copy()
    a.flags.writeable = False
    return a


class V0AttentionMetadata:
    """vLLM v0 AttentionMetadata (prefills first, then decodes)."""

    _INTS = ("num_prefills", "num_prefill_tokens", "num_decode_tokens", "max_query_len",
             "max_prefill_seq_len", "max_decode_seq_len", "max_decode_query_len",
             "num_encoder_tokens", "max_encoder_seq_len")

    def __init__(self, *, num_prefills, num_prefill_tokens, num_decode_tokens, slot_mapping,
                 seq_lens, block_tables, context_lens=None, query_start_loc=None,
                 seq_start_loc=None, max_query_len=0, max_prefill_seq_len=0,
                 max_decode_seq_len=0, max_decode_query_len=1, use_cuda_graph=False,
                 encoder_seq_lens=None, num_encoder_tokens=0, max_encoder_seq_len=0,
                 cross_block_tables=None, **ignored):
        sm = as_int_array(slot_mapping, np.int64, "slot_mapping", 1)
        sl = as_int_array(seq_lens, np.int32, "seq_lens", 1)
        n = len(sl)
        bt = as_int_array(block_tables if block_tables is not None
                          else np.zeros((n, 0), np.int32), np.int32, "block_tables", 2)
        cl = as_int_array(context_lens, np.int32, "context_lens", 1)
        qsl = as_int_array(query_start_loc, np.int32, "query_start_loc", 1)
        ssl = as_int_array(seq_start_loc, np.int32, "seq_start_loc", 1)
        enc = as_int_array(encoder_seq_lens, np.int32, "encoder_seq_lens", 1)
        cbt = as_int_array(cross_block_tables, np.int32, "cross_block_tables", 2)
        d = new_struct("vattn_v0_metadata_desc_t", lib.vattn_v0_metadata_desc_init)
        d.num_prefills, d.num_prefill_tokens = num_prefills, num_prefill_tokens
        d.num_decode_tokens, d.num_seqs = num_decode_tokens, n
        d.slot_mapping, d.slot_mapping_len = ptr("int64_t", sm), len(sm)
        d.seq_lens, d.context_lens = ptr("int32_t", sl), ptr("int32_t", cl)
        d.query_start_loc, d.seq_start_loc = ptr("int32_t", qsl), ptr("int32_t", ssl)
        d.block_tables, d.block_tables_cols = ptr("int32_t", bt), bt.shape[1]
        d.max_query_len, d.max_prefill_seq_len = max_query_len, max_prefill_seq_len
        d.max_decode_seq_len, d.max_decode_query_len = max_decode_seq_len, max_decode_query_len
        d.use_cuda_graph = int(bool(use_cuda_graph))
        d.encoder_seq_lens = ptr("int32_t", enc)
        d.num_encoder_tokens, d.max_encoder_seq_len = num_encoder_tokens, max_encoder_seq_len
        d.cross_block_tables = ptr("int32_t", cbt)
        d.cross_block_tables_cols = 0 if cbt is None else cbt.shape[1]
        out = ffi.new("vattn_v0_metadata_t **")
        check(lib.vattn_v0_metadata_create(out, d))
        self._set(out[0])

    @classmethod
    def _wrap(cls, raw, owner=None):
        self = cls.__new__(cls)
        self._set(raw, owner)
        return self

    def _set(self, raw, owner=None):
        self._h = ffi.gc(raw, lib.vattn_v0_metadata_destroy)
        self._owner = owner
        d = new_struct("vattn_v0_metadata_desc_t")
        check(lib.vattn_v0_metadata_describe(self._h, d))
        for k in self._INTS:
            setattr(self, k, getattr(d, k))
        n = d.num_seqs
        self.num_seqs = n
        self.use_cuda_graph = bool(d.use_cuda_graph)
        self.slot_mapping = _arr(d.slot_mapping, d.slot_mapping_len, np.int64)
        self.seq_lens = _arr(d.seq_lens, n, np.int32)
        self.context_lens = _arr(d.context_lens, n, np.int32)
        self.query_start_loc = _arr(d.query_start_loc, n + 1, np.int32)
        self.seq_start_loc = _arr(d.seq_start_loc, n + 1, np.int32)
        bt = _arr(d.block_tables, n * d.block_tables_cols, np.int32)
        self.block_tables = None if bt is None else bt.reshape(n, d.block_tables_cols)
        self.encoder_seq_lens = _arr(d.encoder_seq_lens, n, np.int32)
        cbt = _arr(d.cross_block_tables, n * d.cross_block_tables_cols, np.int32)
        self.cross_block_tables = None if cbt is None else cbt.reshape(n, d.cross_block_tables_cols)
        self.seq_lens_tensor = self.seq_lens
        self.context_lens_tensor = self.context_lens

    @property
    def num_decodes(self):
        return self.num_seqs - self.num_prefills

    def __repr__(self):
        return ("V0AttentionMetadata(num_prefills=%d, num_prefill_tokens=%d, "
                "num_decode_tokens=%d, seq_lens=%s)" % (
                    self.num_prefills, self.num_prefill_tokens, self.num_decode_tokens,
                    None if self.seq_lens is None else self.seq_lens.tolist()))


def _v0(md):
    if not isinstance(md, V0AttentionMetadata):
        raise InvalidArgumentError("attn_metadata: expected V0AttentionMetadata, got %s"
                                   % type(md).__name__, 1)
    return md._h


def get_num_prefill_decode_query_kv_tokens(attn_metadata, attn_type):
    """-> (num_prefill_query_tokens, num_prefill_kv_tokens, num_decode_query_tokens)"""
    out = ffi.new("int64_t[3]")
    check(lib.vattn_v0_get_num_prefill_decode_query_kv_tokens(_v0(attn_metadata),
                                                              attn_type_code(attn_type), out))
    return out[0], out[1], out[2]


def get_seq_len_block_table_args(attn_metadata, is_prompt, attn_type):
    """-> (seq_lens, max_seq_len, block_tables) for the kind of attention."""
    sl = ffi.new("int32_t **")
    n = ffi.new("int64_t *")
    mx = ffi.new("int32_t *")
    bt = ffi.new("int32_t **")
    cols = ffi.new("int64_t *")
    check(lib.vattn_v0_get_seq_len_block_table_args(
        _v0(attn_metadata), int(bool(is_prompt)), attn_type_code(attn_type),
        ffi.cast("const int32_t **", sl), n, mx, ffi.cast("const int32_t **", bt), cols))
    seq_lens = _arr(sl[0], n[0], np.int32)
    table = _arr(bt[0], n[0] * cols[0], np.int32)
    if table is not None:
        table = table.reshape(n[0], cols[0])
    return seq_lens, mx[0], table


class V0MetadataBuilder:
    """vLLM v0 CommonMetadataBuilder: add_seq(...) per sequence, then build()."""

    def __init__(self, block_size, sliding_window=None, chunked_prefill_enabled=False,
                 num_cache_blocks=0, max_blocks_per_seq=None):
        o = new_struct("vattn_v0_builder_options_t", lib.vattn_v0_builder_options_init)
        o.block_size = block_size
        o.sliding_window = sliding_window or 0
        o.chunked_prefill_enabled = int(bool(chunked_prefill_enabled))
        o.num_cache_blocks = num_cache_blocks
        if max_blocks_per_seq is not None:
            o.max_blocks_per_seq = max_blocks_per_seq
        out = ffi.new("vattn_v0_builder_t **")
        check(lib.vattn_v0_builder_create(out, o))
        self._h = ffi.gc(out[0], lib.vattn_v0_builder_destroy)
        self.block_size = block_size

    def add_seq(self, is_prompt, token_len, seq_len, query_len, context_len, block_table=None,
                curr_seq_len=None, curr_sliding_window_blocks=0, prefix_cache_hit=False):
        bt = as_int_array(block_table, np.int32, "block_table", 1)
        s = new_struct("vattn_v0_seq_t", lib.vattn_v0_seq_init)
        s.is_prompt = int(bool(is_prompt))
        s.token_len = token_len
        s.seq_len = seq_len
        s.curr_seq_len = seq_len if curr_seq_len is None else curr_seq_len
        s.query_len = query_len
        s.context_len = context_len
        s.curr_sliding_window_blocks = curr_sliding_window_blocks
        s.prefix_cache_hit = int(bool(prefix_cache_hit))
        s.block_table = ptr("int32_t", bt)
        s.block_table_len = 0 if bt is None else len(bt)
        check(lib.vattn_v0_builder_add_seq(self._h, s))

    def build(self, seq_lens, query_lens, cuda_graph_pad_size=-1, batch_size=-1):
        sl = as_int_array(seq_lens, np.int32, "seq_lens", 1)
        ql = as_int_array(query_lens, np.int32, "query_lens", 1)
        if len(sl) != len(ql):
            raise InvalidArgumentError("query_lens: %d entries for %d sequences"
                                       % (len(ql), len(sl)), 1)
        out = ffi.new("vattn_v0_metadata_t **")
        check(lib.vattn_v0_builder_build(self._h, ptr("int32_t", sl), ptr("int32_t", ql),
                                         len(sl), cuda_graph_pad_size, batch_size, out))
        return V0AttentionMetadata._wrap(out[0])


class CommonAttentionState:
    """CUDA-graph state (vLLM CommonAttentionState): persistent decode buffers."""

    def __init__(self, max_batch_size, max_blocks_per_seq, max_seq_len_to_capture=8192):
        out = ffi.new("vattn_graph_state_t **")
        check(lib.vattn_graph_state_create(out, max_batch_size, max_blocks_per_seq,
                                           max_seq_len_to_capture))
        self._h = ffi.gc(out[0], lib.vattn_graph_state_destroy)

    def graph_capture_get_metadata_for_batch(self, batch_size):
        out = ffi.new("vattn_v0_metadata_t **")
        check(lib.vattn_graph_state_metadata_for_batch(self._h, batch_size, out))
        return V0AttentionMetadata._wrap(out[0], owner=self)

    def prepare_graph_input_buffers(self, attn_metadata):
        check(lib.vattn_graph_state_prepare_replay(self._h, _v0(attn_metadata)))
