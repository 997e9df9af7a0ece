"""vattn: vLLM's attention stack (paged KV cache, slot mapping, batch metadata,
backends, attention layers) as a C library, from Python.

Names follow vLLM so that ported code changes only its imports::

    from vattn import (CommonAttentionMetadata, split_decodes_and_prefills,
                       FullAttentionSpec, KVCache, MetadataBuilder, Attention)

Tensors are anything with ``__dlpack__`` (numpy, torch, cupy); nothing is copied.
"""
from ._ffi import ffi, lib, BINDING_VERSION_MAJOR, last_error_message
from .errors import (VattnError, InvalidArgumentError, UnsupportedError, OutOfMemoryError,
                     WorkspaceTooSmallError, BufferTooSmallError, CudaError, NotFoundError,
                     InternalError, NoDeviceError, MissingFunctionError, error_class)
from ._ffi import MISSING_FUNCTIONS
from ._types import (DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_FP8_E4M3,
                     DTYPE_FP8_E5M2, DTYPE_UINT8)
from ._dlpack import DLPackView
from .backends import (AttentionCGSupport, AttentionType, Backend, backends, backend_count,
                       get_backend, get_attn_backend, get_kv_cache_layout, set_kv_cache_layout,
                       get_kv_cache_shape, get_kv_cache_stride_order, dtype_size,
                       cuda_device_count)
from .kv_cache import (KVCacheSpec, AttentionSpec, FullAttentionSpec, SlidingWindowSpec,
                       ChunkedLocalAttentionSpec, MLAAttentionSpec, CrossAttentionSpec,
                       EncoderOnlyAttentionSpec, KVCache, KVCacheView, num_blocks_for_budget)
from .slot_mapping import (PAD_SLOT_ID, compute_slot_mapping, compute_slot_mapping_start_idx,
                           compute_block_table_slot_mapping, BlockTable)
from .metadata import (CommonAttentionMetadata, split_decodes_and_prefills,
                       split_decodes_prefills_and_extends,
                       reorder_batch_to_split_decodes_and_prefills, reorder_batch_swaps,
                       make_local_attention_virtual_batches, slice_query_start_locs, UBatchSlice,
                       maybe_create_ubatch_slices, split_attn_metadata,
                       make_kv_sharing_fast_prefill_common_attn_metadata,
                       reshape_query_for_spec_decode, reshape_attn_output_for_spec_decode,
                       use_cascade_attention, split_prefill_chunks, get_dcp_local_seq_lens,
                       PerLayerParameters, infer_global_hyperparameters)
from .v0 import (V0AttentionMetadata, V0MetadataBuilder, CommonAttentionState,
                 get_num_prefill_decode_query_kv_tokens, get_seq_len_block_table_args)
from .layer import MetadataBuilder, Plan, Attention
from .ops import (reshape_and_cache_flash, reshape_and_cache, merge_attn_states, copy_blocks,
                  swap_blocks)

__version__ = "0.1.0"

# vLLM's names for the layout constants and metadata classes
KVCacheLayoutType = str
AttentionMetadataBuilder = MetadataBuilder
AttentionImpl = Attention


def version():
    """(major, minor, patch) of the loaded libvattn."""
    v = lib.vattn_version()
    return ((v >> 16) & 0xFFFF, (v >> 8) & 0xFF, v & 0xFF)


def version_string():
    return ffi.string(lib.vattn_version_string()).decode()


def status_string(status):
    return ffi.string(lib.vattn_status_string(status)).decode()


def clear_last_error():
    lib.vattn_clear_last_error()
