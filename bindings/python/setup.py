# The cffi extension is declared here (setuptools has no pyproject key for it).
# It is linked against libvattn found through VATTN_INCLUDE_DIR / VATTN_LIB_DIR,
# pkg-config vattn, or this repository's build*/ directory (see vattn/_build_ffi.py).
from setuptools import setup

setup(cffi_modules=["vattn/_build_ffi.py:ffibuilder"])
