"""Launch builders of the Triton templates: a call's config, grid, arguments and options.

``gemm_launch``/``grouped_mm_launch`` turn operands, an output and a ``Config`` into
``(kernel, grid, args, kwargs)``. The backend launches what they return; the
cross-compiler (``crosscompile``) feeds the same arguments, built on ``meta`` tensors, to
Triton's binder, so a cross-compile is specialized exactly as a real launch would be.

This module sits below the dispatch layer and the tuner: it imports neither (nor the ops),
only ``xvendor.devices`` for device facts and ``xvendor.shapes`` for the grouped problem
(both leaves). That is what lets the tuner's sweep import the
cross-compiler without an import cycle through the backend.
"""

from __future__ import annotations

import torch

from .. import devices, shapes
from . import configs

__all__ = ["gemm_launch", "grouped_mm_launch", "grouped_out_shape", "interpreting",
           "resolve_config"]

_kernels = None
# (device key, template) -> (default Config, Triton backend name or None, persistent programs).
# Keyed on DeviceInfo.key rather than the torch device: XVENDOR_ARCH (re-read after
# xvendor.registry.reset()) changes the arch, and with it the default config.
_setups: dict = {}


def _load():
    # Deferred: importing the templates imports triton, and TRITON_INTERPRET is read then.
    global _kernels
    if _kernels is None:
        from . import kernels
        _kernels = kernels
    return _kernels


def interpreting() -> bool:
    """Whether the templates were built for the Triton interpreter (TRITON_INTERPRET=1)."""
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(_load().gemm_kernel, InterpretedFunction)


def resolve_config(config) -> configs.Config:
    """A tuned config as the dispatch layer passes it (``Config.to_dict()``), or a Config."""
    return config if isinstance(config, configs.Config) else configs.Config(**config)


def _launch_setup(device: torch.device, template: str, config=None, space=configs):
    """(config, Triton backend name or None under the interpreter, persistent programs).

    ``config`` (a ``Config.to_dict()``, or a ``Config``) wins; ``None`` means the arch's
    default in ``space`` (``configs``, or ``scaled_configs`` for the FP8/MX templates), or
    ``space.INTERPRETER`` for CPU tensors.
    """
    if device.type == "cpu":
        if not interpreting():
            raise RuntimeError("xvendor triton backend: CPU tensors run only under the Triton "
                               "interpreter; set TRITON_INTERPRET=1 before importing xvendor "
                               "(or move the tensors to a CUDA/ROCm device)")
        default, name, programs = space.INTERPRETER, None, 3  # 3: the persistent loop wraps
    else:
        info = devices.info(device)
        key = (info.key, template)
        hit = _setups.get(key)
        if hit is None:
            name = None if interpreting() else ("hip" if torch.version.hip else "cuda")
            hit = _setups[key] = (space.default(info.arch, template, info.vendor), name,
                                  max(1, info.cu_count))
        default, name, programs = hit
    return (default if config is None else resolve_config(config)), name, programs


def _meta(cfg, backend_name, dtype) -> dict:
    """Constexprs + compile options of one launch."""
    interp = backend_name is None
    nvidia_tf32 = backend_name == "cuda" and torch.backends.cuda.matmul.allow_tf32
    meta = dict(cfg.constexprs(),
                PRECISION="tf32" if nvidia_tf32 else "ieee",
                UPCAST=interp and dtype == torch.bfloat16)  # NOTE [interpreter bf16] in backend.py
    if not interp:
        meta.update(cfg.options(backend_name))
    return meta


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gemm_launch(a, b, bias, out, cfg, backend_name):
    """(kernel, grid, args, kwargs) of one GEMM launch."""
    M, K = a.shape
    N = b.shape[1]
    grid = (_cdiv(M, cfg.block_m) * _cdiv(N, cfg.block_n),)
    args = (a, b, bias if bias is not None else out, out,
            M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
            bias.stride(0) if bias is not None else 0)
    kwargs = dict(HAS_BIAS=bias is not None, **_meta(cfg, backend_name, a.dtype))
    return _load().gemm_kernel, grid, args, kwargs


def _grouped_layout(a, b, offs, bias):
    """(RAGGED, G, M, N, K, out shape, a/b/c group strides, bias strides) of one call."""
    k = _load()
    p = shapes.grouped_problem(a, b, offs)
    ragged = {"m": k.RAGGED_M, "n": k.RAGGED_N, "k": k.RAGGED_K, None: k.BATCHED}[p.ragged]
    G, M, N, K, out_shape = p.groups, p.m, p.n, p.k, p.out_shape
    ga = a.stride(0) if a.dim() == 3 else 0
    gb = b.stride(0) if b.dim() == 3 else 0
    if bias is None:
        bias_strides = (0, 0)
    elif bias.dim() == 1:
        bias_strides = (0, bias.stride(0))
    else:
        bias_strides = (bias.stride(0), bias.stride(1))
    return ragged, G, M, N, K, out_shape, ga, gb, bias_strides


def _tile_bound(ragged, G, M, N, cfg) -> int:
    """An upper bound on the tiles of one call, without reading ``offs`` (no host sync)."""
    k = _load()
    tm, tn = _cdiv(M, cfg.block_m), _cdiv(N, cfg.block_n)
    if ragged == k.RAGGED_M:  # each group adds at most one partial row tile; + the tail
        return (tm + G + 1) * tn
    if ragged == k.RAGGED_N:
        return tm * (tn + G + 1)
    return G * tm * tn


def grouped_out_shape(a, b, offs) -> tuple:
    return _grouped_layout(a, b, offs, None)[5]


def grouped_mm_launch(a, b, offs, bias, out, cfg, backend_name, programs):
    """(kernel, grid, args, kwargs) of one grouped launch (persistent: ``programs`` at most)."""
    ragged, G, M, N, K, _, ga, gb, (sbg, sbn) = _grouped_layout(a, b, offs, bias)
    gc = out.stride(0) if out.dim() == 3 else 0
    grid = (max(1, min(programs, _tile_bound(ragged, G, M, N, cfg))),)
    args = (a, b, bias if bias is not None else out, out, offs if offs is not None else out,
            G, M, N, K,
            ga, a.stride(-2), a.stride(-1),
            gb, b.stride(-2), b.stride(-1),
            gc, out.stride(-2), out.stride(-1),
            sbg, sbn)
    kwargs = dict(RAGGED=ragged, HAS_BIAS=bias is not None, **_meta(cfg, backend_name, a.dtype))
    return _load().grouped_mm_kernel, grid, args, kwargs
