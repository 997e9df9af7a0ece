"""Generates the cffi cdef from include/vattn.h with the C preprocessor.

Nothing of vattn.h is copied by hand: the header is run through ``cc -E -P``
with ``VATTN_API`` defined empty, and ``<stdint.h>`` / ``<stddef.h>`` replaced
by empty stubs (cffi knows ``int32_t``, ``size_t`` ... natively; the system
headers carry GCC extensions that cffi's parser rejects).  ``<dlpack/dlpack.h>``
comes in through the header's own ``#include``, so the DLPack structs are
parsed from the same preprocessed text.  Object-like ``VATTN_*`` macros are
kept (``-dD``) and turned into ``#define NAME ...`` so that the C compiler,
not this script, supplies their values.

This file is imported by the build script only; it must not import the
``vattn`` package (which needs the compiled module).
"""
import os
import re
import shlex
import shutil
import subprocess
import tempfile

_DEFINE = re.compile(r"^#define\s+(VATTN_[A-Z0-9_]+)\s+(\S.*)$")
_SKIP = {"VATTN_H", "VATTN_API"}

# Helpers implemented in the extension's C source (see _build_ffi.py).  They
# are not part of vattn.h: they make DLPack capsules for the producer side.
HELPER_CDEF = """
DLManagedTensor *vattn_py_managed_new(const DLTensor *t, void *handle);
void vattn_py_managed_free(DLManagedTensor *m);
void vattn_py_capsule_destructor(void *capsule);
extern "Python" void _vattn_py_release(void *handle);
int vattn_py_symbol_count(void);
const char *vattn_py_symbol_name(int i);
int vattn_py_symbol_present(int i);
"""


def _compiler():
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "cc"
    return shlex.split(cc)


def preprocess(header, include_dirs=()):
    """Returns the text of ``header`` after ``cc -E -P -dD`` with stub libc headers."""
    with tempfile.TemporaryDirectory(prefix="vattn-cdef-") as stub:
        for name in ("stdint.h", "stddef.h"):
            open(os.path.join(stub, name), "w").close()
        cmd = _compiler() + ["-E", "-P", "-dD", "-std=c99", "-nostdinc", "-DVATTN_API=",
                             "-I" + stub]
        for d in include_dirs:
            if d:
                cmd.append("-I" + d)
        # the default location of the Debian libdlpack-dev header
        cmd += ["-I/usr/local/include", "-I/usr/include", header]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def cdef_source(header, include_dirs=()):
    """The cdef text: declarations of vattn.h and dlpack.h, plus VATTN_* constants."""
    text = preprocess(header, include_dirs)
    decls, consts = [], []
    for line in text.splitlines():
        if line.startswith("#"):
            m = _DEFINE.match(line)
            if m and m.group(1) not in _SKIP and "(" not in line.split()[1]:
                consts.append("#define %s ..." % m.group(1))
            continue  # every other directive (predefined macros, #undef) is dropped
        decls.append(line)
    return "\n".join(decls) + "\n" + "\n".join(consts) + "\n" + HELPER_CDEF


if __name__ == "__main__":  # python _cdef.py path/to/vattn.h  -> prints the cdef
    import sys
    sys.stdout.write(cdef_source(sys.argv[1], sys.argv[2:]))
