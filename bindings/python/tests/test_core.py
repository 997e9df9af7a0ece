"""Versions, status codes -> exceptions, the generated cdef, constants."""
import os
import re

import pytest

import vattn
from vattn import errors
from vattn._ffi import ffi, lib, clib, check

HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "vattn.h")


def test_version_matches_binding():
    major, minor, patch = vattn.version()
    assert major == vattn.BINDING_VERSION_MAJOR == lib.VATTN_VERSION_MAJOR
    assert vattn.version_string() == "%d.%d.%d" % (major, minor, patch)
    assert lib.vattn_version() == lib.VATTN_VERSION_NUMBER


def test_version_check_rejects_other_major(monkeypatch):
    import vattn._ffi as f

    class FakeLib:
        VATTN_VERSION_MAJOR = lib.VATTN_VERSION_MAJOR
        VATTN_VERSION_MINOR = lib.VATTN_VERSION_MINOR
        VATTN_VERSION_PATCH = lib.VATTN_VERSION_PATCH

        @staticmethod
        def vattn_version():
            return (lib.VATTN_VERSION_MAJOR + 1) << 16

    monkeypatch.setattr(f, "lib", FakeLib)
    with pytest.raises(ImportError, match="needs major"):
        f._check_version()


def test_every_header_function_is_exported():
    # weak references: a function missing from libvattn is listed here
    if vattn.MISSING_FUNCTIONS:
        pytest.skip("C functions missing from libvattn: %s" % ", ".join(sorted(vattn.MISSING_FUNCTIONS)))
    assert not vattn.MISSING_FUNCTIONS


def test_cdef_is_generated_from_the_header():
    from vattn import _cdef
    text = open(HEADER).read()
    declared = set(re.findall(r"VATTN_API\s+[^;]*?\b(vattn_\w+)\s*\(", text, re.S))
    inc = [os.path.dirname(HEADER)] + os.environ.get("VATTN_DLPACK_INCLUDE_DIR", "").split(":")
    cdef = _cdef.cdef_source(HEADER, inc)
    generated = set(re.findall(r"\b(vattn_\w+)\s*\(", cdef))
    assert declared and declared <= generated
    for name in declared:
        assert hasattr(clib, name)
    macros = set(re.findall(r"^#define\s+(VATTN_[A-Z0-9_]+)\s+\S", text, re.M)) - {"VATTN_API", "VATTN_H"}
    for m in macros:
        assert hasattr(lib, m), m
    assert "DLManagedTensor" in cdef and "kDLCUDA" in cdef


def test_status_strings():
    assert vattn.status_string(0) == "ok" or vattn.status_string(0)
    assert vattn.status_string(lib.VATTN_ERR_INVALID_ARGUMENT) == "invalid argument"
    assert vattn.status_string(12345) == "unknown status"


@pytest.mark.parametrize("status,cls,base", [
    (1, vattn.InvalidArgumentError, ValueError),
    (2, vattn.UnsupportedError, NotImplementedError),
    (3, vattn.OutOfMemoryError, MemoryError),
    (4, vattn.WorkspaceTooSmallError, vattn.VattnError),
    (5, vattn.CudaError, RuntimeError),
    (6, vattn.NotFoundError, LookupError),
    (7, vattn.InternalError, RuntimeError),
    (8, vattn.NoDeviceError, RuntimeError),
])
def test_status_maps_to_exception_class(status, cls, base):
    assert getattr(lib, {1: "VATTN_ERR_INVALID_ARGUMENT", 2: "VATTN_ERR_UNSUPPORTED",
                         3: "VATTN_ERR_OUT_OF_MEMORY", 4: "VATTN_ERR_WORKSPACE_TOO_SMALL",
                         5: "VATTN_ERR_CUDA", 6: "VATTN_ERR_NOT_FOUND", 7: "VATTN_ERR_INTERNAL",
                         8: "VATTN_ERR_NO_DEVICE"}[status]) == status
    assert vattn.error_class(status) is cls
    assert issubclass(cls, vattn.VattnError) and issubclass(cls, base)
    with pytest.raises(cls) as ei:
        check(status)
    assert ei.value.status == status
    assert vattn.status_string(status) in str(ei.value)


def test_unknown_status_is_base_error():
    with pytest.raises(vattn.VattnError) as ei:
        check(99)
    assert type(ei.value) is vattn.VattnError and ei.value.status == 99


def test_error_carries_library_message():
    with pytest.raises(vattn.NotFoundError) as ei:
        vattn.get_backend("no-such-backend")
    assert "no-such-backend" in ei.value.message
    assert ei.value.status == lib.VATTN_ERR_NOT_FOUND
    assert "no-such-backend" in str(ei.value)
    # the message is consumed: the next successful call leaves it empty
    vattn.get_backend("cpu")
    assert vattn.last_error_message() == ""


def test_invalid_argument_message_names_the_argument():
    with pytest.raises(vattn.InvalidArgumentError) as ei:
        vattn.get_backend("cpu").get_kv_cache_shape(-1, 16, 2, 64)
    assert ei.value.message
    assert "num_blocks" in ei.value.message


def test_missing_function_stub_raises():
    from vattn._ffi import _missing
    with pytest.raises(vattn.MissingFunctionError, match="vattn_nothing"):
        _missing("vattn_nothing")()
    assert issubclass(vattn.MissingFunctionError, vattn.UnsupportedError)


def test_dtype_size_and_names():
    assert vattn.dtype_size("float32") == 4
    assert vattn.dtype_size("half") == 2
    assert vattn.dtype_size("bfloat16") == 2
    assert vattn.dtype_size("fp8") == 1
    assert vattn.dtype_size(vattn.DTYPE_FP8_E5M2) == 1
    assert lib.vattn_dtype_size(0) == 0
    import numpy as np
    assert vattn.dtype_size(np.float16) == 2
    with pytest.raises(vattn.InvalidArgumentError, match="unknown dtype"):
        vattn.dtype_size("complex128")


def test_cuda_device_count_is_not_an_error():
    n = vattn.cuda_device_count()
    assert n >= 0


def test_constants():
    assert vattn.PAD_SLOT_ID == -1
    assert lib.VATTN_LAYOUT_HND == 1 and lib.kDLCPU == 1 and lib.kDLCUDA == 2
    assert vattn.AttentionCGSupport.ALWAYS > vattn.AttentionCGSupport.UNIFORM_BATCH
    assert min(vattn.AttentionCGSupport) == vattn.AttentionCGSupport.NEVER
