"""Expose a linker where FlyDSL looks for it, so code objects link without a ROCm install.

FlyDSL 0.3.x links its code objects with ``$ROCM_PATH/llvm/bin/ld.lld`` (``/opt/rocm``
when ``ROCM_PATH`` is unset). A machine with ROCm has it; a CPU-only CI runner does not,
and the compile then fails with "lld invocation failed". The ``ziglang`` wheel ships LLD
(``python -m ziglang ld.lld``), which links gfx950 and gfx1250 code objects. So
``ensure_linker()`` keeps a real ROCm linker when there is one, and otherwise writes a
two-line wrapper script to ``<cache>/rocm-lld/llvm/bin/ld.lld`` and points ``ROCM_PATH``
at ``<cache>/rocm-lld`` in this process. The user sets nothing.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

__all__ = ["ensure_linker", "rocm_linker"]


def rocm_linker(rocm_path: str | None = None) -> Path:
    """Where FlyDSL will look for ``ld.lld`` given ``rocm_path`` (default: the environment)."""
    root = rocm_path or os.environ.get("ROCM_PATH") or "/opt/rocm"
    return Path(root) / "llvm" / "bin" / "ld.lld"


def _cache_root() -> Path:
    return Path(os.environ.get("XVENDOR_CACHE_DIR") or Path.home() / ".cache" / "xvendor")


def ensure_linker() -> str:
    """Make ``ld.lld`` reachable for FlyDSL; returns the ``ROCM_PATH`` in effect.

    Raises ``RuntimeError`` naming the fix when neither ROCm nor ``ziglang`` is present.
    """
    if os.access(rocm_linker(), os.X_OK):
        return os.environ.get("ROCM_PATH") or "/opt/rocm"
    try:
        import ziglang  # noqa: F401  (only its presence: the wrapper runs it as a module)
    except ImportError as e:
        raise RuntimeError("FlyDSL needs ld.lld to link code objects: install ROCm, or "
                           "`pip install ziglang` (xvendor[rocm] pulls it in)") from e
    root = _cache_root() / "rocm-lld"
    script = root / "llvm" / "bin" / "ld.lld"
    body = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ziglang ld.lld "$@"\n'
    if not script.is_file() or script.read_text() != body:
        script.parent.mkdir(parents=True, exist_ok=True)
        tmp = script.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(body)
        tmp.chmod(0o755)
        tmp.replace(script)  # atomic: parallel workers never run half a script
    os.environ["ROCM_PATH"] = str(root)
    return str(root)
