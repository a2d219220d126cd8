"""The C-interface shim over SYCL RTC and kernel launch: built on first use, then loaded.

``shim.cpp`` is compiled with the system C++ compiler (``$CXX``, else ``c++``/``g++``)
against the intel-sycl-rt wheel's headers into
``<cache>/shim/libxvshim-<key>.so``, where ``<key>`` hashes the shim source, the runtime
wheel versions, the compiler's version line and the Python platform: a new source or a new
runtime builds a new library, an unchanged one is reused across processes. The build writes
to a temporary name and renames it into place, so concurrent first uses are safe.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from pathlib import Path

from . import environment

__all__ = ["ShimError", "load", "library_path", "SOURCE", "ABI_VERSION"]

SOURCE = Path(__file__).with_name("shim.cpp")
ABI_VERSION = 2  # must equal xv_abi_version() in shim.cpp
_lock = threading.Lock()
_lib: list = []

c_void_p, c_char_p, c_int, c_size_t = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
_SIGNATURES = {  # name: (restype, argtypes)
    "xv_abi_version": (c_int, []),
    "xv_sycl_compiler_version": (c_int, []),
    "xv_last_error": (c_char_p, []),
    "xv_free_string": (None, [c_void_p]),
    "xv_rtc_available": (c_int, [c_void_p]),
    "xv_build": (c_void_p, [c_void_p, c_char_p, c_char_p, c_int, ctypes.POINTER(c_char_p),
                            ctypes.POINTER(c_char_p), c_char_p, ctypes.POINTER(c_void_p)]),
    "xv_bundle_free": (None, [c_void_p]),
    "xv_kernel": (c_void_p, [c_void_p, c_char_p]),
    "xv_kernel_free": (None, [c_void_p]),
    "xv_kernel_max_wg": (ctypes.c_longlong, [c_void_p, c_void_p]),
    "xv_launch": (c_int, [c_void_p, c_void_p, c_int, ctypes.POINTER(c_size_t),
                          ctypes.POINTER(c_size_t), c_int, ctypes.POINTER(c_int),
                          ctypes.POINTER(c_void_p), c_int]),
    "xv_malloc_device": (c_void_p, [c_void_p, c_size_t]),
    "xv_free": (c_int, [c_void_p, c_void_p]),
    "xv_memcpy": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t]),
    "xv_wait": (c_int, [c_void_p]),
}


class ShimError(RuntimeError):
    """The shim could not be built or loaded; the message carries the compiler output."""


def _compiler() -> str:
    for cand in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if cand and shutil.which(cand):
            return cand
    raise ShimError("no C++ compiler found to build the SYCL shim (tried $CXX, c++, g++, "
                    "clang++); install g++ (>= 9, C++17) or set CXX")


def _compiler_id(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else cxx
    except (OSError, subprocess.SubprocessError):
        return cxx


def library_path(cxx: str | None = None) -> Path:
    """Where the shim for this source, runtime and compiler lives (built or not)."""
    cxx = cxx or _compiler()
    h = hashlib.sha256(SOURCE.read_bytes())
    for part in (repr(sorted(environment.runtime_versions().items())), _compiler_id(cxx),
                 sysconfig.get_platform(), str(environment.runtime_prefix())):
        h.update(b"\0" + part.encode())
    return environment.cache_dir() / "shim" / f"libxvshim-{h.hexdigest()[:16]}.so"


def _build(cxx: str, target: Path) -> None:
    prefix = environment.runtime_prefix()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.stem + ".", suffix=".so.tmp", dir=target.parent)
    os.close(fd)
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING",
           f"-I{prefix}/include", str(SOURCE), f"-L{prefix}/lib", "-lsycl",
           f"-Wl,-rpath,{prefix}/lib", "-o", tmp]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise ShimError(f"building the SYCL shim failed (exit {proc.returncode}):\n"
                            f"$ {' '.join(cmd)}\n{proc.stderr[-8000:]}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load() -> ctypes.CDLL:
    """The loaded shim (building it first if this source/runtime has none yet)."""
    if _lib:
        return _lib[0]
    with _lock:
        if _lib:
            return _lib[0]
        reason = environment.setup()
        if reason:
            raise ShimError(reason)
        cxx = _compiler()
        path = library_path(cxx)
        if not path.exists():
            _build(cxx, path)
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise ShimError(f"loading the SYCL shim {path} failed: {e}; delete it to rebuild") from e
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        if lib.xv_abi_version() != ABI_VERSION:
            raise ShimError(f"the SYCL shim {path} has ABI {lib.xv_abi_version()}, expected "
                            f"{ABI_VERSION}; delete it to rebuild")
        _lib.append(lib)
        return lib


def last_error(lib: ctypes.CDLL) -> str:
    msg = lib.xv_last_error()
    return msg.decode(errors="replace") if msg else "unknown error"
