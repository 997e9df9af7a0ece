"""Conversions between Python values (strings, numpy/torch dtypes, devices)
and the C constants of vattn.h."""
import numpy as np

from ._ffi import ffi, lib
from .errors import InvalidArgumentError

DTYPE_FLOAT32 = lib.VATTN_DTYPE_FLOAT32
DTYPE_FLOAT16 = lib.VATTN_DTYPE_FLOAT16
DTYPE_BFLOAT16 = lib.VATTN_DTYPE_BFLOAT16
DTYPE_FP8_E4M3 = lib.VATTN_DTYPE_FP8_E4M3
DTYPE_FP8_E5M2 = lib.VATTN_DTYPE_FP8_E5M2
DTYPE_UINT8 = lib.VATTN_DTYPE_UINT8

_DTYPES = {
    "float32": DTYPE_FLOAT32, "float": DTYPE_FLOAT32, "fp32": DTYPE_FLOAT32,
    "float16": DTYPE_FLOAT16, "half": DTYPE_FLOAT16, "fp16": DTYPE_FLOAT16,
    "bfloat16": DTYPE_BFLOAT16, "bf16": DTYPE_BFLOAT16,
    "fp8": DTYPE_FP8_E4M3, "fp8_e4m3": DTYPE_FP8_E4M3, "float8_e4m3fn": DTYPE_FP8_E4M3,
    "fp8_e5m2": DTYPE_FP8_E5M2, "float8_e5m2": DTYPE_FP8_E5M2,
    "uint8": DTYPE_UINT8, "fp8_ds_mla": DTYPE_UINT8,
}
DTYPE_NAMES = {DTYPE_FLOAT32: "float32", DTYPE_FLOAT16: "float16", DTYPE_BFLOAT16: "bfloat16",
               DTYPE_FP8_E4M3: "fp8_e4m3", DTYPE_FP8_E5M2: "fp8_e5m2", DTYPE_UINT8: "uint8"}

_KV_CACHE_DTYPES = {"auto": lib.VATTN_KV_CACHE_DTYPE_AUTO, "fp8": lib.VATTN_KV_CACHE_DTYPE_FP8_E4M3,
                    "fp8_e4m3": lib.VATTN_KV_CACHE_DTYPE_FP8_E4M3,
                    "fp8_e5m2": lib.VATTN_KV_CACHE_DTYPE_FP8_E5M2}
KV_CACHE_DTYPE_NAMES = {0: "auto", 1: "fp8_e4m3", 2: "fp8_e5m2"}

_ATTN_TYPES = {"decoder": lib.VATTN_ATTN_DECODER, "encoder": lib.VATTN_ATTN_ENCODER,
               "encoder_only": lib.VATTN_ATTN_ENCODER_ONLY,
               "encoder_decoder": lib.VATTN_ATTN_ENCODER_DECODER}
ATTN_TYPE_NAMES = {v: k for k, v in _ATTN_TYPES.items()}

LAYOUT_NAMES = {lib.VATTN_LAYOUT_NHD: "NHD", lib.VATTN_LAYOUT_HND: "HND"}
_LAYOUTS = {v: k for k, v in LAYOUT_NAMES.items()}

kDLCPU = lib.kDLCPU
kDLCUDA = lib.kDLCUDA
kDLCUDAHost = lib.kDLCUDAHost
kDLCUDAManaged = lib.kDLCUDAManaged
kDLROCM = lib.kDLROCM
_DEVICE_NAMES = {"cpu": kDLCPU, "cuda": kDLCUDA, "gpu": kDLCUDA}
GPU_DEVICE_TYPES = (kDLCUDA, kDLCUDAManaged, kDLROCM)


def _name_of(x):
    if isinstance(x, str):
        return x
    s = str(x)
    if s.startswith("torch."):           # torch.float16 -> "float16"
        return s[len("torch."):]
    try:
        return np.dtype(x).name          # numpy dtypes and type objects
    except TypeError:
        return s


def dtype_code(dtype, what="dtype"):
    """VATTN_DTYPE_* of an int, a name ('bfloat16', 'half', 'fp8'), a numpy or torch dtype."""
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return int(dtype)
    name = _name_of(dtype).lower()
    if name in _DTYPES:
        return _DTYPES[name]
    raise InvalidArgumentError("%s: unknown dtype %r (use one of %s)"
                               % (what, dtype, ", ".join(sorted(_DTYPES))), 1)


def dtype_name(code):
    return DTYPE_NAMES.get(code, "dtype(%d)" % code)


