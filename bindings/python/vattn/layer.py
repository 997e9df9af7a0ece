"""Metadata builder and plan (v1), and the attention layer."""
import math

import numpy as np

from ._dlpack import TensorArgs, zeros_like
from ._ffi import check, ffi, lib, new_struct
from ._types import (attn_type_code, c_stream, device_of, dtype_code, dtype_name,
                     kv_cache_dtype_code, ATTN_TYPE_NAMES)
from .backends import AttentionCGSupport, Backend, get_attn_backend, get_backend
from .errors import InvalidArgumentError
from .metadata import CommonAttentionMetadata, _md

_NP_DTYPES = {"float32": np.float32, "float16": np.float16}


def _backend(backend, **selector):
    if backend is None:
        return get_attn_backend(**selector)
    return get_backend(backend)


class Plan:
    """A built run plan (persistent buffers sized at creation); the
    attn_metadata that Attention.forward takes.  Rebuilt in place by
    MetadataBuilder.build(..., plan=plan)."""

    def __init__(self, builder):
        out = ffi.new("vattn_plan_t **")
        check(lib.vattn_plan_create(out, builder._h))
        self._h = ffi.gc(out[0], lib.vattn_plan_destroy)
        self.builder = builder
        self.common_attn_metadata = None
        self.common_prefix_len = 0

    @property
    def num_actual_tokens(self):
        md = self.common_attn_metadata
        return None if md is None else md.num_actual_tokens

    @property
    def use_cascade(self):
        return self.common_prefix_len > 0

    def close(self):
        if self._h is not None:
            ffi.release(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<vattn.Plan backend=%s built=%s>" % (
            self.builder.backend.name, self.common_attn_metadata is not None)


class MetadataBuilder:
    """A backend's metadata builder (vLLM AttentionMetadataBuilder) for one KV
    cache group: build(common_prefix_len, common_attn_metadata, fast_build)
    returns a Plan."""

    def __init__(self, backend=None, num_heads=None, num_kv_heads=None, head_size=None,
                 block_size=16, *, kv_cache_spec=None, max_num_reqs=None, max_num_tokens=None,
                 max_blocks_per_req=None, device_id=0, num_threads=0, num_sms=0,
                 max_num_splits=0, kv_cache_dtype="auto", dtype="float32"):
        if kv_cache_spec is not None:
            num_kv_heads = num_kv_heads or kv_cache_spec.num_kv_heads
            head_size = head_size or kv_cache_spec.head_size
            block_size = kv_cache_spec.block_size
        if head_size is None or num_heads is None:
            raise InvalidArgumentError("MetadataBuilder: num_heads and head_size are required", 1)
        self.backend = _backend(backend, head_size=head_size, dtype=dtype, block_size=block_size)
        o = new_struct("vattn_builder_options_t", lib.vattn_builder_options_init)
        o.device_id = device_id
        o.num_heads = num_heads
        o.num_kv_heads = num_kv_heads or num_heads
        o.head_size = head_size
        o.block_size = block_size
        if max_num_reqs is not None:
            o.max_num_reqs = max_num_reqs
        if max_num_tokens is not None:
            o.max_num_tokens = max_num_tokens
        if max_blocks_per_req is not None:
            o.max_blocks_per_req = max_blocks_per_req
        o.num_threads = num_threads
        o.num_sms = num_sms
        o.max_num_splits = max_num_splits
        o.kv_cache_dtype = kv_cache_dtype_code(kv_cache_dtype)
        out = ffi.new("vattn_builder_t **")
        check(lib.vattn_builder_create(out, self.backend._ptr, o))
        self._h = ffi.gc(out[0], lib.vattn_builder_destroy)
        self.num_heads, self.num_kv_heads = num_heads, o.num_kv_heads
        self.head_size, self.block_size = head_size, block_size

    @property
    def cudagraph_support(self):
        out = ffi.new("int32_t *")
        check(lib.vattn_builder_cudagraph_support(self._h, out))
        return AttentionCGSupport(out[0])

    @property
    def reorder_batch_threshold(self):
        out = ffi.new("int32_t *")
        check(lib.vattn_builder_reorder_batch_threshold(self._h, out))
        return out[0] or None

    def make_plan(self):
        return Plan(self)

    def _plan(self, plan):
        if plan is None:
            return Plan(self)
        if not isinstance(plan, Plan):
            raise InvalidArgumentError("plan: expected a vattn Plan, got %s"
                                       % type(plan).__name__, 1)
        return plan

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False, *, plan=None,
              stream=None):
        p = self._plan(plan)
        check(lib.vattn_builder_build(self._h, p._h, common_prefix_len,
                                      _md(common_attn_metadata), int(bool(fast_build)),
                                      c_stream(stream)))
        p.common_attn_metadata = common_attn_metadata
        p.common_prefix_len = common_prefix_len
        return p

    def build_for_cudagraph_capture(self, common_attn_metadata, *, plan=None, stream=None):
        p = self._plan(plan)
        check(lib.vattn_builder_build_for_cudagraph_capture(
            self._h, p._h, _md(common_attn_metadata), c_stream(stream)))
        p.common_attn_metadata = common_attn_metadata
        p.common_prefix_len = 0
        return p

    def build_for_drafting(self, common_attn_metadata, draft_index, *, plan=None, stream=None):
        p = self._plan(plan)
        check(lib.vattn_builder_build_for_drafting(
            self._h, p._h, _md(common_attn_metadata), draft_index, c_stream(stream)))
        p.common_attn_metadata = common_attn_metadata
        p.common_prefix_len = 0
        return p

    def __repr__(self):
        return "<vattn.MetadataBuilder backend=%s heads=%d/%d head_size=%d block_size=%d>" % (
            self.backend.name, self.num_heads, self.num_kv_heads, self.head_size,
            self.block_size)


