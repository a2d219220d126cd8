"""The kernels of the ``reference`` backend: plain torch math, correct on every device; the oracle for all others.

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
- rms_norm_backward: with r = rsqrt(mean(x^2) + eps), xhat = x * r, gw = grad * weight:
               dx = r * (gw - xhat * mean(gw * xhat)), dweight = sum over the leading
               dims of grad * xhat (an empty (0,) tensor without a weight)
- topk:        torch.topk
- quantize:    FP8/FP4 data and scales (tensorwise, rowwise, MX); see ``quantize`` below
- scaled_mm:   dequantize each operand in fp32 (data * broadcast scale; MX: each 32-block
               along K times its E8M0 scale), fp32 mm, + bias in fp32, cast to output_dtype
- scaled_grouped_mm: the same dequantization, then grouped_mm in fp32 (2Dx3D, 2Dx2D)

Code paths: gemm uses mm/addmm directly when the output dtype equals the input dtype
(ATen's own fp32 accumulation), and an fp32 upcast otherwise. grouped_mm loops over groups
in Python: it must take any size, bias and out_dtype on every device, which
``torch._grouped_mm`` does not (no bias, no out_dtype on CPU; 16-byte stride rule).
Arguments arrive checked by ``xvendor.ops``.
"""

from __future__ import annotations

import torch

from ..numerics import rms_norm_eps

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
    eps = rms_norm_eps(x.dtype, eps)
    acc = _ACC.get(x.dtype, x.dtype)
    dims = tuple(range(-(weight.dim() if weight is not None else 1), 0))
    xf = x.to(acc)
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.to(acc)
    return y.to(x.dtype)


def rms_norm_backward(grad, x, weight=None, eps=None):
    eps = rms_norm_eps(x.dtype, eps)
    acc = _ACC.get(x.dtype, x.dtype)
    dims = tuple(range(-(weight.dim() if weight is not None else 1), 0))
    xf, gf = x.to(acc), grad.to(acc)
    r = torch.rsqrt(xf.pow(2).mean(dim=dims, keepdim=True) + eps)
    xhat = xf * r
    gw = gf * weight.to(acc) if weight is not None else gf
    dx = r * (gw - xhat * (gw * xhat).mean(dim=dims, keepdim=True))
    if weight is None:
        return dx.to(x.dtype), x.new_empty(0)
    lead = tuple(range(x.dim() - weight.dim()))
    dweight = (gf * xhat).sum(dim=lead) if lead else gf * xhat
    return dx.to(x.dtype), dweight.to(weight.dtype)


def topk(x, k, dim=-1, largest=True, sorted=True):
    values, indices = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    return values, indices


# quantize: (max finite magnitude, emax_elem) per element format (OCP MX v1.0, table 1).
_QFORMATS = {torch.float8_e4m3fn: (448.0, 8), torch.float8_e5m2: (57344.0, 15),
             torch.float4_e2m1fn_x2: (6.0, 2)}
_F32_ONE = 127 << 23  # the fp32 bit pattern of 1.0


def _e8m0_rceil(amax, max_pos):
    """E8M0 code of 2^ceil(log2(amax / max_pos)), clamped to [2^-127, 2^127]; NaN -> 0xFF.

    The ceiling is read off the fp32 bits of the quotient (exponent, plus one when any
    mantissa bit is set), so it is exact: an fp32 ``log2`` can round a quotient a few ulps
    above a power of two down onto it (torch's ``to_mxfp`` test helper does that). The
    quotient itself is an fp32 division, as in that helper."""
    bits = (amax / max_pos).view(torch.int32) & 0x7FFFFFFF
    exp, mant = bits >> 23, bits & 0x7FFFFF
    code = torch.where(exp == 0, (bits > (1 << 22)).to(torch.int32),  # subnormal quotient
                       (exp + (mant != 0).to(torch.int32)).clamp(max=254))
    return torch.where(bits > 0x7F800000, 255, code).to(torch.int32)


def _e8m0_floor(amax, emax):
    """E8M0 code of 2^(floor(log2 amax) - emax), clamped to [2^-127, 2^127]; NaN -> 0xFF."""
    bits = amax.view(torch.int32) & 0x7FFFFFFF
    code = ((bits >> 23) - emax).clamp(0, 254)  # a subnormal amax clamps to 2^-127
    code = torch.where(bits == 0x7F800000, 254, code)  # inf, as the rceil clamp does
    return torch.where(bits > 0x7F800000, 255, code).to(torch.int32)


def _mx_descale(code):
    """fp32 multiplier 1/X for E8M0 ``code``, built from bits (exact, subnormals included).

    Code 0 (X = 2^-127) gets 1.0, as in torch's ``to_mxfp`` helper (taken from torchao):
    such a block has amax <= max_pos * 2^-127, so its elements round to zero rather than to
    x * 2^127 (bit-exact with the helper; the loss is below 2^-110 in absolute terms)."""
    bits = torch.where(code <= 253, (254 - code) << 23,
                       torch.where(code == 254, 1 << 22, 1 << 21))  # 2^-127, 2^-128
    return torch.where(code == 0, _F32_ONE, bits).to(torch.int32).view(torch.float32)


