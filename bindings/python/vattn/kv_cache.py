"""KV cache specs (vLLM kv_cache_interface names) and the paged KV cache."""
import threading

from ._dlpack import DLPackView, TensorArgs
from ._ffi import check, ffi, lib, new_struct
from ._types import (device_of, device_name, dtype_code, dtype_name, layout_code, layout_name,
                     as_int_array, ptr)
from .backends import get_backend
from .errors import InvalidArgumentError

import numpy as np

_KINDS = {}


class KVCacheSpec:
    """What one layer keeps in the cache per block (base of the vLLM spec classes)."""

    kind = None

    def __init__(self, block_size, num_kv_heads, head_size, dtype, *, sliding_window=None,
                 attention_chunk_size=None, page_size_padded=None, cache_dtype_str=None):
        self.block_size = int(block_size)
        self.num_kv_heads = int(num_kv_heads)
        self.head_size = int(head_size)
        self.dtype = dtype_name(dtype_code(dtype))
        self.sliding_window = sliding_window
        self.attention_chunk_size = attention_chunk_size
        self.page_size_padded = page_size_padded
        self.cache_dtype_str = cache_dtype_str

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.kind is not None:
            _KINDS[cls.kind] = cls

    # -- C conversion --
    def _to_c(self, c=None):
        if c is None:
            c = new_struct("vattn_kv_cache_spec_t", lib.vattn_kv_cache_spec_init)
        else:
            lib.vattn_kv_cache_spec_init(c)
            c.struct_size = ffi.sizeof("vattn_kv_cache_spec_t")
        c.kind = self.kind
        c.block_size = self.block_size
        c.num_kv_heads = self.num_kv_heads
        c.head_size = self.head_size
        c.dtype = dtype_code(self.dtype)
        c.sliding_window = self.sliding_window or 0
        c.attention_chunk_size = self.attention_chunk_size or 0
        c.mla_fp8_ds = int(self.cache_dtype_str == "fp8_ds_mla")
        c.page_size_padded = self.page_size_padded or 0
        return c

    @staticmethod
    def _from_c(c):
        cls = _KINDS.get(c.kind, KVCacheSpec)
        self = cls.__new__(cls)
        KVCacheSpec.__init__(self, c.block_size, c.num_kv_heads, c.head_size, c.dtype,
                             sliding_window=c.sliding_window or None,
                             attention_chunk_size=c.attention_chunk_size or None,
                             page_size_padded=c.page_size_padded or None,
                             cache_dtype_str="fp8_ds_mla" if c.mla_fp8_ds else None)
        if cls is KVCacheSpec:
            self.kind = c.kind
        return self

    # -- vLLM API --
    @property
    def page_size_bytes(self):
        out = ffi.new("int64_t *")
        check(lib.vattn_kv_cache_spec_page_size_bytes(self._to_c(), out))
        return out[0]

    def max_memory_usage_bytes(self, vllm_config=None, *, max_model_len=None,
                               max_num_batched_tokens=None, max_encoder_len=None,
                               dcp_world_size=None, pcp_world_size=None):
        """Worst-case bytes of one request.  Pass the limits as keywords, or a
        vllm_config-like object (model_config.max_model_len,
        scheduler_config.max_num_batched_tokens, ...)."""
        lim = new_struct("vattn_model_limits_t", lib.vattn_model_limits_init)
        if vllm_config is not None:
            mc = getattr(vllm_config, "model_config", vllm_config)
            sc = getattr(vllm_config, "scheduler_config", vllm_config)
            pc = getattr(vllm_config, "parallel_config", vllm_config)
            for field, obj, names in (
                    ("max_model_len", mc, ("max_model_len",)),
                    ("max_num_batched_tokens", sc, ("max_num_batched_tokens",)),
                    ("max_encoder_len", sc, ("max_num_encoder_input_tokens", "max_encoder_len")),
                    ("dcp_world_size", pc, ("decode_context_parallel_size", "dcp_world_size")),
                    ("pcp_world_size", pc, ("prefill_context_parallel_size", "pcp_world_size"))):
                for n in names:
                    v = getattr(obj, n, None)
                    if isinstance(v, int):
                        setattr(lim, field, v)
                        break
        for field, v in (("max_model_len", max_model_len),
                         ("max_num_batched_tokens", max_num_batched_tokens),
                         ("max_encoder_len", max_encoder_len), ("dcp_world_size", dcp_world_size),
                         ("pcp_world_size", pcp_world_size)):
            if v is not None:
                setattr(lim, field, v)
        out = ffi.new("int64_t *")
        check(lib.vattn_kv_cache_spec_max_memory_usage_bytes(self._to_c(), lim, out))
        return out[0]

    @classmethod
    def merge(cls, specs):
        """Merges the specs of one KV cache group (vLLM Spec.merge)."""
        specs = list(specs)
        arr = ffi.new("vattn_kv_cache_spec_t[]", max(1, len(specs)))
        for i, s in enumerate(specs):
            s._to_c(arr + i)
        out = new_struct("vattn_kv_cache_spec_t", lib.vattn_kv_cache_spec_init)
        check(lib.vattn_kv_cache_specs_merge(arr, len(specs), out))
        return KVCacheSpec._from_c(out)

    def _key(self):
        return (self.kind, self.block_size, self.num_kv_heads, self.head_size, self.dtype,
                self.sliding_window, self.attention_chunk_size, self.page_size_padded,
                self.cache_dtype_str)

    def __eq__(self, other):
        return isinstance(other, KVCacheSpec) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        extra = "".join(", %s=%r" % (k, getattr(self, k)) for k in (
            "sliding_window", "attention_chunk_size", "page_size_padded", "cache_dtype_str")
            if getattr(self, k) is not None)
        return "%s(block_size=%d, num_kv_heads=%d, head_size=%d, dtype=%r%s)" % (
            type(self).__name__, self.block_size, self.num_kv_heads, self.head_size, self.dtype,
            extra)


