"""DLPack in both directions.

Consumer: ``TensorArgs.get(obj)`` turns anything with ``__dlpack__`` (numpy,
torch, cupy, our own views) into a ``DLTensor *`` for one C call, with no copy.
It follows the consumer protocol: ask the producer for a "dltensor" capsule
(passing the CUDA stream the library will use), take the DLManagedTensor out,
rename the capsule "used_dltensor" so its destructor leaves the tensor to us,
keep producer and capsule alive for the call, then call the managed tensor's
deleter (TensorArgs.close / the with-block's end).

Producer: ``DLPackView`` wraps a DLTensor that lives in memory owned by a
vattn object (a KV cache layer, a reshaped query).  ``__dlpack__`` returns a
"dltensor" capsule whose DLManagedTensor holds a reference to the view (and
through it to the owner) until the consumer calls the deleter, so
``np.from_dlpack(view)`` / ``torch.from_dlpack(view)`` see the same memory for
as long as they live.
"""
import ctypes
import itertools
import threading

import numpy as np

from ._ffi import ffi, lib, clib
from ._types import GPU_DEVICE_TYPES, kDLCPU, stream_ptr, device_name
from .errors import InvalidArgumentError

_py = ctypes.pythonapi
_py.PyCapsule_GetPointer.restype = ctypes.c_void_p
_py.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_SetName.restype = ctypes.c_int
_py.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_void_p]
_py.PyCapsule_IsValid.restype = ctypes.c_int
_py.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_New.restype = ctypes.py_object
_py.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

# Capsule names must outlive every capsule: keep them in memory that is never
# freed (a capsule keeps only a char pointer to its name).
_NAMES = ffi.new("char[]", b"dltensor\0used_dltensor")
_NAME_DLTENSOR = int(ffi.cast("uintptr_t", _NAMES))
_NAME_USED = _NAME_DLTENSOR + len(b"dltensor\0")
_DESTRUCTOR = int(ffi.cast("uintptr_t", ffi.addressof(clib, "vattn_py_capsule_destructor")))
_keep_names_forever = [_NAMES]

