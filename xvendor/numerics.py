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


def rms_norm_eps(dtype: torch.dtype, eps=None) -> float:
    """``eps``, or rms_norm's default for an input of ``dtype``: the machine epsilon of the
    dtype torch computes in, float32 for fp16/bf16/fp32 and float64 for fp64.

    NOTE [rms_norm's default eps]: this is what torch's ``rms_norm`` does (its CPU and CUDA
    kernels and its decomposition for the compiler all take the epsilon of the upcast
    dtype), while ``F.rms_norm``'s documentation says ``torch.finfo(x.dtype).eps``. For a
    bf16 input the two differ by 2**16 (7.8e-3 vs 1.2e-7), enough to change the result
    of an input whose mean square is small. Every backend and oracle resolves ``None``
    here, so the ``torch`` floor, the reference and the kernels of ours agree.
    """
    if eps is not None:
        return eps
    return _EPS64 if dtype is torch.float64 else _EPS32


_EPS32, _EPS64 = torch.finfo(torch.float32).eps, torch.finfo(torch.float64).eps


def rms_norm(x, weight=None, eps=None):
    eps = rms_norm_eps(x.dtype, eps)
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


# --- quantize: an fp64 oracle from the OCP MX v1.0 formulas (frexp, not bit tricks) --------
# (exponent bits, mantissa bits, max finite magnitude, emax_elem) per element format.
QFORMATS = {torch.float8_e4m3fn: (4, 3, 448.0, 8), torch.float8_e5m2: (5, 2, 57344.0, 15),
            torch.float4_e2m1fn_x2: (2, 1, 6.0, 2)}


def _round_to_format(v: torch.Tensor, ebits: int, mbits: int, max_pos: float) -> torch.Tensor:
    """fp64 values -> nearest (ties to even) value of the format, saturated to +-max_pos."""
    a = v.abs()
    emin = 2 - 2 ** (ebits - 1)  # 1 - bias
    _, e = torch.frexp(torch.where(a > 0, a, 1.0))
    e = torch.clamp(e.double() - 1, min=emin)  # floor(log2 a), subnormals share emin
    quantum = torch.exp2(e - mbits)
    r = torch.clamp(torch.round(a / quantum) * quantum, max=max_pos)
    return torch.where(torch.signbit(v), -r, r)


def _encode(r: torch.Tensor, ebits: int, mbits: int) -> torch.Tensor:
    """Representable fp64 values -> the format's bit codes (int64); NaN -> -1."""
    bias = 2 ** (ebits - 1) - 1
    a = r.abs()
    _, e = torch.frexp(torch.where(a > 0, a, 1.0))
    e = e.double() - 1
    normal = a >= 2.0 ** (1 - bias)  # zero and subnormals: exponent field 0
    exp_field = torch.where(normal, e + bias, 0.0)
    mant = torch.where(normal, a / torch.exp2(e) - 1, a / 2.0 ** (1 - bias)) * 2 ** mbits
    code = (exp_field * 2 ** mbits + mant).long()
    code = code | (torch.signbit(r).long() << (ebits + mbits))
    return torch.where(torch.isnan(r), -1, code)