AttentionSpec = KVCacheSpec


class FullAttentionSpec(KVCacheSpec):
    kind = lib.VATTN_KV_SPEC_FULL

    def __init__(self, block_size, num_kv_heads, head_size, dtype, sliding_window=None,
                 attention_chunk_size=None, page_size_padded=None):
        super().__init__(block_size, num_kv_heads, head_size, dtype,
                         sliding_window=sliding_window, attention_chunk_size=attention_chunk_size,
                         page_size_padded=page_size_padded)


class SlidingWindowSpec(KVCacheSpec):
    kind = lib.VATTN_KV_SPEC_SLIDING_WINDOW

    def __init__(self, block_size, num_kv_heads, head_size, dtype, sliding_window,
                 page_size_padded=None):
        super().__init__(block_size, num_kv_heads, head_size, dtype,
                         sliding_window=sliding_window, page_size_padded=page_size_padded)


class ChunkedLocalAttentionSpec(KVCacheSpec):
    kind = lib.VATTN_KV_SPEC_CHUNKED_LOCAL

    def __init__(self, block_size, num_kv_heads, head_size, dtype, attention_chunk_size,
                 page_size_padded=None):
        super().__init__(block_size, num_kv_heads, head_size, dtype,
                         attention_chunk_size=attention_chunk_size,
                         page_size_padded=page_size_padded)


class MLAAttentionSpec(KVCacheSpec):
    kind = lib.VATTN_KV_SPEC_MLA

    def __init__(self, block_size, num_kv_heads, head_size, dtype, cache_dtype_str=None,
                 page_size_padded=None):
        super().__init__(block_size, num_kv_heads, head_size, dtype,
                         cache_dtype_str=cache_dtype_str, page_size_padded=page_size_padded)


class CrossAttentionSpec(KVCacheSpec):
    kind = lib.VATTN_KV_SPEC_CROSS_ATTENTION

    def __init__(self, block_size, num_kv_heads, head_size, dtype, page_size_padded=None):
        super().__init__(block_size, num_kv_heads, head_size, dtype,
                         page_size_padded=page_size_padded)


class EncoderOnlyAttentionSpec(KVCacheSpec):
    kind = lib.VATTN_KV_SPEC_ENCODER_ONLY

    def __init__(self, block_size, num_kv_heads, head_size, dtype, sliding_window=None,
                 page_size_padded=None):
        super().__init__(block_size, num_kv_heads, head_size, dtype,
                         sliding_window=sliding_window, page_size_padded=page_size_padded)


