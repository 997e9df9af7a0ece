"""The DLPack consumer protocol (renaming, deleters, streams) and zero copy."""
import ctypes
import gc

import numpy as np
import pytest

import vattn

_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_IsValid.restype = ctypes.c_int
_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Producer:
    """Wraps another tensor, records the __dlpack__ calls and keeps the capsules."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []
        self.capsules = []

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        cap = self.inner.__dlpack__(**kw)
        self.capsules.append(cap)
        return cap


def small_cache():
    return vattn.KVCache([vattn.FullAttentionSpec(4, 2, 8, "float32")], num_blocks=4)


def test_consumer_renames_capsule_and_calls_deleter_once():
    c = small_cache()
    p = Producer(c[0])                      # our own producer: it counts live exports
    k = np.ones((1, 2, 8), np.float32)
    vattn.reshape_and_cache_flash(k, k, p, np.array([5], np.int64))
    assert p.calls == [{}]                  # CPU: no stream argument
    cap = p.capsules[0]
    assert _IsValid(cap, b"used_dltensor") and not _IsValid(cap, b"dltensor")
    assert c._exports == 0                  # the deleter ran exactly once ...
    del cap, p
    gc.collect()
    assert c._exports == 0                  # ... and the used capsule did not run it again
    np.testing.assert_array_equal(np.from_dlpack(c[0])[0, 1, 1], k[0])


def test_numpy_capsules_consumed():
    a = np.zeros((2, 2, 8), np.float32)
    p = Producer(a)
    c = small_cache()
    vattn.reshape_and_cache_flash(p, p, c[0], np.array([0, 1], np.int64))
    assert _IsValid(p.capsules[0], b"used_dltensor")


def test_output_written_in_place_zero_copy():
    out = np.zeros((3, 2, 4), np.float32)
    po = np.ones((3, 2, 4), np.float32)
    lse = np.zeros((2, 3), np.float32)
    vattn.merge_attn_states(out[:, :, :], po, lse, po * 3, lse)
    np.testing.assert_allclose(out, 2.0)
    big = np.zeros((6, 2, 4), np.float32)
    vattn.merge_attn_states(big[1:4], po, lse, po, lse)      # a view into a bigger array
    assert big[1:4].all() and not big[0].any() and not big[4:].any()


def test_readonly_numpy_input_is_accepted():
    k = np.ones((1, 2, 8), np.float32)
    k.flags.writeable = False
    with pytest.raises(BufferError):
        k.__dlpack__()                      # numpy refuses to export it...
    c = small_cache()
    vattn.reshape_and_cache_flash(k, k, c[0], np.array([2], np.int64))   # ...we still read it
    assert np.from_dlpack(c[0])[0, 0, 2].all()


def test_non_tensor_rejected_with_argument_name():
    c = small_cache()
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        vattn.reshape_and_cache_flash([[1.0]], np.zeros((1, 2, 8), np.float32), c[0],
                                      np.array([0], np.int64))
    assert "key" in ei.value.message


def test_view_protocol():
    c = small_cache()
    v = c[0]
    assert v.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        v.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        v.__dlpack__(dl_device=(2, 0))
    cap = v.__dlpack__(stream=None, max_version=(1, 0))
    assert _IsValid(cap, b"dltensor")
    a = np.from_dlpack(v)
    b = v.numpy()
    b[1, 2, 3, 1, 4] = 3.0
    assert a[1, 2, 3, 1, 4] == 3.0
    assert "KVCacheView" in repr(v)


def test_stream_argument_forms():
    from vattn._types import stream_ptr

    class TorchLike:
        cuda_stream = 1234

    class CupyLike:
        ptr = 99

    assert stream_ptr(None) == 0 and stream_ptr(5) == 5
    assert stream_ptr(TorchLike()) == 1234 and stream_ptr(CupyLike()) == 99
    with pytest.raises(vattn.InvalidArgumentError):
        stream_ptr("default")


def test_gpu_producer_gets_the_stream(monkeypatch):
    """A CUDA tensor is asked for a capsule on our stream (1 = legacy default for NULL)."""
    from vattn import _dlpack

    class FakeCuda:
        def __init__(self):
            self.kw = None

        def __dlpack_device__(self):
            return (vattn.lib.kDLCUDA, 0)

        def __dlpack__(self, **kw):
            self.kw = kw
            raise BufferError("stop here")

    t = FakeCuda()
    with pytest.raises(vattn.InvalidArgumentError, match="stop here"):
        _dlpack.TensorArgs(stream=None).get(t, "x")
    assert t.kw == {"stream": 1}
    with pytest.raises(vattn.InvalidArgumentError):
        _dlpack.TensorArgs(stream=777).get(t, "x")
    assert t.kw == {"stream": 777}


def test_torch_and_cupy_round_trip():
    torch = pytest.importorskip("torch")
    c = small_cache()
    t = torch.from_dlpack(c[0])
    t[0, 1, 2, 1, 3] = 5.0
    assert np.from_dlpack(c[0])[0, 1, 2, 1, 3] == 5.0
