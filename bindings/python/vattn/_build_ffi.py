"""cffi builder for ``vattn._vattn_cffi`` (out-of-line API mode).

Where libvattn and vattn.h are found, in order:
  1. VATTN_INCLUDE_DIR / VATTN_LIB_DIR (a build tree or an install prefix);
  2. ``pkg-config vattn``;
  3. the repository this file sits in (include/) and its build*/ directories;
  4. the compiler's default paths (an installed libvattn).
The DLPack header comes from VATTN_DLPACK_INCLUDE_DIR or the default paths.

Used by setup.py (``cffi_modules``) and by CMake:
    python _build_ffi.py OUTDIR [INCLUDE_DIR LIB_DIR]
"""
import glob
import re
import os
import shlex
import subprocess
import sys

from cffi import FFI

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from _cdef import cdef_source  # noqa: E402  (plain module, not the package)

MODULE = "vattn._vattn_cffi"

# C helpers compiled into the extension.  They produce DLPack managed tensors
# whose deleter hands a handle back to Python (extern "Python"), which is what
# lets a capsule keep a KV cache alive for as long as a consumer holds it.
C_SOURCE = r"""
#include "vattn.h"
#include <stdlib.h>
#include <string.h>

static void _vattn_py_release(void *handle);

#define VATTN_PY_MAX_NDIM 16
typedef struct {
  DLManagedTensor m;
  void *handle;
  int64_t shape[VATTN_PY_MAX_NDIM];
  int64_t strides[VATTN_PY_MAX_NDIM];
} vattn_py_managed;

static void vattn_py_managed_deleter(DLManagedTensor *self) {
  vattn_py_managed *p = (vattn_py_managed *)self;
  void *h = p->handle;
  free(p);
  if (h != NULL) _vattn_py_release(h);
}

DLManagedTensor *vattn_py_managed_new(const DLTensor *t, void *handle) {
  vattn_py_managed *p;
  int i;
  if (t == NULL || t->ndim < 0 || t->ndim > VATTN_PY_MAX_NDIM) return NULL;
  p = (vattn_py_managed *)calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->m.dl_tensor = *t;
  for (i = 0; i < t->ndim; ++i) p->shape[i] = t->shape[i];
  p->m.dl_tensor.shape = p->shape;
  if (t->strides != NULL) {
    for (i = 0; i < t->ndim; ++i) p->strides[i] = t->strides[i];
    p->m.dl_tensor.strides = p->strides;
  }
  p->handle = handle;
  p->m.manager_ctx = handle;
  p->m.deleter = vattn_py_managed_deleter;
  return &p->m;
}

void vattn_py_managed_free(DLManagedTensor *m) {
  if (m != NULL && m->deleter != NULL) m->deleter(m);
}

/* PyCapsule destructor: a capsule still named "dltensor" was never consumed,
 * so its producer (us) deletes the managed tensor. Called with the GIL. */
void vattn_py_capsule_destructor(void *capsule) {
  PyObject *cap = (PyObject *)capsule;
  PyObject *type, *value, *tb;
  DLManagedTensor *m;
  if (PyCapsule_IsValid(cap, "used_dltensor")) return;
  PyErr_Fetch(&type, &value, &tb);
  m = (DLManagedTensor *)PyCapsule_GetPointer(cap, "dltensor");
  if (m == NULL) {
    PyErr_WriteUnraisable(cap);
  } else if (m->deleter != NULL) {
    m->deleter(m);
  }
  PyErr_Restore(type, value, tb);
}
"""


def _split_flags(flags, prefix):
    return [f[len(prefix):] for f in flags if f.startswith(prefix)]