# --------------------------------------------------------------- the cache ----
def _layers(specs, kv_sharing_target):
    """(names or None, [spec], int32 targets or None) from a list or a name->spec dict."""
    if isinstance(specs, dict):
        names = list(specs)
        spec_list = [specs[n] for n in names]
        targets = None
        if kv_sharing_target:
            index = {n: i for i, n in enumerate(names)}
            targets = np.full(len(names), -1, dtype=np.int32)
            for layer, target in kv_sharing_target.items():
                if layer not in index or target not in index:
                    raise InvalidArgumentError("kv_sharing_target: unknown layer %r -> %r"
                                               % (layer, target), 1)
                targets[index[layer]] = index[target]
    else:
        names = None
        spec_list = list(specs)
        targets = None
        if kv_sharing_target is not None:
            targets = as_int_array([-1 if t is None else t for t in kv_sharing_target],
                                   np.int32, "kv_sharing_target", 1)
            if len(targets) != len(spec_list):
                raise InvalidArgumentError("kv_sharing_target: %d entries for %d layers"
                                           % (len(targets), len(spec_list)), 1)
    for i, s in enumerate(spec_list):
        if not isinstance(s, KVCacheSpec):
            raise InvalidArgumentError("specs[%d]: expected a KVCacheSpec, got %s"
                                       % (i, type(s).__name__), 1)
    arr = ffi.new("vattn_kv_cache_spec_t[]", max(1, len(spec_list)))
    for i, s in enumerate(spec_list):
        s._to_c(arr + i)
    return names, spec_list, arr, targets


def num_blocks_for_budget(specs, memory_budget_bytes, kv_sharing_target=None):
    """Blocks per layer that fit in memory_budget_bytes."""
    _, spec_list, arr, targets = _layers(specs, kv_sharing_target)
    out = ffi.new("int64_t *")
    check(lib.vattn_kv_cache_num_blocks_for_budget(arr, ptr("int32_t", targets), len(spec_list),
                                                   memory_budget_bytes, out))
    return out[0]


def _options(device, layout, zero_fill, num_blocks, memory_budget_bytes, backend):
    o = new_struct("vattn_kv_cache_options_t", lib.vattn_kv_cache_options_init)
    if device is not None:
        o.device_type, o.device_id = device_of(device)
    if layout is not None:
        o.layout = layout_code(layout)
    if zero_fill is not None:
        o.zero_fill = int(bool(zero_fill))
    if num_blocks is not None:
        o.num_blocks = num_blocks
    if memory_budget_bytes is not None:
        o.memory_budget_bytes = memory_budget_bytes
    if backend is not None:
        o.backend = get_backend(backend)._ptr
    return o


