"""Cache and merge operations (dispatched on the tensors' device)."""
import numpy as np

from ._dlpack import TensorArgs
from ._ffi import check, ffi, lib
from ._types import c_stream, kv_cache_dtype_code, as_int_array, ptr
from .errors import InvalidArgumentError


def _pairs(block_mapping):
    m = as_int_array(block_mapping, np.int64, "block_mapping")
    if m.size == 0:
        m = m.reshape(0, 2)
    if m.ndim != 2 or m.shape[1] != 2:
        raise InvalidArgumentError("block_mapping: expected shape [num_pairs, 2], got %s"
                                   % (m.shape,), 1)
    return np.ascontiguousarray(m)


def reshape_and_cache_flash(key, value, kv_cache, slot_mapping, kv_cache_dtype="auto",
                            k_scale=1.0, v_scale=1.0, *, stream=None):
    """Writes key/value [T, H, D] into kv_cache (logical 5-D) at slot_mapping
    (int64 [T'] on the cache's device; T' tokens are written, -1 skipped)."""
    with TensorArgs(stream) as ta:
        check(lib.vattn_reshape_and_cache(
            ta.get(key, "key"), ta.get(value, "value"), ta.get(kv_cache, "kv_cache"),
            ta.get(slot_mapping, "slot_mapping"), kv_cache_dtype_code(kv_cache_dtype),
            float(k_scale), float(v_scale), c_stream(stream)))


reshape_and_cache = reshape_and_cache_flash


def merge_attn_states(output, prefix_output, prefix_lse, suffix_output, suffix_lse,
                      output_lse=None, *, stream=None):
    """output[T,H,D] = LSE-weighted merge of two partial results (LSEs float32 [H,T])."""
    with TensorArgs(stream) as ta:
        check(lib.vattn_merge_attn_states(
            ta.get(output, "output"), ta.get(output_lse, "output_lse", optional=True),
            ta.get(prefix_output, "prefix_output"), ta.get(prefix_lse, "prefix_lse"),
            ta.get(suffix_output, "suffix_output"), ta.get(suffix_lse, "suffix_lse"),
            c_stream(stream)))
    return output


def copy_blocks(kv_caches, block_mapping, *, stream=None):
    """For every layer cache, copies block src to dst for each (src, dst) pair."""
    m = _pairs(block_mapping)
    caches = list(kv_caches)
    with TensorArgs(stream) as ta:
        arr = ta.array(caches, "kv_caches")
        check(lib.vattn_copy_blocks(ffi.cast("DLTensor *const *", arr), len(caches),
                                    ptr("int64_t", m), m.shape[0], c_stream(stream)))


def swap_blocks(src, dst, block_mapping, *, stream=None):
    """Copies whole blocks between two caches of the same shape (CPU <-> CUDA ...)."""
    m = _pairs(block_mapping)
    with TensorArgs(stream) as ta:
        check(lib.vattn_swap_blocks(ta.get(src, "src"), ta.get(dst, "dst"), ptr("int64_t", m),
                                    m.shape[0], c_stream(stream)))
