"""Backends: registry, selector (get_attn_backend), KV cache shape / stride order,
and the process-wide KV cache layout."""
import enum

from ._ffi import check, ffi, lib, new_struct
from ._types import (attn_type_code, device_of, dtype_code, dtype_name, kv_cache_dtype_code,
                     layout_code, layout_name, DTYPE_NAMES, KV_CACHE_DTYPE_NAMES,
                     ATTN_TYPE_NAMES)


class AttentionCGSupport(enum.IntEnum):
    """CUDA-graph support level of a metadata builder (vLLM era B)."""
    NEVER = lib.VATTN_CUDAGRAPH_NEVER
    UNIFORM_SINGLE_TOKEN_DECODE = lib.VATTN_CUDAGRAPH_UNIFORM_SINGLE_TOKEN_DECODE
    UNIFORM_BATCH = lib.VATTN_CUDAGRAPH_UNIFORM_BATCH
    ALWAYS = lib.VATTN_CUDAGRAPH_ALWAYS


class AttentionType:
    """vLLM AttentionType names (strings, as in vLLM)."""
    DECODER = "decoder"
    ENCODER = "encoder"
    ENCODER_ONLY = "encoder_only"
    ENCODER_DECODER = "encoder_decoder"


_FEATURES = {"alibi": lib.VATTN_FEATURE_ALIBI, "sliding_window": lib.VATTN_FEATURE_SLIDING_WINDOW,
             "soft_cap": lib.VATTN_FEATURE_SOFT_CAP, "sinks": lib.VATTN_FEATURE_SINKS,
             "fp8_kv_cache": lib.VATTN_FEATURE_FP8_KV_CACHE,
             "lse_output": lib.VATTN_FEATURE_LSE_OUTPUT, "cascade": lib.VATTN_FEATURE_CASCADE,
             "mla": lib.VATTN_FEATURE_MLA, "kv_sharing": lib.VATTN_FEATURE_KV_SHARING}


def _bits(mask, names):
    return tuple(n for code, n in sorted(names.items()) if mask & (1 << code))


class Backend:
    """An attention backend (immutable, owned by the library)."""

    def __init__(self, ptr):
        self._ptr = ptr
        info = new_struct("vattn_backend_info_t")
        check(lib.vattn_backend_get_info(ptr, info))
        self.name = ffi.string(info.name).decode()
        self.device_type = info.device_type
        self.cudagraph_support = AttentionCGSupport(info.cudagraph_support)
        self.reorder_batch_threshold = info.reorder_batch_threshold or None
        self.block_size_multiple = info.block_size_multiple
        self.max_head_size = info.max_head_size
        self.head_size_multiple = info.head_size_multiple
        self.supported_dtypes = _bits(info.dtypes, DTYPE_NAMES)
        self.supported_kv_cache_dtypes = _bits(info.kv_cache_dtypes, KV_CACHE_DTYPE_NAMES)
        self.supported_attn_types = _bits(info.attn_types, ATTN_TYPE_NAMES)
        self.features = frozenset(n for n, b in _FEATURES.items() if info.features & b)
        self.feature_bits = info.features
        self.head_sizes = tuple(info.head_sizes[i] for i in range(info.num_head_sizes))

    def get_name(self):
        return self.name

    def get_supported_head_sizes(self):
        return list(self.head_sizes)

    def supports_head_size(self, head_size):
        return (0 < head_size <= self.max_head_size
                and head_size % max(1, self.head_size_multiple) == 0)

    def supports_block_size(self, block_size):
        return block_size > 0 and block_size % max(1, self.block_size_multiple) == 0

    def get_kv_cache_shape(self, num_blocks, block_size, num_kv_heads, head_size,
                           cache_dtype_str="auto", use_mla=False):
        """Logical per-layer cache shape: (2, num_blocks, block_size, num_kv_heads,
        head_size), or (num_blocks, block_size, head_size) with use_mla."""
        shape = ffi.new("int64_t[6]")
        ndim = ffi.new("int32_t *")
        check(lib.vattn_backend_kv_cache_shape(self._ptr, num_blocks, block_size, num_kv_heads,
                                               head_size, int(bool(use_mla)), shape, ndim))
        return tuple(shape[i] for i in range(ndim[0]))

    def get_kv_cache_stride_order(self, include_num_layers_dimension=False, layout=None):
        """Physical order of the logical dims for `layout` (default: the current
        get_kv_cache_layout())."""
        code = layout_code(layout)
        if code is None:
            code = _layout_now()
        order = ffi.new("int32_t[6]")
        ndim = ffi.new("int32_t *")
        check(lib.vattn_backend_kv_cache_stride_order(
            self._ptr, code, int(bool(include_num_layers_dimension)), order, ndim))
        return tuple(order[i] for i in range(ndim[0]))

    def __eq__(self, other):
        return isinstance(other, Backend) and self._ptr == other._ptr

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "<vattn.Backend %s>" % self.name