class KVCache:
    """The paged KV caches of a set of layers.

    ``specs`` is a list of KVCacheSpec (one per layer) or a dict
    ``{layer_name: spec}``; ``kv_sharing_target`` is a list (-1/None = own cache,
    else the index of an earlier layer) or a dict ``{layer_name: target_name}``.
    ``cache[i]`` / ``cache["layer.0"]`` / ``cache.layer(i)`` is that layer's
    cache as a DLPack view (same memory, keeps the cache alive).
    """

    def __init__(self, specs, kv_sharing_target=None, *, num_blocks=None,
                 memory_budget_bytes=None, device="cpu", layout=None, zero_fill=True,
                 backend=None):
        names, spec_list, arr, targets = _layers(specs, kv_sharing_target)
        opts = _options(device, layout, zero_fill, num_blocks, memory_budget_bytes, backend)
        out = ffi.new("vattn_kv_cache_t **")
        check(lib.vattn_kv_cache_create(out, arr, ptr("int32_t", targets), len(spec_list), opts))
        self._init(out[0], names, spec_list, None)

    @classmethod
    def from_tensors(cls, specs, tensors, kv_sharing_target=None, *, backend=None, layout=None):
        """A cache over caller-owned tensors (logical shape, any strides; None for
        sharing layers).  The tensors are borrowed for the cache's life."""
        names, spec_list, arr, targets = _layers(specs, kv_sharing_target)
        if isinstance(tensors, dict):
            tensors = [tensors.get(n) for n in names]
        tensors = list(tensors)
        if len(tensors) != len(spec_list):
            raise InvalidArgumentError("tensors: %d tensors for %d layers"
                                       % (len(tensors), len(spec_list)), 1)
        args = TensorArgs()
        try:
            dl = ffi.new("DLTensor *[]", max(1, len(tensors)))
            for i, t in enumerate(tensors):
                dl[i] = args.get(t, "tensors[%d]" % i, optional=True)
            opts = _options(None, layout, None, None, None, backend)
            if tensors and any(t is not None for t in tensors):
                first = next(i for i, t in enumerate(tensors) if t is not None)
                opts.device_type = dl[first].device.device_type
                opts.device_id = dl[first].device.device_id
            out = ffi.new("vattn_kv_cache_t **")
            check(lib.vattn_kv_cache_create_from_tensors(
                out, arr, ptr("int32_t", targets), len(spec_list),
                ffi.cast("const DLTensor *const *", dl), opts))
        except BaseException:
            args.close()
            raise
        self = cls.__new__(cls)
        self._init(out[0], names, spec_list, args)
        return self

    def _init(self, raw, names, specs, borrowed):
        self._h = ffi.gc(raw, lib.vattn_kv_cache_destroy)
        self._names = names
        self._specs = specs
        self._borrowed = borrowed    # TensorArgs holding caller tensors (from_tensors)
        self._lock = threading.Lock()
        self._exports = 0
        self._close_pending = False
        info = new_struct("vattn_kv_cache_info_t")
        check(lib.vattn_kv_cache_get_info(self._h, info))
        self.num_blocks = info.num_blocks
        self.total_bytes = info.total_bytes
        self.num_layers = info.num_layers
        self.num_groups = info.num_groups
        self.device_type = info.device_type
        self.device_id = info.device_id
        self.layout = layout_name(info.layout)

    # -- lifetime: exported views keep the memory alive --
    def _export_acquire(self):
        with self._lock:
            self._exports += 1

    def _export_release(self):
        with self._lock:
            self._exports -= 1
            do_close = self._exports == 0 and self._close_pending
        if do_close:
            self._destroy()

    def _destroy(self):
        h, self._h = self._h, None
        if h is not None:
            ffi.release(h)
        if self._borrowed is not None:
            self._borrowed.close()
            self._borrowed = None

    def close(self):
        """Frees the cache now, or when the last exported view is released."""
        with self._lock:
            pending = self._exports > 0
            self._close_pending = pending
        if not pending:
            self._destroy()

    @property
    def closed(self):
        return self._h is None or self._close_pending

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if self._h is None or self._close_pending:
            raise InvalidArgumentError("KVCache: the cache was closed", 1)
        return self._h

    # -- queries --
    @property
    def device(self):
        return device_name(self.device_type, self.device_id)

    @property
    def layer_names(self):
        return list(self._names) if self._names else None

    @property
    def specs(self):
        return list(self._specs)

    def _index(self, layer):
        if isinstance(layer, str):
            if not self._names or layer not in self._names:
                raise KeyError(layer)
            return self._names.index(layer)
        return int(layer)

    def layer_group(self, layer):
        out = ffi.new("int32_t *")
        check(lib.vattn_kv_cache_layer_group(self._handle(), self._index(layer), out))
        return out[0]

    def group_spec(self, group):
        out = new_struct("vattn_kv_cache_spec_t", lib.vattn_kv_cache_spec_init)
        check(lib.vattn_kv_cache_group_spec(self._handle(), group, out))
        return KVCacheSpec._from_c(out)

    def layer(self, layer):
        """Layer `layer`'s cache (logical shape, physical strides) as a view."""
        dl = ffi.new("DLTensor *")
        check(lib.vattn_kv_cache_layer_tensor(self._handle(), self._index(layer), dl))
        return KVCacheView(dl, self)

    def __getitem__(self, layer):
        return self.layer(layer)

    def __len__(self):
        return self.num_layers

    def __iter__(self):
        return (self.layer(i) for i in range(self.num_layers))

    def __repr__(self):
        return "<vattn.KVCache layers=%d groups=%d num_blocks=%d layout=%s device=%s>" % (
            self.num_layers, self.num_groups, self.num_blocks, self.layout, self.device)


class KVCacheView(DLPackView):
    """One layer's cache: ``np.from_dlpack(view)`` / ``torch.from_dlpack(view)``
    share its memory; the view (and anything made from it) keeps the cache alive."""

    @property
    def cache(self):
        return self._owner

    def __repr__(self):
        return "<vattn.KVCacheView shape=%s strides=%s dtype=%s device=%s>" % (
            self.shape, self.strides, self.dtype, self.device)
