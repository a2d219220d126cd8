"""Numerics shared by the correctness gate, the tuner, ``xvendor check`` and the tests: fp64
oracles written independently of ``xvendor.reference`` so that they can judge it.

Where the reference loops over groups, these use dense masks and einsum: a different
formula for the same math, in float64, so a bug in one is not mirrored in the other.
Also: error metrics, per-dtype tolerances, and the random ragged ``offs`` generator.
"""

from __future__ import annotations

import torch

# Normwise relative error bounds per output dtype for K up to a few thousand: a few ulps of
# the output format plus fp32 accumulation error.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 2e-3,
             torch.bfloat16: 1.6e-2}


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (normwise; 0 for an empty or all-zero reference)."""
    if ref.numel() == 0:
        return 0.0
    err = (out.double() - ref.double()).abs().max().item()
    scale = ref.double().abs().max().item()
    if out.isnan().any().item():
        return float("inf")
    return err / scale if scale > 0 else err


def gemm(a, b, bias=None):
    out = a.double() @ b.double()
    return out if bias is None else out + bias.double()


def _group_ids(offs: torch.Tensor, extent: int) -> torch.Tensor:
    """Group of each index along the ragged dim; == G past offs[-1]."""
    idx = torch.arange(extent, device=offs.device)
    return (idx.unsqueeze(1) >= offs.long().unsqueeze(0)).sum(1)


def grouped_mm(a, b, offs=None, bias=None):
    a, b = a.double(), b.double()
    bias = None if bias is None else bias.double()
    if a.dim() == 3 and b.dim() == 3:
        out = torch.einsum("gmk,gkn->gmn", a, b)
        return out if bias is None else out + bias.unsqueeze(1)
    groups = offs.shape[0]
    if a.dim() == 2 and b.dim() == 3:
        ids = _group_ids(offs, a.shape[0])
        onehot = torch.nn.functional.one_hot(ids, groups + 1)[:, :groups].double()  # (M, G)
        out = torch.einsum("mk,gkn,mg->mn", a, b, onehot)
        return out if bias is None else out + onehot @ bias
    if a.dim() == 3:
        ids = _group_ids(offs, b.shape[1])
        onehot = torch.nn.functional.one_hot(ids, groups + 1)[:, :groups].double()  # (N, G)
        out = torch.einsum("gmk,kn,ng->mn", a, b, onehot)
        return out if bias is None else out + (onehot.sum(1) * bias).unsqueeze(0)
    ids = _group_ids(offs, a.shape[1])
    onehot = torch.nn.functional.one_hot(ids, groups + 1)[:, :groups].double()  # (K, G)
    out = torch.einsum("mk,kn,kg->gmn", a, b, onehot)
    return out if bias is None else out + bias.unsqueeze(1)


def rms_norm(x, weight=None, eps=None):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    nd = weight.dim() if weight is not None else 1
    xd = x.double()
    dims = tuple(range(x.dim() - nd, x.dim()))
    out = xd / torch.sqrt((xd * xd).mean(dim=dims, keepdim=True) + eps)
    return out if weight is None else out * weight.double()


def topk_values(x, k, dim=-1, largest=True):
    return torch.sort(x.double(), dim=dim, descending=largest).values.narrow(dim, 0, k)


def random_offs(sizes: list[int], device="cpu") -> torch.Tensor:
    """int32 cumulative ends for the given group sizes (zeros allowed: empty groups)."""
    return torch.tensor(sizes, dtype=torch.int64).cumsum(0).to(torch.int32).to(device)
