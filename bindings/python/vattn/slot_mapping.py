"""Slot mapping: v0 per-sequence rules and the v1 block-table mapping."""
import numpy as np

from ._ffi import check, ffi, lib, new_struct
from ._types import as_int_array, ptr
from .errors import InvalidArgumentError

PAD_SLOT_ID = lib.VATTN_PAD_SLOT_ID


# ------------------------------------------------------------------ v0 ----
def compute_slot_mapping_start_idx(is_prompt, query_len, context_len, sliding_window):
    out = ffi.new("int64_t *")
    check(lib.vattn_slot_mapping_v0_start_idx(int(bool(is_prompt)), query_len, context_len,
                                              sliding_window or 0, out))
    return out[0]


def compute_slot_mapping(is_profile_run, slot_mapping, seq_id, seq_len, context_len, start_idx,
                         block_size, block_tables, num_cache_blocks=0):
    """vLLM v0 compute_slot_mapping: appends this sequence's slots to the list
    `slot_mapping` (block_tables: dict seq_id -> list of block ids, or None for a
    profile run).  Returns the list."""
    table = None
    if block_tables is not None and not is_profile_run:
        table = as_int_array(block_tables[seq_id] if isinstance(block_tables, dict)
                             else block_tables, np.int32, "block_tables", 1)
    need = max(int(seq_len), 0) + max(int(start_idx) - int(context_len), 0)
    buf = np.zeros(max(need, 1), np.int64)
    n = ffi.new("int64_t *")
    check(lib.vattn_slot_mapping_v0_compute(
        int(bool(is_profile_run)), seq_len, context_len, start_idx, block_size,
        ptr("int32_t", table), 0 if table is None else len(table), num_cache_blocks,
        ptr("int64_t", buf), len(buf), n))
    slot_mapping.extend(int(x) for x in buf[:n[0]])
    return slot_mapping


# ------------------------------------------------------------------ v1 ----
def compute_block_table_slot_mapping(block_table, query_start_loc, positions, block_size, *,
                                     num_blocks_per_row=None, num_cache_blocks=0,
                                     cp_world_size=1, cp_rank=0, cp_interleave=1, out=None,
                                     num_reqs=None):
    """Slots of the tokens of a batch: block_table[r][pos // bs] * bs + pos % bs
    (with context-parallel interleaving when cp_world_size > 1).  `out` (int64,
    length >= the token count) receives them and its tail is set to PAD_SLOT_ID;
    returns `out` (a new array when not given)."""
    bt = as_int_array(block_table, np.int32, "block_table", 2)
    qsl = as_int_array(query_start_loc, np.int32, "query_start_loc", 1)
    pos = as_int_array(positions, np.int64, "positions", 1)
    nbr = as_int_array(num_blocks_per_row, np.int32, "num_blocks_per_row", 1)
    if num_reqs is None:
        num_reqs = max(len(qsl) - 1, 0)
    num_tokens = int(qsl[num_reqs]) if len(qsl) > num_reqs else 0
    a = new_struct("vattn_slot_mapping_args_t", lib.vattn_slot_mapping_args_init)
    a.block_table = ptr("int32_t", bt)
    a.num_rows = bt.shape[0]
    a.row_stride = bt.shape[1]
    a.num_blocks_per_row = ptr("int32_t", nbr)
    a.query_start_loc = ptr("int32_t", qsl)
    a.num_reqs = num_reqs
    a.positions = ptr("int64_t", pos)
    a.num_tokens = num_tokens
    a.block_size = block_size
    a.num_cache_blocks = num_cache_blocks
    a.cp_world_size = cp_world_size
    a.cp_rank = cp_rank
    a.cp_interleave = cp_interleave
    if out is None:
        out = np.empty(num_tokens, np.int64)
    if not isinstance(out, np.ndarray) or out.dtype != np.int64 or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise InvalidArgumentError("out: expected a writable contiguous int64 numpy array", 1)
    check(lib.vattn_slot_mapping_compute(a, ptr("int64_t", out), out.size))
    return out


class BlockTable:
    """vLLM v1 BlockTable on the host: rows of block ids per request, and
    compute_slot_mapping(num_reqs, query_start_loc, positions)."""

    def __init__(self, block_size, max_num_reqs, max_num_blocks_per_req,
                 max_num_batched_tokens, num_cache_blocks=0, cp_world_size=1, cp_rank=0,
                 cp_interleave=1):
        self.block_size = block_size
        self.max_num_reqs = max_num_reqs
        self.max_num_blocks_per_req = max_num_blocks_per_req
        self.max_num_batched_tokens = max_num_batched_tokens
        self.num_cache_blocks = num_cache_blocks
        self.cp = (cp_world_size, cp_rank, cp_interleave)
        self.block_table = np.zeros((max_num_reqs, max_num_blocks_per_req), np.int32)
        self.num_blocks_per_row = np.zeros(max_num_reqs, np.int32)
        self.slot_mapping = np.full(max_num_batched_tokens, PAD_SLOT_ID, np.int64)

    def append_row(self, block_ids, row_idx):
        if not block_ids:
            return
        n = len(block_ids)
        start = self.num_blocks_per_row[row_idx]
        if start + n > self.max_num_blocks_per_req:
            raise InvalidArgumentError("append_row: row %d would hold %d blocks (max %d)"
                                       % (row_idx, start + n, self.max_num_blocks_per_req), 1)
        self.block_table[row_idx, start:start + n] = block_ids
        self.num_blocks_per_row[row_idx] += n

    def add_row(self, block_ids, row_idx):
        self.num_blocks_per_row[row_idx] = 0
        self.append_row(block_ids, row_idx)

    def clear_row(self, row_idx):
        n = self.num_blocks_per_row[row_idx]
        self.block_table[row_idx, :n] = 0
        self.num_blocks_per_row[row_idx] = 0

    def move_row(self, src, tgt):
        n = self.num_blocks_per_row[src]
        self.block_table[tgt, :n] = self.block_table[src, :n]
        self.block_table[tgt, n:] = 0
        self.num_blocks_per_row[tgt] = n

    def swap_row(self, src, tgt):
        self.block_table[[src, tgt]] = self.block_table[[tgt, src]]
        self.num_blocks_per_row[[src, tgt]] = self.num_blocks_per_row[[tgt, src]]

    def compute_slot_mapping(self, num_reqs, query_start_loc, positions):
        """Fills self.slot_mapping (tail = PAD_SLOT_ID) and returns it."""
        w, r, i = self.cp
        return compute_block_table_slot_mapping(
            self.block_table, query_start_loc, positions, self.block_size,
            num_blocks_per_row=self.num_blocks_per_row, num_cache_blocks=self.num_cache_blocks,
            cp_world_size=w, cp_rank=r, cp_interleave=i, out=self.slot_mapping,
            num_reqs=num_reqs)

    def get_numpy_array(self):
        return self.block_table