# ---------------------------------------------------------------- dtypes ----
_DL_TO_NAME = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
               (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
               (2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (4, 16): "bfloat16"}
_NP_KIND = {"i": 0, "u": 1, "f": 2}


def dl_dtype_name(dt):
    return _DL_TO_NAME.get((dt.code, dt.bits), "dl(%d,%d,%d)" % (dt.code, dt.bits, dt.lanes))


# -------------------------------------------------------------- consumer ----
def _export(obj, stream):
    """obj.__dlpack__(...) following the stream rules of the protocol."""
    dev = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (kDLCPU, 0)
    if int(dev[0]) in GPU_DEVICE_TYPES:
        s = stream_ptr(stream)
        return obj.__dlpack__(stream=s if s else 1)   # 1 = the legacy default stream (NULL)
    return obj.__dlpack__()


class TensorArgs:
    """Borrowed DLTensors for one C call.  Use as a context manager."""

    def __init__(self, stream=None):
        self.stream = stream
        self._managed = []
        self._keep = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        managed, self._managed = self._managed, []
        for m in reversed(managed):
            if m.deleter != ffi.NULL:
                m.deleter(m)
        self._keep = []

    def __del__(self):
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def get(self, obj, name, optional=False):
        """DLTensor * for obj (NULL for None when optional)."""
        if obj is None:
            if optional:
                return ffi.NULL
            raise InvalidArgumentError("%s: a tensor is required, got None" % name, 1)
        if isinstance(obj, DLPackView):
            if getattr(obj._owner, "closed", False):
                raise InvalidArgumentError("%s: the tensor's owner (%r) was closed"
                                           % (name, obj._owner), 1)
            self._keep.append(obj)
            return obj._dl
        if isinstance(obj, ffi.CData):
            if ffi.typeof(obj) is ffi.typeof("DLTensor *"):
                return obj
            raise InvalidArgumentError("%s: expected DLTensor *, got %s" % (name, ffi.typeof(obj)), 1)
        if not hasattr(obj, "__dlpack__"):
            raise InvalidArgumentError(
                "%s: expected a tensor with __dlpack__ (numpy array, torch/cupy tensor), got %s"
                % (name, type(obj).__name__), 1)
        try:
            cap = _export(obj, self.stream)
        except BufferError as e:
            if isinstance(obj, np.ndarray):
                return self._from_numpy(obj, name)
            raise InvalidArgumentError("%s: cannot export through DLPack: %s" % (name, e), 1) from e
        p = _py.PyCapsule_GetPointer(cap, b"dltensor")
        m = ffi.cast("DLManagedTensor *", p)
        self._managed.append(m)
        self._keep.append((obj, cap))
        _py.PyCapsule_SetName(cap, _NAME_USED)
        return ffi.cast("DLTensor *", m)

    def _from_numpy(self, a, name):
        """A numpy array that DLPack refuses (read-only): describe it directly.
        Only used for inputs; the library never writes through const tensors."""
        kind = _NP_KIND.get(a.dtype.kind)
        if kind is None or a.dtype.byteorder not in "=|":
            raise InvalidArgumentError("%s: unsupported numpy dtype %s" % (name, a.dtype), 1)
        t = ffi.new("DLTensor *")
        shape = ffi.new("int64_t[]", list(a.shape) or [1])
        strides = ffi.new("int64_t[]", [s // a.itemsize for s in a.strides] or [1])
        t.data = ffi.cast("void *", a.__array_interface__["data"][0])
        t.device.device_type = kDLCPU
        t.device.device_id = 0
        t.ndim = a.ndim
        t.dtype.code = kind
        t.dtype.bits = a.itemsize * 8
        t.dtype.lanes = 1
        t.shape = shape
        t.strides = strides
        t.byte_offset = 0
        self._keep.append((a, t, shape, strides))
        return t

    def array(self, objs, name):
        """DLTensor *[] for a list of tensors."""
        arr = ffi.new("DLTensor *[]", max(1, len(objs)))
        for i, o in enumerate(objs):
            arr[i] = self.get(o, "%s[%d]" % (name, i))
        self._keep.append(arr)
        return arr


# -------------------------------------------------------------- producer ----
_live = {}
_live_lock = threading.Lock()
_counter = itertools.count(1)


@ffi.def_extern()
def _vattn_py_release(handle):
    """Called (with the GIL, from any thread) by a managed tensor's deleter."""
    key = int(ffi.cast("uintptr_t", handle))
    with _live_lock:
        view = _live.pop(key, None)
    if view is not None:
        view._released()


class DLPackView:
    """A tensor in memory owned by a vattn object, offered through DLPack.

    ``np.from_dlpack(view)`` / ``torch.from_dlpack(view)`` / ``cupy.from_dlpack``
    give a tensor over the same memory; it keeps the owner alive.
    """

    def __init__(self, dl, owner, shape_keep=None):
        # own copy of the DLTensor struct; shape/strides stay with the owner (or shape_keep)
        self._dl = ffi.new("DLTensor *")
        self._dl[0] = dl[0]
        self._owner = owner
        self._shape_keep = shape_keep

    # -- the protocol --
    def __dlpack_device__(self):
        return (int(self._dl.device.device_type), int(self._dl.device.device_id))

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("vattn views are never copied (copy=True)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("vattn view lives on %s, not on %s"
                              % (self.__dlpack_device__(), tuple(dl_device)))
        key = next(_counter)
        m = lib.vattn_py_managed_new(self._dl, ffi.cast("void *", key))
        if m == ffi.NULL:
            raise MemoryError("vattn: cannot allocate a DLManagedTensor")
        with _live_lock:
            _live[key] = self
        self._exported()
        try:
            return _py.PyCapsule_New(int(ffi.cast("uintptr_t", m)), _NAME_DLTENSOR, _DESTRUCTOR)
        except BaseException:
            lib.vattn_py_managed_free(m)
            raise

    def _exported(self):
        hook = getattr(self._owner, "_export_acquire", None)
        if hook:
            hook()

    def _released(self):
        hook = getattr(self._owner, "_export_release", None)
        if hook:
            hook()

    # -- convenience --
    @property
    def shape(self):
        return tuple(self._dl.shape[i] for i in range(self._dl.ndim))

    @property
    def strides(self):
        """Strides in elements (compact row-major when the tensor has none)."""
        if self._dl.strides == ffi.NULL:
            out, acc = [], 1
            for n in reversed(self.shape):
                out.append(acc)
                acc *= n
            return tuple(reversed(out))
        return tuple(self._dl.strides[i] for i in range(self._dl.ndim))

    @property
    def ndim(self):
        return self._dl.ndim

    @property
    def dtype(self):
        """Element type name ('float16', 'bfloat16', 'uint8' ...)."""
        return dl_dtype_name(self._dl.dtype)

    @property
    def device(self):
        return device_name(*self.__dlpack_device__())

    @property
    def data_ptr(self):
        return int(ffi.cast("uintptr_t", self._dl.data)) + int(self._dl.byte_offset)

    def numpy(self, writable=True):
        """A numpy array over the same (host) memory that keeps the owner alive.
        Unlike np.from_dlpack (read-only in numpy < 2), it can be written.
        bfloat16 comes out as raw uint16 (numpy has no bfloat16)."""
        if self._dl.device.device_type not in (kDLCPU, lib.kDLCUDAHost):
            raise InvalidArgumentError("numpy(): the tensor lives on %s, not on the host"
                                       % self.device, 1)
        name = self.dtype
        if name == "bfloat16":
            name = "uint16"
        try:
            dtype = np.dtype(name)
        except TypeError:
            raise InvalidArgumentError("numpy(): no numpy dtype for %s" % self.dtype, 1)
        shape, strides = self.shape, self.strides
        if any(n == 0 for n in shape):
            return np.empty(shape, dtype)
        if any(s < 0 for s in strides):
            raise InvalidArgumentError("numpy(): negative strides are not supported", 1)
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        self._exported()
        keeper = ffi.gc(ffi.cast("char *", self.data_ptr), lambda _p, v=self: v._released())
        flat = np.frombuffer(ffi.buffer(keeper, extent * dtype.itemsize), dtype=dtype)
        return np.lib.stride_tricks.as_strided(flat, shape=shape,
                                               strides=[s * dtype.itemsize for s in strides],
                                               writeable=writable)

    def __repr__(self):
        return "<vattn view shape=%s strides=%s dtype=%s device=%s>" % (
            self.shape, self.strides, self.dtype, self.device)


def from_dlpack_like(template, view):
    """Converts view to the tensor type of `template` (numpy / torch / cupy); else the view."""
    mod = type(template).__module__.split(".")[0]
    if mod == "numpy":
        return np.from_dlpack(view)
    if mod == "torch":
        import torch
        return torch.from_dlpack(view)
    if mod == "cupy":
        import cupy
        return cupy.from_dlpack(view)
    return view


def empty_like(template, shape, dtype=None):
    """A new uninitialised tensor of template's library and device."""
    mod = type(template).__module__.split(".")[0]
    if mod == "torch":
        return template.new_empty(shape, dtype=dtype) if dtype is not None else template.new_empty(shape)
    if mod == "cupy":
        import cupy
        return cupy.empty(shape, dtype=dtype or template.dtype)
    if isinstance(template, np.ndarray) or mod == "numpy":
        return np.empty(shape, dtype=dtype or template.dtype)
    raise InvalidArgumentError("cannot allocate an output like a %s: pass output=" % type(template).__name__, 1)


def zeros_like(template, shape, dtype=None):
    out = empty_like(template, shape, dtype)
    out[...] = 0
    return out