def backend_count():
    return lib.vattn_backend_count()


def backends():
    """Every registered backend, in registration order (CPU first)."""
    out = []
    for i in range(lib.vattn_backend_count()):
        p = ffi.new("const vattn_backend_t **")
        check(lib.vattn_backend_get(i, p))
        out.append(Backend(p[0]))
    return out


def get_backend(name_or_index):
    """A backend by case-insensitive name (NotFoundError if none) or index."""
    if isinstance(name_or_index, Backend):
        return name_or_index
    p = ffi.new("const vattn_backend_t **")
    if isinstance(name_or_index, int):
        check(lib.vattn_backend_get(name_or_index, p))
    else:
        check(lib.vattn_backend_find(str(name_or_index).encode(), p))
    return Backend(p[0])


def get_attn_backend(head_size, dtype, kv_cache_dtype="auto", block_size=16, use_mla=False,
                     has_sink=False, attn_type="decoder", device=None, features=()):
    """vLLM get_attn_backend: the first backend that supports everything asked
    for (VATTN_ATTENTION_BACKEND=<name> forces one).  UnsupportedError lists
    every backend and why it was rejected."""
    sel = new_struct("vattn_backend_selector_t", lib.vattn_backend_selector_init)
    sel.head_size = head_size
    sel.dtype = dtype_code(dtype)
    sel.kv_cache_dtype = kv_cache_dtype_code(kv_cache_dtype)
    sel.block_size = block_size if block_size is not None else 16
    sel.use_mla = int(bool(use_mla))
    sel.has_sink = int(bool(has_sink))
    sel.attn_type = attn_type_code(attn_type)
    sel.device_type = device_of(device)[0]
    bits = 0
    if isinstance(features, int):
        bits = features
    else:
        for f in features:
            bits |= _FEATURES[f] if isinstance(f, str) else int(f)
    sel.features = bits
    p = ffi.new("const vattn_backend_t **")
    check(lib.vattn_get_attn_backend(sel, p))
    return Backend(p[0])


def _layout_now():
    out = ffi.new("int32_t *")
    check(lib.vattn_get_kv_cache_layout(out))
    return out[0]


def get_kv_cache_layout():
    """'NHD' or 'HND': the override, else VATTN_KV_CACHE_LAYOUT, else 'NHD'."""
    return layout_name(_layout_now())


def set_kv_cache_layout(cache_layout):
    """Sets the process-wide override ('NHD'/'HND'); None removes it.  Takes effect at once."""
    check(lib.vattn_set_kv_cache_layout(-1 if cache_layout is None else layout_code(cache_layout)))


def get_kv_cache_shape(backend, num_blocks, block_size, num_kv_heads, head_size,
                       cache_dtype_str="auto", use_mla=False):
    return get_backend(backend).get_kv_cache_shape(num_blocks, block_size, num_kv_heads,
                                                   head_size, cache_dtype_str, use_mla)


def get_kv_cache_stride_order(backend, include_num_layers_dimension=False, layout=None):
    return get_backend(backend).get_kv_cache_stride_order(include_num_layers_dimension, layout)


def dtype_size(dtype):
    """Bytes of one element (0 for unknown codes)."""
    return lib.vattn_dtype_size(dtype_code(dtype))


def cuda_device_count():
    out = ffi.new("int32_t *")
    check(lib.vattn_cuda_device_count(out))
    return out[0]