def _to_e2m1_codes(v):
    """fp32 values already clamped to [-6, 6] -> e2m1 codes (uint8, low nibble), RNE.

    The grid is 0.5 apart below 2, 1 apart in [2, 4) and 2 apart in [4, 6]; torch.round
    rounds half to even, and each step's even multiples are the even-mantissa codes.
    NaN (no e2m1 encoding; its block's scale is NaN) is stored as +0."""
    a = v.abs()
    code = torch.where(a < 2, torch.round(a * 2),
                       torch.where(a < 4, torch.round(a) + 2, torch.round(a * 0.5) + 4))
    code = torch.nan_to_num(code, nan=0.0).to(torch.uint8)
    sign = (torch.signbit(v) & ~torch.isnan(v)).to(torch.uint8) << 3
    return code | sign


def quantize(x, dtype, recipe, dim=-1, rounding="rceil"):
    """(data, scale) with x ~= data.float() * scale (MX: per 32-block, E8M0 scale).

    Computed along the last dim after moving ``dim`` there; fp32 throughout (fp16/bf16 are
    exact in fp32). Data is contiguous; fp4 is packed two per byte along ``dim``, the lower
    index in the low nibble, stored as float4_e2m1fn_x2."""
    max_pos, emax = _QFORMATS[dtype]
    d = dim % x.dim()
    xf = x.float().movedim(d, -1)
    n = xf.shape[-1]
    if recipe == "mx":
        blocks = xf.reshape(*xf.shape[:-1], n // 32, 32)
        amax = blocks.abs().amax(-1, keepdim=True)
        code = _e8m0_rceil(amax, max_pos) if rounding == "rceil" else _e8m0_floor(amax, emax)
        v = (blocks * _mx_descale(code)).clamp(-max_pos, max_pos).reshape(xf.shape)
        scale = code.squeeze(-1).to(torch.uint8).movedim(-1, d).contiguous()
        scale = scale.view(torch.float8_e8m0fnu)
    else:
        if n == 0 or xf.numel() == 0:  # amax of nothing is 0 (amax refuses empty input)
            amax = xf.new_zeros(() if recipe == "tensorwise" else (*xf.shape[:-1], 1))
        elif recipe == "tensorwise":
            amax = xf.abs().amax()
        else:
            amax = xf.abs().amax(-1, keepdim=True)
        scale = amax / max_pos
        # amax 0, or so small that amax / max_pos underflows: scale 1 keeps x / scale finite.
        scale = torch.where(scale == 0, 1.0, scale)
        v = (xf / scale).clamp(-max_pos, max_pos)
        scale = scale if recipe == "tensorwise" else scale.movedim(-1, d).contiguous()
    if dtype == torch.float4_e2m1fn_x2:
        codes = _to_e2m1_codes(v)
        packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
        return packed.movedim(-1, d).contiguous().view(torch.float4_e2m1fn_x2), scale
    # torch's fp32 -> fp8 casts round to nearest even; the clamp above saturates.
    return v.to(dtype).movedim(-1, d).contiguous(), scale


# scaled_mm: ScalingType values (the op passes ints) and the e2m1 value of each 4-bit code.
_TENSORWISE, _ROWWISE, _MX = 0, 1, 3
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _dequant_data(t, k_dim):
    """fp8 or packed fp4 data -> fp32 values; fp4 unpacked along ``k_dim`` (low nibble =
    lower K index) through a 16-entry table."""
    if t.dtype != torch.float4_e2m1fn_x2:
        return t.float()
    u = t.view(torch.uint8).long()
    table = torch.tensor(_E2M1, dtype=torch.float32, device=t.device)
    both = torch.stack([table[u & 0xF], table[u >> 4]], dim=k_dim + 1)  # (.., 2, ..) after K
    shape = list(t.shape)
    shape[k_dim] *= 2
    return both.reshape(shape)


def _dequant(t, scale, recipe, k_dim):
    """data * scale in fp32 for an operand whose K runs along ``k_dim``; MX scales are
    (rows, K/32) for a and (N, K/32) for b, repeated over their 32-blocks."""
    v = _dequant_data(t, k_dim)
    if recipe == _TENSORWISE:
        return v * scale.float().reshape(())
    if recipe == _ROWWISE:
        return v * scale.float()
    s = scale.float().repeat_interleave(32, dim=1)  # (rows, K)
    return v * (s if k_dim == 1 else s.t())


def _dequant_grouped_b(b, scale, recipe):
    """(G, K, N) b in fp32: RowWise scale (G, N), MX scale (G, N, K/32)."""
    v = _dequant_data(b, 1)
    if recipe == _ROWWISE:
        return v * scale.float().unsqueeze(1)
    return v * scale.float().repeat_interleave(32, dim=2).transpose(1, 2)


def scaled_grouped_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, offs, swizzle_a=0,
                      swizzle_b=0, output_dtype=torch.bfloat16):
    sa = scale_a.unsqueeze(1) if recipe_a == _ROWWISE else scale_a  # RowWise a: (M,) -> (M, 1)
    av = _dequant(a, sa, recipe_a, 1)
    bv = _dequant_grouped_b(b, scale_b, recipe_b) if b.dim() == 3 else \
        _dequant(b, scale_b, recipe_b, 0)
    return grouped_mm(av, bv, offs, out_dtype=output_dtype)


def scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=0, swizzle_b=0,
              bias=None, output_dtype=torch.bfloat16):
    out = torch.mm(_dequant(a, scale_a, recipe_a, 1), _dequant(b, scale_b, recipe_b, 0))
    if bias is not None:
        out += bias.float()
    return out.to(output_dtype)


KERNELS = {"gemm": gemm, "grouped_mm": grouped_mm, "rms_norm": rms_norm,
           "rms_norm_backward": rms_norm_backward, "topk": topk,
           "quantize": quantize, "scaled_mm": scaled_mm, "scaled_grouped_mm": scaled_grouped_mm}