def locate():
    """Returns (include_dirs, library_dirs) for vattn."""
    inc = os.environ.get("VATTN_INCLUDE_DIR")
    lib = os.environ.get("VATTN_LIB_DIR")
    incs, libs = [], []
    if inc or lib:
        incs = [inc] if inc else []
        libs = [lib] if lib else []
    else:
        try:
            cflags = subprocess.run(["pkg-config", "--cflags", "vattn"], check=True,
                                    capture_output=True, text=True).stdout
            ldflags = subprocess.run(["pkg-config", "--libs-only-L", "vattn"], check=True,
                                     capture_output=True, text=True).stdout
            incs = _split_flags(shlex.split(cflags), "-I")
            libs = _split_flags(shlex.split(ldflags), "-L")
        except (OSError, subprocess.CalledProcessError):
            repo = os.path.abspath(os.path.join(_HERE, "..", "..", ".."))
            if os.path.isfile(os.path.join(repo, "include", "vattn.h")):
                incs = [os.path.join(repo, "include")]
                builds = sorted(glob.glob(os.path.join(repo, "build*", "libvattn.so")),
                                key=os.path.getmtime, reverse=True)
                libs = [os.path.dirname(builds[0])] if builds else []
    dl = os.environ.get("VATTN_DLPACK_INCLUDE_DIR")
    if dl:
        incs.append(dl)
    return incs, libs


def find_header(include_dirs):
    for d in list(include_dirs) + ["/usr/local/include", "/usr/include"]:
        p = os.path.join(d, "vattn.h")
        if os.path.isfile(p):
            return p
    raise RuntimeError("vattn.h not found: set VATTN_INCLUDE_DIR (and VATTN_LIB_DIR) or "
                       "install vattn with its pkg-config file")


def _symbol_table(cdef):
    """C code that makes every vattn function a weak reference and lists them, so
    the module loads against a libvattn that lacks some function (an older minor
    version, or one being written): calling a missing one raises
    MissingFunctionError instead of failing the import."""
    names = sorted(set(re.findall(r"\b(vattn_[a-z0-9_]+)\s*\(", cdef)) - {
        n for n in re.findall(r"\b(vattn_py_[a-z0-9_]+)", cdef)})
    lines = ["#pragma weak %s" % n for n in names]
    lines.append("static void *const vattn_py_syms[] = {")
    lines += ["  (void *)&%s," % n for n in names]
    lines.append("  NULL };")
    lines.append("static const char *const vattn_py_sym_names[] = {")
    lines += ['  "%s",' % n for n in names]
    lines.append("  NULL };")
    lines.append("int vattn_py_symbol_count(void) { return %d; }" % len(names))
    lines.append("const char *vattn_py_symbol_name(int i) { return vattn_py_sym_names[i]; }")
    lines.append("int vattn_py_symbol_present(int i) { return vattn_py_syms[i] != NULL; }")
    return "\n".join(lines) + "\n"


def make_builder(include_dirs=None, library_dirs=None):
    if include_dirs is None and library_dirs is None:
        include_dirs, library_dirs = locate()
    include_dirs, library_dirs = list(include_dirs or []), list(library_dirs or [])
    header = find_header(include_dirs)
    ffibuilder = FFI()
    cdef = cdef_source(header, include_dirs)
    ffibuilder.cdef(cdef)
    ffibuilder.set_source(
        MODULE, C_SOURCE + _symbol_table(cdef),
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        # every reference is weak, so keep libvattn NEEDED even under --as-needed
        extra_link_args=["-Wl,--push-state,--no-as-needed", "-lvattn", "-Wl,--pop-state"]
        + ["-Wl,-rpath," + d for d in library_dirs])
    return ffibuilder


# setup.py: cffi_modules=["vattn/_build_ffi.py:ffibuilder"]
ffibuilder = make_builder() if __name__ != "__main__" else None

if __name__ == "__main__":
    outdir = os.path.abspath(sys.argv[1])
    if len(sys.argv) >= 4:
        builder = make_builder([sys.argv[2]] + sys.argv[4:], [sys.argv[3]])
    else:
        builder = make_builder()
    tmp = os.path.join(outdir, "cffi-tmp")
    os.makedirs(tmp, exist_ok=True)
    so = builder.compile(tmpdir=tmp)
    # compile() puts the module at tmp/vattn/_vattn_cffi*.so; move it next to the package
    dst = os.path.join(outdir, "vattn", os.path.basename(so))
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.replace(so, dst)
    print(dst)
