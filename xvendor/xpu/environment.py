"""Where the oneAPI runtime wheels live, and the process environment they need.

NOTE [sycl environment]: the wheels ``intel-sycl-rt`` (libsycl, SYCL RTC in libsycl-jit)
and ``intel-opencl-rt`` (the OpenCL CPU device, libintelocl.so) install into
``<prefix>/lib``. Two things must be in place before the SYCL runtime first lists its
platforms in this process, because it lists them once and caches the answer:

- ``OCL_ICD_FILENAMES`` must name ``<prefix>/lib/libintelocl.so``: the wheel's .icd file
  holds a build-time placeholder path, so without it the OpenCL ICD loader finds no CPU
  device. The loader reads the variable lazily, on its first platform query — not at
  process start — so setting ``os.environ`` from Python before that query is enough and no
  re-exec or subprocess is needed (measured: set before dpctl's first ``get_devices()`` the
  device appears; set after, it never does in that process).
- ``SYCL_CACHE_PERSISTENT=1`` / ``SYCL_CACHE_DIR``: the runtime's persistent kernel cache,
  which also serves SYCL RTC builds; read on first use as well.

``LD_LIBRARY_PATH`` is *not* needed: every library in ``<prefix>/lib`` carries
``RUNPATH=$ORIGIN`` and the shim is linked with ``-rpath <prefix>/lib``; it could not help
anyway, since the dynamic loader reads it only at process start.

``setup()`` does all of this and is called by every entry point of ``xvendor.xpu`` before
it loads the shim or imports dpctl. Variables the user already set are respected
(``OCL_ICD_FILENAMES`` is extended, not replaced). If the SYCL runtime was already
initialised without the CPU device (dpctl or a torch XPU build queried platforms before
xvendor could set the variable), ``runtime.cpu_queue()`` says so and names the fix.
"""

from __future__ import annotations

import functools
import os
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["runtime_prefix", "runtime_versions", "cache_dir", "setup", "sycl_loaded_early"]

_SYCL_LIB = "libsycl.so.9"  # 2026.x wheels; a torch XPU build must use the same major
_OCL_CPU_LIB = "libintelocl.so"


@functools.lru_cache(maxsize=None)
def runtime_prefix() -> Path | None:
    """The prefix whose ``lib/`` holds the runtime wheels' libraries, or None."""
    candidates = [Path(sys.prefix)]
    try:  # a wheel's files are listed relative to site-packages, e.g. ../../libsycl.so.9
        for f in metadata.distribution("intel-sycl-rt").files or ():
            if f.name == _SYCL_LIB:
                candidates.insert(0, Path(f.locate()).resolve().parent.parent)
                break
    except metadata.PackageNotFoundError:
        pass
    for prefix in candidates:
        if (prefix / "lib" / _SYCL_LIB).exists():
            return prefix
    return None


@functools.lru_cache(maxsize=None)
def runtime_versions() -> dict[str, str]:
    """Installed versions of the runtime wheels (absent ones are left out)."""
    out = {}
    for dist in ("intel-sycl-rt", "intel-opencl-rt", "dpctl"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def cache_dir() -> Path:
    """``$XVENDOR_CACHE_DIR/sycl``, else ``$XDG_CACHE_HOME/xvendor/sycl`` (~/.cache)."""
    root = os.environ.get("XVENDOR_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "xvendor")
    path = Path(root) / "sycl"
    path.mkdir(parents=True, exist_ok=True)
    return path


def sycl_loaded_early() -> bool:
    """True if libsycl was mapped into this process before ``setup()`` first ran."""
    return _loaded_before_setup[0]


_loaded_before_setup = [False]
_done = [False]


def _libsycl_mapped() -> bool:
    try:
        with open("/proc/self/maps") as f:
            return any("libsycl.so" in line for line in f)
    except OSError:
        return False


def setup() -> str | None:
    """Prepare the environment (idempotent). ``None`` when ready, else what is missing."""
    prefix = runtime_prefix()
    if prefix is None:
        return ("the oneAPI runtime wheels are not installed (no libsycl.so.9 found): "
                "pip install 'xvendor[xpu]' (dpctl==0.22.1, intel-sycl-rt>=2026.0,<2027, "
                "intel-opencl-rt>=2026.0,<2027)")
    if _done[0]:
        return None
    _done[0] = True
    _loaded_before_setup[0] = _libsycl_mapped()
    ocl = prefix / "lib" / _OCL_CPU_LIB
    if ocl.exists():
        have = [p for p in os.environ.get("OCL_ICD_FILENAMES", "").split(":") if p]
        if str(ocl) not in have:
            os.environ["OCL_ICD_FILENAMES"] = ":".join(have + [str(ocl)])
    os.environ.setdefault("SYCL_CACHE_PERSISTENT", "1")
    os.environ.setdefault("SYCL_CACHE_DIR", str(cache_dir() / "kernels"))
    return None
