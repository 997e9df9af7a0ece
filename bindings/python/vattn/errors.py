"""Exceptions: one class per vattn status code, all derived from VattnError."""


class VattnError(Exception):
    """A vattn call failed.  ``status`` is the C status code, ``message`` the
    library's message (vattn_last_error_message) naming the bad argument."""

    status = None
    status_name = "error"

    def __init__(self, message="", status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(message)

    def __str__(self):
        return "%s (status %s: %s)" % (self.message, self.status, self.status_name) \
            if self.message else "status %s: %s" % (self.status, self.status_name)


class InvalidArgumentError(VattnError, ValueError):
    status, status_name = 1, "invalid argument"


class UnsupportedError(VattnError, NotImplementedError):
    status, status_name = 2, "unsupported"


class MissingFunctionError(UnsupportedError):
    """The loaded libvattn does not export this function."""


class OutOfMemoryError(VattnError, MemoryError):
    status, status_name = 3, "out of memory"


class WorkspaceTooSmallError(VattnError):
    status, status_name = 4, "workspace too small"


BufferTooSmallError = WorkspaceTooSmallError


class CudaError(VattnError, RuntimeError):
    status, status_name = 5, "CUDA error"


class NotFoundError(VattnError, LookupError):
    status, status_name = 6, "not found"


class InternalError(VattnError, RuntimeError):
    status, status_name = 7, "internal error"


class NoDeviceError(VattnError, RuntimeError):
    status, status_name = 8, "no device"


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, UnsupportedError, OutOfMemoryError, WorkspaceTooSmallError,
    CudaError, NotFoundError, InternalError, NoDeviceError)}


def error_class(status):
    """The exception class for a status code (VattnError for unknown codes)."""
    return _BY_STATUS.get(status, VattnError)