def decode(codes: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bit codes (one element per entry, fp4 unpacked) -> fp64 values; NaN codes -> NaN."""
    ebits, mbits, _, _ = QFORMATS[dtype]
    bias = 2 ** (ebits - 1) - 1
    c = codes.long()
    sign = torch.where((c >> (ebits + mbits)) & 1 == 1, -1.0, 1.0)
    ef, m = ((c >> mbits) & (2 ** ebits - 1)).double(), (c & (2 ** mbits - 1)).double()
    val = torch.where(ef > 0, (1 + m / 2 ** mbits) * torch.exp2(ef - bias),
                      m / 2 ** mbits * 2.0 ** (1 - bias)) * sign
    low = c & (2 ** (ebits + mbits) - 1)
    if dtype == torch.float8_e4m3fn:
        val = torch.where(low == 0x7F, float("nan"), val)
    elif dtype == torch.float8_e5m2:
        val = torch.where(low > 0x7C, float("nan"),
                          torch.where(low == 0x7C, sign * float("inf"), val))
    return val


def element_codes(data: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """One uint8 code per element: fp8 bits, or fp4 unpacked along ``dim`` (low nibble =
    lower index)."""
    u = data.view(torch.uint8)
    if data.dtype != torch.float4_e2m1fn_x2:
        return u
    d = dim % u.dim()
    u = u.movedim(d, -1)
    both = torch.stack([u & 0xF, u >> 4], dim=-1).reshape(*u.shape[:-1], 2 * u.shape[-1])
    return both.movedim(-1, d)


def e8m0_value(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 codes (uint8) -> fp64: 2^(code - 127); 0xFF is NaN."""
    c = codes.double()
    return torch.where(c == 255, float("nan"), torch.exp2(c - 127))


def _e8m0_oracle(amax: torch.Tensor, max_pos: float, emax: int, rounding: str):
    """fp64 amax -> E8M0 code (int64) by the formulas, via frexp."""
    if rounding == "rceil":
        q = (amax / max_pos).float().double()  # the rule's quotient is an fp32 division
        m, e = torch.frexp(torch.where(q > 0, q, 1.0))
        exp = torch.where(m == 0.5, e - 1, e).double()  # ceil(log2 q)
    else:
        _, e = torch.frexp(torch.where(amax > 0, amax, 1.0))
        q = amax
        exp = e.double() - 1 - emax  # floor(log2 amax) - emax
    exp = torch.where(q > 0, exp, -127.0)  # 0 -> the smallest scale
    code = (exp.clamp(-127, 127) + 127).long()
    code = torch.where(torch.isinf(q), 254, code)
    return torch.where(torch.isnan(q), 255, code)


def quantize(x, dtype, recipe, dim=-1, rounding="rceil"):
    """fp64 oracle of ``xvendor.quantize``: (element codes unpacked, int64, NaN -> -1;
    scale as fp64 values for tensorwise/rowwise, E8M0 codes (int64) for mx)."""
    ebits, mbits, max_pos, emax = QFORMATS[dtype]
    d = dim % x.dim()
    xd = x.double().movedim(d, -1)
    n = xd.shape[-1]
    if recipe == "mx":
        blocks = xd.reshape(*xd.shape[:-1], n // 32, 32)
        amax = blocks.abs().amax(-1, keepdim=True) if blocks.numel() else \
            blocks.new_zeros(*blocks.shape[:-1], 1)
        code = _e8m0_oracle(amax, max_pos, emax, rounding)
        # Code 0 divides by 1 (torch's to_mxfp rule; its elements all round to 0), code 255
        # (NaN) by 2^128 like the kernel's 2^(127 - code).
        divisor = torch.where(code == 0, 1.0, torch.exp2(code.double() - 127))
        v = (blocks / divisor).reshape(xd.shape)
        scale = code.squeeze(-1).movedim(-1, d)
    else:
        if xd.numel() == 0:  # amax of nothing is 0
            amax = xd.new_zeros(() if recipe == "tensorwise" else (*xd.shape[:-1], 1))
        elif recipe == "tensorwise":
            amax = xd.abs().amax()
        else:
            amax = xd.abs().amax(-1, keepdim=True)
        s = (amax / max_pos).float().double()
        s = torch.where(s == 0, 1.0, s)
        v = (xd / s).float().double()  # the rule divides in fp32, then rounds to the format
        scale = s if recipe == "tensorwise" else s.movedim(-1, d)
    r = _round_to_format(v, ebits, mbits, max_pos)
    codes = _encode(r, ebits, mbits)
    if dtype == torch.float4_e2m1fn_x2:
        codes = torch.where(codes < 0, 0, codes)  # NaN: no e2m1 code; stored as +0
    return codes.movedim(-1, d), scale


# --- scaled_mm: fp64 oracle from the element formats' bit rules ------------------------------

def scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, bias=None):
    """fp64 (M, N) of ``xvendor.scaled_mm`` before its output rounding: element codes decoded
    by ``decode`` (fp4 unpacked by ``element_codes``), the products summed with einsum and
    the scales applied outside the sum (per-tensor/row/column) or per 32-block along K
    (MX, E8M0 decoded from its bits), not by scaling the operands as the reference does.
    Recipes are ScalingType int values: 0 TensorWise, 1 RowWise, 3 BlockWise1x32."""
    av = decode(element_codes(a, dim=1), a.dtype)  # (M, K)
    bv = decode(element_codes(b, dim=0), b.dtype)  # (K, N)
    m, k = av.shape
    n = bv.shape[1]
    if recipe_a == 3:
        sa = e8m0_value(scale_a.view(torch.uint8))  # (M, K/32)
        sb = e8m0_value(scale_b.view(torch.uint8))  # (N, K/32)
        out = torch.einsum("mjc,jcn,mj,nj->mn", av.reshape(m, k // 32, 32),
                           bv.reshape(k // 32, 32, n), sa, sb)
    else:
        out = torch.einsum("mk,kn->mn", av, bv)
        if recipe_a == 0:
            out = out * scale_a.double().reshape(()) * scale_b.double().reshape(())
        else:
            out = out * scale_a.double().reshape(m, 1) * scale_b.double().reshape(1, n)
    return out if bias is None else out + bias.double()


def scaled_grouped_mm(a, b, scale_a, recipe, scale_b, offs):
    """fp64 oracle of ``xvendor.scaled_grouped_mm`` (2Dx3D: RowWise or MX; 2Dx2D: MX):
    each element decoded from its bits times its own scale (MX: E8M0 per 32-block along K),
    then the one-hot ``grouped_mm`` oracle above."""
    av = decode(element_codes(a, dim=1), a.dtype)  # (M, K)
    bv = decode(element_codes(b, dim=b.dim() - 2), b.dtype)  # (G, K, N) or (K, N)
    if recipe == 1:  # RowWise: scale_a (M,), scale_b (G, N)
        av = av * scale_a.double().unsqueeze(1)
        bv = bv * scale_b.double().unsqueeze(1)
    else:
        sa = e8m0_value(scale_a.view(torch.uint8))  # (M, K/32)
        sb = e8m0_value(scale_b.view(torch.uint8))  # (G, N, K/32) or (N, K/32)
        m, k = av.shape
        av = (av.reshape(m, k // 32, 32) * sa.unsqueeze(-1)).reshape(m, k)
        sb_kn = sb.movedim(-1, -2).unsqueeze(-2)  # (.., K/32, 1, N)
        bv = (bv.reshape(*bv.shape[:-2], k // 32, 32, bv.shape[-1]) * sb_kn).reshape(bv.shape)
    return grouped_mm(av, bv, offs)
