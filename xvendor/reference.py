"""The ``aten`` backend: plain torch, correct on every device; the oracle for all others.

Math (accumulation in fp32 for fp16/bf16 inputs, then one rounding to the output dtype):
- gemm:        out = a @ b (+ bias)
- grouped_mm:  the four layouts of ``torch._grouped_mm`` with int32 cumulative ``offs``:
    2D x 3D  a (M, K),    b (G, K, N)  -> (M, N);    rows offs[g-1]:offs[g] use b[g]
    3D x 2D  a (G, M, K), b (K, N)     -> (M, N);    cols offs[g-1]:offs[g] use a[g]
    2D x 2D  a (M, K),    b (K, N)     -> (G, M, N); K range offs[g-1]:offs[g] is group g
    3D x 3D  a (G, M, K), b (G, K, N)  -> (G, M, N); no offs
  bias: (G, N) for 2Dx3D, 2Dx2D and 3Dx3D (group g adds bias[g]); (N,) for 3Dx2D (each
  column belongs to one group). Rows (2Dx3D) or columns (3Dx2D) past offs[-1] are zeros.
- rms_norm:    x * rsqrt(mean(x^2 over weight's dims) + eps) * weight
- topk:        torch.topk

Code paths: gemm uses mm/addmm directly when the output dtype equals the input dtype
(ATen's own fp32 accumulation), and an fp32 upcast otherwise. grouped_mm loops over groups
in Python: it must take any size, bias and out_dtype on every device, which
``torch._grouped_mm`` does not (no bias, no out_dtype on CPU; 16-byte stride rule).
Arguments arrive checked by ``xvendor.ops``.
"""

from __future__ import annotations

import torch

_ACC = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


def gemm(a, b, bias=None, out_dtype=None):
    # torch.mm checks ranks, sizes, dtypes and devices, except that mm(cpu, meta) returns an
    # uninitialized CPU tensor: refused here, so the registry may trust this kernel's checks
    # (Backend.checks_inputs; decisions for meta devices never trust it) and skip the op's
    # per-call argument filter.
    if b.is_meta and not a.is_meta:
        raise RuntimeError("gemm: b is a meta tensor, a is not")
    if bias is None and out_dtype is None:
        return torch.mm(a, b)
    if out_dtype is None or out_dtype == a.dtype:
        return torch.mm(a, b) if bias is None else torch.addmm(bias.to(a.dtype), a, b)
    acc = _ACC.get(a.dtype, a.dtype)
    out = torch.mm(a.to(acc), b.to(acc))
    if bias is not None:
        out += bias.to(acc)
    return out.to(out_dtype)


def _group_bounds(offs: torch.Tensor) -> list[tuple[int, int]]:
    ends = offs.tolist()
    return list(zip([0] + ends[:-1], ends))


def grouped_mm(a, b, offs=None, bias=None, out_dtype=None):
    out_dtype = out_dtype or a.dtype
    acc = _ACC.get(a.dtype, a.dtype)
    if a.dim() == 3 and b.dim() == 3:
        out = torch.bmm(a.to(acc), b.to(acc))
        if bias is not None:
            out += bias.to(acc).unsqueeze(1)
        return out.to(out_dtype)
    bounds = _group_bounds(offs)
    if a.dim() == 2 and b.dim() == 3:  # MoE forward: ragged rows
        out = torch.zeros(a.shape[0], b.shape[2], dtype=acc, device=a.device)
        for g, (s, e) in enumerate(bounds):
            if e > s:
                torch.mm(a[s:e].to(acc), b[g].to(acc), out=out[s:e])
                if bias is not None:
                    out[s:e] += bias[g].to(acc)
    elif a.dim() == 3:  # 3D x 2D: ragged columns
        out = torch.zeros(a.shape[1], b.shape[1], dtype=acc, device=a.device)
        for g, (s, e) in enumerate(bounds):
            if e > s:
                torch.mm(a[g].to(acc), b[:, s:e].to(acc), out=out[:, s:e])
                if bias is not None:
                    out[:, s:e] += bias[s:e].to(acc)
    else:  # 2D x 2D: ragged K, the weight gradient
        out = torch.zeros(len(bounds), a.shape[0], b.shape[1], dtype=acc, device=a.device)
        for g, (s, e) in enumerate(bounds):
            if e > s:
                torch.mm(a[:, s:e].to(acc), b[s:e].to(acc), out=out[g])
        if bias is not None:
            out += bias.to(acc).unsqueeze(1)
    return out.to(out_dtype)


def rms_norm(x, weight=None, eps=None):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    acc = _ACC.get(x.dtype, x.dtype)
    dims = tuple(range(-(weight.dim() if weight is not None else 1), 0))
    xf = x.to(acc)
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(acc)
    return y.to(x.dtype)


def topk(x, k, dim=-1, largest=True, sorted=True):
    values, indices = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    return values, indices


KERNELS = {"gemm": gemm, "grouped_mm": grouped_mm, "rms_norm": rms_norm, "topk": topk}