def kv_cache_dtype_code(kv_cache_dtype):
    if kv_cache_dtype is None:
        return 0
    if isinstance(kv_cache_dtype, (int, np.integer)) and not isinstance(kv_cache_dtype, bool):
        return int(kv_cache_dtype)
    name = _name_of(kv_cache_dtype).lower()
    if name in ("float8_e4m3fn",):
        name = "fp8_e4m3"
    if name in ("float8_e5m2",):
        name = "fp8_e5m2"
    if name in _KV_CACHE_DTYPES:
        return _KV_CACHE_DTYPES[name]
    raise InvalidArgumentError("kv_cache_dtype: unknown value %r (use 'auto', 'fp8', "
                               "'fp8_e4m3' or 'fp8_e5m2')" % (kv_cache_dtype,), 1)


def attn_type_code(attn_type):
    if isinstance(attn_type, (int, np.integer)) and not isinstance(attn_type, bool):
        return int(attn_type)
    name = getattr(attn_type, "value", attn_type)
    if isinstance(name, str) and name.lower() in _ATTN_TYPES:
        return _ATTN_TYPES[name.lower()]
    raise InvalidArgumentError("attn_type: unknown value %r (use %s)"
                               % (attn_type, ", ".join(_ATTN_TYPES)), 1)


def layout_code(layout):
    if layout is None:
        return None
    if isinstance(layout, (int, np.integer)) and not isinstance(layout, bool):
        return int(layout)
    if isinstance(layout, str) and layout.upper() in _LAYOUTS:
        return _LAYOUTS[layout.upper()]
    raise InvalidArgumentError("layout: unknown value %r (use 'NHD' or 'HND')" % (layout,), 1)


def layout_name(code):
    return LAYOUT_NAMES.get(code, str(code))


def device_of(device):
    """(device_type, device_id) of 'cpu', 'cuda', 'cuda:1', a (type, id) pair, a
    torch.device, or None (None = (0, 0): let the library choose)."""
    if device is None:
        return 0, 0
    if isinstance(device, tuple) and len(device) == 2:
        return int(device[0]), int(device[1])
    if isinstance(device, (int, np.integer)):
        return int(device), 0
    s = str(device).lower()
    name, _, idx = s.partition(":")
    if name in _DEVICE_NAMES:
        return _DEVICE_NAMES[name], int(idx) if idx else 0
    raise InvalidArgumentError("device: unknown device %r (use 'cpu', 'cuda' or 'cuda:N')"
                               % (device,), 1)


def device_name(device_type, device_id=0):
    if device_type == kDLCPU:
        return "cpu"
    if device_type == kDLCUDA:
        return "cuda:%d" % device_id
    return "device(%d):%d" % (device_type, device_id)


def stream_ptr(stream):
    """The cudaStream_t of a stream argument: None/0, an int, a torch.cuda.Stream
    (.cuda_stream) or a cupy Stream (.ptr)."""
    if stream is None:
        return 0
    if isinstance(stream, (int, np.integer)):
        return int(stream)
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, (int, np.integer)):
            return int(v)
    raise InvalidArgumentError("stream: expected an int, a torch.cuda.Stream or a cupy Stream, "
                               "got %r" % (stream,), 1)


def c_stream(stream):
    return ffi.cast("void *", stream_ptr(stream))


def as_int_array(x, dtype, name, ndim=None):
    """A C-contiguous host numpy array of `dtype` from a list, numpy array or a
    torch/cupy tensor (copied to the host)."""
    if x is None:
        return None
    if not isinstance(x, np.ndarray):
        if hasattr(x, "detach") and hasattr(x, "cpu"):      # torch
            x = x.detach().cpu().numpy()
        elif hasattr(x, "get") and hasattr(x, "__cuda_array_interface__"):  # cupy
            x = x.get()
    a = np.asarray(x)
    if a.size == 0:
        a = a.astype(dtype)
    elif a.dtype.kind not in "iub":
        raise InvalidArgumentError("%s: expected integers, got dtype %s" % (name, a.dtype), 1)
    if ndim is not None and a.ndim != ndim:
        if not (ndim == 2 and a.size == 0):
            raise InvalidArgumentError("%s: expected %d dimension(s), got shape %s"
                                       % (name, ndim, a.shape), 1)
        a = a.reshape(0, 0) if a.ndim != 2 else a
    if a.dtype != dtype:
        info = np.iinfo(dtype)
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise InvalidArgumentError("%s: values out of range for %s" % (name, np.dtype(dtype)), 1)
        a = a.astype(dtype)
    return np.ascontiguousarray(a)


def ptr(ctype, a):
    """A C pointer to the data of numpy array `a` (NULL for None); `a` must be kept alive."""
    if a is None:
        return ffi.NULL
    if a.size == 0:   # a valid pointer to nothing (never NULL: NULL means "absent")
        if ctype not in _EMPTY:
            _EMPTY[ctype] = ffi.new(ctype + "[1]")
        return ffi.cast(ctype + " *", _EMPTY[ctype])
    return ffi.cast(ctype + " *", ffi.from_buffer(a))


_EMPTY = {}
