"""The one import point of the compiled module, the version check and check()."""
from . import errors as _errors

try:
    from ._vattn_cffi import ffi, lib as clib
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError("vattn: the compiled module vattn._vattn_cffi is missing or cannot load "
                      "libvattn (%s). Build it with CMake (target vattn_python) or "
                      "`pip install ./bindings/python` with VATTN_LIB_DIR/VATTN_INCLUDE_DIR set."
                      % e) from e


def _missing(name):
    def call(*args, **kw):
        raise _errors.MissingFunctionError(
            "libvattn has no %s (the loaded library is older than the header the binding "
            "was built with, or the function is not implemented yet)" % name, 2)
    call.__name__ = name
    return call


class _Lib:
    """The compiled module's lib, with functions absent from the loaded libvattn
    (weak references that resolved to NULL) replaced by stubs that raise."""


lib = _Lib()
for _n in dir(clib):
    setattr(lib, _n, getattr(clib, _n))
MISSING_FUNCTIONS = frozenset(
    ffi.string(clib.vattn_py_symbol_name(i)).decode()
    for i in range(clib.vattn_py_symbol_count()) if not clib.vattn_py_symbol_present(i))
for _n in MISSING_FUNCTIONS:
    setattr(lib, _n, _missing(_n))
del _n

# The binding speaks this major version of the C API.
BINDING_VERSION_MAJOR = 0


def _check_version():
    v = lib.vattn_version()
    major = (v >> 16) & 0xFFFF
    if major != BINDING_VERSION_MAJOR or major != lib.VATTN_VERSION_MAJOR:
        raise ImportError(
            "vattn: the loaded libvattn is version %d.%d.%d but this binding needs major "
            "version %d (it was compiled against vattn.h %d.%d.%d)"
            % (major, (v >> 8) & 0xFF, v & 0xFF, BINDING_VERSION_MAJOR, lib.VATTN_VERSION_MAJOR,
               lib.VATTN_VERSION_MINOR, lib.VATTN_VERSION_PATCH))


_check_version()


def last_error_message():
    return ffi.string(lib.vattn_last_error_message()).decode("utf-8", "replace")


def raise_status(status):
    cls = _errors.error_class(status)
    err = cls(last_error_message(), status)
    err.status_name = ffi.string(clib.vattn_status_string(status)).decode()
    lib.vattn_clear_last_error()
    raise err


def check(status):
    """Raises the exception of a non-OK status with the library's message."""
    if status != 0:
        raise_status(status)


def new_struct(ctype, init=None):
    """ffi.new(ctype) with struct_size set (and the *_init() function run)."""
    p = ffi.new(ctype + " *")
    if init is not None:
        init(p)
    p.struct_size = ffi.sizeof(ctype)
    return p