def _floats(x, n, name):
    if x is None:
        return None
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32).reshape(-1))
    if a.size != n:
        raise InvalidArgumentError("%s: expected %d values (num_heads), got %d"
                                   % (name, n, a.size), 1)
    return a


class Attention:
    """An attention layer (vLLM Attention / AttentionImpl).

    forward(query, key, value, kv_cache, attn_metadata) with attn_metadata a
    Plan from MetadataBuilder.build(); tensors are anything with __dlpack__.
    """

    def __init__(self, num_heads, head_size, scale=None, num_kv_heads=None, alibi_slopes=None,
                 sliding_window=None, kv_cache_dtype="auto", logits_soft_cap=None,
                 attn_type="decoder", sinks=None, kv_sharing_target_layer_name=None,
                 block_size=16, dtype="bfloat16", *, backend=None, device=None, prefix=""):
        self.num_heads = int(num_heads)
        self.head_size = int(head_size)
        self.num_kv_heads = int(num_kv_heads or num_heads)
        self.scale = float(scale) if scale else 1.0 / math.sqrt(head_size)
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.sliding_window = sliding_window
        self.logits_soft_cap = logits_soft_cap
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.block_size = block_size
        self.dtype = dtype_name(dtype_code(dtype))
        self.layer_name = prefix
        slopes = _floats(alibi_slopes, self.num_heads, "alibi_slopes")
        sinks_a = _floats(sinks, self.num_heads, "sinks")
        self.alibi_slopes, self.sinks = slopes, sinks_a
        feats = []
        if slopes is not None:
            feats.append("alibi")
        if sliding_window:
            feats.append("sliding_window")
        if logits_soft_cap:
            feats.append("soft_cap")
        if kv_sharing_target_layer_name is not None:
            feats.append("kv_sharing")
        self.backend = _backend(backend, head_size=self.head_size, dtype=self.dtype,
                                kv_cache_dtype=kv_cache_dtype, block_size=block_size,
                                has_sink=sinks_a is not None, attn_type=attn_type,
                                device=device, features=feats)
        o = new_struct("vattn_layer_options_t", lib.vattn_layer_options_init)
        o.num_heads = self.num_heads
        o.head_size = self.head_size
        o.num_kv_heads = self.num_kv_heads
        o.scale = self.scale
        o.dtype = dtype_code(self.dtype)
        o.kv_cache_dtype = kv_cache_dtype_code(kv_cache_dtype)
        o.attn_type = attn_type_code(attn_type)
        o.sliding_window = int(sliding_window or 0)
        o.logits_soft_cap = float(logits_soft_cap or 0.0)
        o.alibi_slopes = ffi.NULL if slopes is None else ffi.cast("float *", ffi.from_buffer(slopes))
        o.sinks = ffi.NULL if sinks_a is None else ffi.cast("float *", ffi.from_buffer(sinks_a))
        o.kv_sharing = int(kv_sharing_target_layer_name is not None)
        o.block_size = block_size
        out = ffi.new("vattn_layer_t **")
        check(lib.vattn_layer_create(out, self.backend._ptr, o))
        self._h = ffi.gc(out[0], lib.vattn_layer_destroy)

    def get_attn_backend(self):
        return self.backend

    def forward(self, query, key, value, kv_cache, attn_metadata, output=None, output_lse=None,
                k_scale=1.0, v_scale=1.0, *, stream=None):
        """Writes key/value into kv_cache through the plan's slot mapping (unless
        KV sharing or key/value are None), attends, writes output rows
        [0, num_actual_tokens) and returns `output` (allocated like query when None)."""
        if not isinstance(attn_metadata, Plan):
            raise InvalidArgumentError(
                "attn_metadata: expected a Plan from MetadataBuilder.build(), got %s"
                % type(attn_metadata).__name__, 1)
        with TensorArgs(stream) as ta:
            a = new_struct("vattn_forward_args_t", lib.vattn_forward_args_init)
            a.query = ta.get(query, "query")
            if output is None:
                rows = a.query.shape[0] if a.query.ndim > 0 else 0
                output = zeros_like(query, (rows, self.num_heads, self.head_size))
            a.key = ta.get(key, "key", optional=True)
            a.value = ta.get(value, "value", optional=True)
            a.kv_cache = ta.get(kv_cache, "kv_cache", optional=True)
            a.output = ta.get(output, "output")
            a.output_lse = ta.get(output_lse, "output_lse", optional=True)
            a.k_scale = float(k_scale)
            a.v_scale = float(v_scale)
            a.stream = c_stream(stream)
            check(lib.vattn_layer_forward(self._h, attn_metadata._h, a))
        return output

    __call__ = forward

    def __repr__(self):
        return ("<vattn.Attention heads=%d kv_heads=%d head_size=%d dtype=%s attn_type=%s "
                "backend=%s>" % (self.num_heads, self.num_kv_heads, self.head_size, self.dtype,
                                 self.attn_type, self.backend.name))
