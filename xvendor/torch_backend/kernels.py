"""The kernels of the ``torch`` backend: torch's own op, plus xvendor's wider semantics
added with device ops only on accelerators (no ``.item()``, ``.tolist()``, ``nonzero`` or
data-dependent shape: nothing here waits for the device; the CPU, where reading a value
is free, reads one).

Code paths, per op:
- gemm: ``torch.mm`` / ``addmm``; an ``out_dtype`` other than the inputs' is torch's own
  (``mm(..., out_dtype=)``) where ``rules.MM_NATIVE_OUT`` lists it, else an fp32 product
  cast once.
- grouped_mm: ``torch._grouped_mm`` (what ``F.grouped_mm`` calls), every layout.
  * strides: torch wants each operand row- or column-major with a 16-byte leading stride
    and offset; an operand that is not is copied into a padded buffer (``_aligned``).
  * ``out_dtype`` / bias on fp16-bf16: computed in fp32 (torch's ``out_dtype`` where
    native, else fp32 operands), bias added in fp32, one rounding to the output dtype.
  * zeros: rows (2Dx3D) / columns (3Dx2D) past ``offs[-1]``: on an accelerator a mask
    built on the device (index >= offs[-1]); on the CPU, where reading ``offs[-1]`` costs
    nothing, one slice (``HOST_READS_FREE``).
- rms_norm: ``F.rms_norm`` over weight's dims (the last one without a weight); in eager
  inference on the CPU from ``rules.RMS_NORM_ONE_BUFFER`` elements, torch's arithmetic on
  one buffer instead of three temporaries (NOTE [rms_norm in one buffer]).
- topk: ``torch.topk``.
- scaled_mm / scaled_grouped_mm: ``F.scaled_mm`` / ``F.scaled_grouped_mm`` with the
  recipes and swizzles as torch's enums (rows past ``offs[-1]`` zeroed for the grouped
  form).
Arguments arrive checked by ``xvendor.ops`` and accepted by ``rules.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from torch.compiler import is_compiling as _compiling

from ..shapes import last_end
from ..numerics import rms_norm_eps
from .rules import (GROUPED_MM_ALIGNED_BASE, GROUPED_MM_NATIVE_OUT, MM_NATIVE_OUT,
                    RMS_NORM_ONE_BUFFER)

_grad_enabled = torch.is_grad_enabled

__all__ = ["KERNELS", "gemm", "grouped_mm", "rms_norm", "topk", "scaled_mm",
           "scaled_grouped_mm"]

F32 = torch.float32
_HALF = (torch.float16, torch.bfloat16)


def gemm(a, b, bias=None, out_dtype=None):
    if b.is_meta and not a.is_meta:  # mm(cpu, meta) would return an uninitialized tensor
        raise RuntimeError("gemm: b is a meta tensor, a is not")
    if out_dtype is None or out_dtype == a.dtype:
        return torch.mm(a, b) if bias is None else torch.addmm(bias.to(a.dtype), a, b)
    if (a.dtype, out_dtype) in MM_NATIVE_OUT.get(a.device.type, ()):
        out = torch.mm(a, b, out_dtype=out_dtype)
    else:
        wide = F32 if a.dtype in _HALF else a.dtype
        out = torch.mm(a.to(wide), b.to(wide))
    if bias is not None:
        out = out + bias.to(out.dtype)
    return out.to(out_dtype)


def _kind_in(t: torch.Tensor, kinds) -> bool:
    """``t.device.type in kinds``; a CPU tensor answered from ``is_cpu`` (``t.device``
    builds a device object on every read, ~0.5 us here: NOTE [the CPU device object])."""
    return "cpu" in kinds if t.is_cpu else t.device.type in kinds


def _aligned(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a copy of it in a buffer whose strides torch's grouped_mm takes: the last
    two dims row- or column-major, the leading one a multiple of 16 bytes (torch's own
    rule, ``_meta_grouped_mm_common``), and where the device wants it
    (``rules.GROUPED_MM_ALIGNED_BASE``) a 16-byte aligned offset."""
    align = 16 // t.element_size()
    st, sh = t.stride(), t.shape
    # row-major (the common case first) or column-major, leading stride a multiple of 16 B
    # (and at least 1 and the other dimension's size)
    if (st[-1] == 1 and st[-2] % align == 0 and 0 < st[-2] >= sh[-1]) \
            or (st[-2] == 1 and st[-1] % align == 0 and 0 < st[-1] >= sh[-2]):
        # (traced: Dynamo cannot read an intermediate's offset; the graph's are fresh)
        if not _kind_in(t, GROUPED_MM_ALIGNED_BASE) or _compiling() \
                or t.storage_offset() % align == 0:
            return t
    cols = sh[-1]
    padded = max(align, -(-cols // align) * align)
    buf = t.new_empty((*sh[:-1], padded))[..., :cols]
    return buf.copy_(t)


_ARANGE: dict = {}


def _indices(n: int, device) -> torch.Tensor:
    """0..n-1 as int32 on ``device``, kept per (n, device) in eager mode (a decode step
    calls with the same sizes every time; a fresh arange is one more launch per call)."""
    if torch.compiler.is_compiling():
        return torch.arange(n, device=device, dtype=torch.int32)
    key = (n, device)
    found = _ARANGE.get(key)
    if found is None:
        if len(_ARANGE) > 64:
            _ARANGE.clear()
        found = _ARANGE[key] = torch.arange(n, device=device, dtype=torch.int32)
    return found


def _group_of(ends: torch.Tensor, n: int, device) -> torch.Tensor:
    """The group of each of ``n`` rows (or columns): G for those past ``ends[-1]``."""
    return torch.searchsorted(ends, _indices(n, device), right=True)


# Devices whose tensors the host reads for free: there the zeros past offs[-1] are one
# slice (``offs[-1]`` read on the host); elsewhere a mask built on the device (no sync).
HOST_READS_FREE = {"cpu"}


def _zero_past_end(out: torch.Tensor, offs: torch.Tensor, dim: int,
                   eager: bool = False) -> torch.Tensor:
    """Zero ``out``'s rows (dim 0) or columns (dim 1) past ``offs[-1]`` (``eager``: the
    caller knows this call is not traced, and the test is skipped)."""
    n = out.shape[dim]
    if _kind_in(out, HOST_READS_FREE) and (eager or not _compiling()):
        end = last_end(offs)  # NOTE [offs read once]
        if end < n:
            out.narrow(dim, end, n - end).zero_()
        return out
    return out.masked_fill_(_past_end(offs, n, out.device).unsqueeze(1 - dim), 0)


def _past_end(ends: torch.Tensor, n: int, device) -> torch.Tensor:
    """True for each of ``n`` rows (or columns) past ``ends[-1]`` (all, with no groups)."""
    if ends.numel() == 0:
        return torch.ones(n, dtype=torch.bool, device=device)
    return _indices(n, device) >= ends[-1]


def grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    if bias is None and (out_dtype is None or out_dtype is a.dtype) and not _compiling():
        # NOTE [floor overhead]: the common eager call, torch's op and the zeros only: every
        # microsecond of Python here is paid again on each of a model's MoE layers, and
        # xvendor must not be slower than calling torch (bench/vs_torch.py).
        if offs is not None and (a.requires_grad or b.requires_grad) and _grad_enabled():
            a, b = _mask_unowned(a, b, offs)  # NOTE [eager training on the floor]
        out = torch._grouped_mm(_aligned(a), _aligned(b), offs=offs)
        if offs is not None:
            if b.dim() == 3:
                out = _zero_past_end(out, offs, 0, True)
            elif a.dim() == 3:
                out = _zero_past_end(out, offs, 1, True)
        return out if out.is_contiguous() else out.contiguous()
    out_dtype = out_dtype or a.dtype
    kind = a.device.type
    wide = out_dtype != a.dtype or (bias is not None and a.dtype in _HALF)
    native = (a.dtype, F32) in GROUPED_MM_NATIVE_OUT.get(kind, ())
    if wide and not native:
        a, b = a.to(F32), b.to(F32)
    if offs is not None and (a.requires_grad or b.requires_grad) and (
            _grad_enabled() or torch.compiler.is_compiling()):
        a, b = _mask_unowned(a, b, offs)
    a, b = _aligned(a), _aligned(b)
    out = torch._grouped_mm(a, b, offs=offs, out_dtype=F32 if wide and native else None)
    layout = (a.dim(), b.dim())
    if layout == (2, 3):  # ragged rows: bias per group, zeros past offs[-1]
        if bias is not None:
            ids = _group_of(offs, out.shape[0], out.device)
            padded = torch.cat([bias.to(out.dtype), bias.new_zeros((1, bias.shape[1]),
                                                                    dtype=out.dtype)])
            out = out.add_(padded[ids])  # rows past offs[-1] get the zero row
        out = _zero_past_end(out, offs, 0)
    elif layout == (3, 2):  # ragged columns: bias per column, zeros past offs[-1]
        if bias is not None:
            out = out.add_(bias.to(out.dtype))
        out = _zero_past_end(out, offs, 1)
    elif bias is not None:  # 2Dx2D and 3Dx3D: (G, M, N), bias (G, N)
        out = out.add_(bias.to(out.dtype).unsqueeze(1))
    if out.dtype != out_dtype:
        out = out.to(out_dtype)
    # torch pads its output's rows to 16 bytes too: xvendor's (and the fake's) is dense
    return out if out.is_contiguous() else out.contiguous()


def _mask_unowned(a, b, offs):
    """Zero the rows of ``a`` (2Dx3D, 2Dx2D: its columns) and columns of ``b`` (3Dx2D; 2Dx2D:
    its rows) that no group owns. Only a call that autograd differentiates needs it (a traced
    training graph, an eager training call on the floor): autograd then differentiates
    torch's op, whose input gradients leave those entries unwritten, and the mask's own
    backward zeroes them. Where the host reads ``offs[-1]`` for free and every entry is
    owned (the common case), the inputs pass unchanged."""
    layout = (a.dim(), b.dim())
    if _kind_in(a, HOST_READS_FREE) and not _compiling():
        end = last_end(offs)  # NOTE [offs read once]
        if end >= (a.shape[0] if layout == (2, 3) else
                   b.shape[1] if layout == (3, 2) else a.shape[1]):
            return a, b
    if layout == (2, 3):
        a = a.masked_fill(_past_end(offs, a.shape[0], a.device).unsqueeze(1), 0)
    elif layout == (3, 2):
        b = b.masked_fill(_past_end(offs, b.shape[1], b.device).unsqueeze(0), 0)
    elif layout == (2, 2):
        a = a.masked_fill(_past_end(offs, a.shape[1], a.device).unsqueeze(0), 0)
        b = b.masked_fill(_past_end(offs, b.shape[0], b.device).unsqueeze(1), 0)
    return a, b


def rms_norm(x, weight=None, eps=None):
    if x.is_cpu and x.numel() >= _ONE_BUFFER_CPU.get(x.dtype, _NEVER) and not _compiling() \
            and not (_grad_enabled() and (x.requires_grad or weight is not None
                                          and weight.requires_grad)):
        return _rms_norm_one_buffer(x, weight, eps)  # NOTE [rms_norm in one buffer]
    # torch.rms_norm is F.rms_norm without its Python wrapper (the builtin handles
    # __torch_function__ itself): NOTE [floor overhead]
    return torch.rms_norm(x, weight.shape if weight is not None else x.shape[-1:], weight, eps)


_ONE_BUFFER_CPU, _NEVER = RMS_NORM_ONE_BUFFER.get("cpu", {}), 1 << 62
_UPCAST = {torch.float16: F32, torch.bfloat16: F32}


def _rms_norm_one_buffer(x, weight, eps):
    """torch's rms_norm, bit for bit, in fewer passes and allocations.

    NOTE [rms_norm in one buffer]: on the CPU torch's eager rms_norm is its composite:
    upcast, ``pow``, ``mean``, ``add``, ``rsqrt``, ``mul``, ``mul``, cast: each of ``pow`` and
    the two ``mul`` writes a new x-sized tensor. Here the same operations run on one
    x-sized buffer: the squares are written into it, summed and divided (what ``mean``
    does on the CPU: a sum, then a division by the count), and the product x * r is written
    back into it and multiplied by the weight in place (for half types the buffer is
    torch's own fp32 upcast copy of x, the squares a second one). The values are torch's to
    the bit (tested); only the memory traffic is smaller. eps=None is torch's default
    (``numerics.rms_norm_eps``). Used in eager inference on the device types, dtypes and
    sizes where it is measured faster (``rules.RMS_NORM_ONE_BUFFER``); a traced call keeps
    torch's op for the compiler, and a call that needs gradients keeps torch's op under
    torch's own autograd.
    """
    nd = weight.dim() if weight is not None else 1
    dims = -1 if nd == 1 else tuple(range(-nd, 0))
    wide = _UPCAST.get(x.dtype)
    xf = x if wide is None else x.to(wide)
    buf = torch.square(xf)
    r = buf.sum(dims, keepdim=True).div_(math.prod(x.shape[-nd:]))
    r = r.add_(rms_norm_eps(x.dtype, eps)).rsqrt_()
    y = torch.mul(x, r, out=buf) if wide is None else xf.mul_(r)
    if weight is not None:
        y.mul_(weight)
    return y if wide is None else y.to(x.dtype)


def topk(x, k, dim=-1, largest=True, sorted=True):
    return torch.topk(x, k, dim, largest, sorted)


# int -> torch's enum, as tables: Dynamo traces a dict lookup, not the enum's constructor
_SCALING = {t.value: t for t in F.ScalingType.__members__.values()}
_SWIZZLE = {t.value: t for t in F.SwizzleType.__members__.values()}


def _recipes(recipe_a, recipe_b, swizzle_a, swizzle_b) -> tuple:
    return _SCALING[recipe_a], _SCALING[recipe_b], _SWIZZLE[swizzle_a], _SWIZZLE[swizzle_b]


def scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=0, swizzle_b=0,
              bias=None, output_dtype=torch.bfloat16):
    ra, rb, wa, wb = _recipes(recipe_a, recipe_b, swizzle_a, swizzle_b)
    return F.scaled_mm(a, b, scale_a, ra, scale_b, rb, swizzle_a=wa, swizzle_b=wb, bias=bias,
                       output_dtype=output_dtype)


def scaled_grouped_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a=0,
                      swizzle_b=0, output_dtype=torch.bfloat16):
    ra, rb, wa, wb = _recipes(recipe_a, recipe_b, swizzle_a, swizzle_b)
    out = F.scaled_grouped_mm(a, b, scale_a, ra, scale_b, rb, swizzle_a=wa, swizzle_b=wb,
                              offs=offs, output_dtype=output_dtype)
    return _zero_past_end(out, offs, 0)


KERNELS = {"gemm": gemm, "grouped_mm": grouped_mm, "rms_norm": rms_norm, "topk": topk,
           "scaled_mm": scaled_mm, "scaled_grouped_mm": scaled_grouped_mm}
