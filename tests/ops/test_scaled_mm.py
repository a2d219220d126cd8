"""xvendor.scaled_mm: the fp64 oracle on fresh random inputs (every recipe, fp8 pairing, fp4
MX, odd sizes, bias, output dtypes), torch's own CPU _scaled_mm / F.scaled_mm for TensorWise
and RowWise, fp4 packing and MX block scales by hand, every ArgumentError, opcheck,
torch.compile, the dispatcher path, and the self-check cases."""

import importlib

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck
from torch.nn.functional import ScalingType, SwizzleType

import xvendor
from xvendor import numerics as oracle

smod = importlib.import_module("xvendor.ops.scaled_mm")  # xvendor.ops.scaled_mm is the function

pytestmark = pytest.mark.l0

E4, E5, FP4 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2
E8M0 = torch.float8_e8m0fnu
TW, RW, MX = ScalingType.TensorWise, ScalingType.RowWise, ScalingType.BlockWise1x32
_Q = {TW: "tensorwise", RW: "rowwise", MX: "mx"}
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
# opcheck's test_schema compares inputs with allclose, which torch has no fp8 kernel for
# (mul_cpu_reduced_float); no-mutation is checked bitwise in test_inputs_not_mutated.
OPCHECK_UTILS = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def operands(gen, m, k, n, recipe, da=E4, db=E4, b_col_major=False, spread=True):
    """Quantized a (M, K) and b (K, N) with their scales as scaled_mm takes them.

    b_col_major: quantize the (N, K) weight along K and pass its transpose (torch's layout);
    else quantize a row-major (K, N) b along dim 0 (MX scales then transposed to (N, K/32))."""
    x = torch.randn(m, k, generator=gen)
    if spread:  # rows and 32-blocks of very different magnitudes exercise the scales
        x = x * torch.exp2(torch.randint(-6, 7, (m, 1), generator=gen).float())
    a, sa = xvendor.quantize(x, da, _Q[recipe])
    if b_col_major:
        w, sw = xvendor.quantize(torch.randn(n, k, generator=gen), db, _Q[recipe])
        return a, w.t(), sa, (sw.t() if recipe == RW else sw)
    b, sb = xvendor.quantize(torch.randn(k, n, generator=gen), db, _Q[recipe], dim=0)
    return a, b, sa, (sb.t() if recipe == MX else sb)


def check_vs_oracle(a, b, sa, r, sb, rb=None, **kw):
    rb = r if rb is None else rb
    out = xvendor.scaled_mm(a, b, sa, r, sb, rb, **kw)
    expected = smod._oracle(a, b, sa, r, sb, rb, **kw)
    out_dtype = kw.get("output_dtype", torch.bfloat16)
    assert out.dtype == out_dtype and out.shape == expected.shape
    err = oracle.rel_error(out, expected)
    assert err <= oracle.TOLERANCE[out_dtype], err
    assert smod.error(out, expected, (a, b, sa, r, sb, rb), kw) == 0.0
    return out, expected


# ---- against the fp64 oracle ---------------------------------------------------------------

@pytest.mark.parametrize("recipe", [TW, RW, MX])
@pytest.mark.parametrize("da,db", [(E4, E4), (E4, E5), (E5, E4)])
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
def test_fp8_matches_oracle(gen, recipe, da, db, out_dtype):
    k = 96 if recipe == MX else 37
    for m, n, col in ((7, 13, False), (1, 5, True), (33, 1, False)):
        a, b, sa, sb = operands(gen, m, k, n, recipe, da, db, b_col_major=col)
        check_vs_oracle(a, b, sa, recipe, sb, output_dtype=out_dtype)


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("col", [False, True])
def test_fp4_mx_matches_oracle(gen, out_dtype, col):
    for m, k, n in ((5, 64, 9), (1, 32, 3), (17, 160, 11)):
        a, b, sa, sb = operands(gen, m, k, n, MX, FP4, FP4, b_col_major=col)
        assert a.shape == (m, k // 2) and b.shape == (k // 2, n)
        check_vs_oracle(a, b, sa, MX, sb, output_dtype=out_dtype)


@pytest.mark.parametrize("recipe,dt", [(TW, E4), (RW, E5), (MX, E4), (MX, FP4)])
@pytest.mark.parametrize("out_dtype,bias_dtype", [(torch.bfloat16, torch.bfloat16),
                                                  (torch.bfloat16, torch.float32),
                                                  (torch.float16, torch.float16),
                                                  (torch.float32, torch.float32)])
def test_bias(gen, recipe, dt, out_dtype, bias_dtype):
    da, db = (dt, E4) if dt == E5 else (dt, dt)
    a, b, sa, sb = operands(gen, 9, 64, 11, recipe, da, db)
    bias = (torch.randn(11, generator=gen) * 5).to(bias_dtype)
    out, _ = check_vs_oracle(a, b, sa, recipe, sb, bias=bias, output_dtype=out_dtype)
    no_bias = xvendor.scaled_mm(a, b, sa, recipe, sb, recipe, output_dtype=torch.float32)
    want = (no_bias + bias.float()).to(out_dtype)  # bias added in fp32, one rounding
    assert torch.equal(out, want)


def test_row_and_column_major_b_agree(gen):
    a, b, sa, sb = operands(gen, 6, 64, 10, MX)
    ref = xvendor.scaled_mm(a, b, sa, MX, sb, MX, output_dtype=torch.float32)
    col = b.t().contiguous().t()
    assert col.stride() == (1, 64)
    assert torch.equal(xvendor.scaled_mm(a, col, sa, MX, sb.contiguous(), MX,
                                         output_dtype=torch.float32), ref)


@pytest.mark.parametrize("shape", [(0, 32, 4), (3, 32, 0), (3, 0, 4)])
@pytest.mark.parametrize("recipe", [TW, RW, MX])
def test_empty(shape, recipe):
    m, k, n = shape
    a, sa = xvendor.quantize(torch.randn(m, k), E4, _Q[recipe])
    b, sb = xvendor.quantize(torch.randn(k, n), E4, _Q[recipe], dim=0)
    sb = sb.t() if recipe == MX else sb
    bias = torch.randn(n)
    out = xvendor.scaled_mm(a, b, sa, recipe, sb, recipe, bias=bias, output_dtype=torch.float32)
    assert out.shape == (m, n)
    assert torch.equal(out, bias.expand(m, n))  # K = 0: the sum is empty, only bias remains


# ---- semantics by hand -----------------------------------------------------------------------

def test_fp4_packing_and_mx_block_scales_by_hand():
    """a: one row, K = 64; bytes 0x71 = (0.5 low, 6 high) repeated. b: a column of ones
    packed along K. Block scales 2^1 and 2^-2 on a, 2^3 on b's first block."""
    k = 64
    a = torch.full((1, k // 2), 0x71, dtype=torch.uint8).view(FP4)
    b = torch.full((k // 2, 1), 0x22, dtype=torch.uint8).view(FP4)  # 1.0, 1.0
    sa = torch.tensor([[128, 125]], dtype=torch.uint8).view(E8M0)  # 2^1, 2^-2
    sb = torch.tensor([[130, 127]], dtype=torch.uint8).view(E8M0)  # 2^3, 2^0
    out = xvendor.scaled_mm(a, b, sa, MX, sb, MX, output_dtype=torch.float32)
    block = 16 * (0.5 + 6.0)  # 32 elements: 16 pairs
    assert out.item() == block * 2 * 8 + block * 0.25 * 1
    # The low nibble is the lower K index: with b = (1, 0) per byte only the 0.5s count.
    b = torch.full((k // 2, 1), 0x02, dtype=torch.uint8).view(FP4)
    out = xvendor.scaled_mm(a, b, sa, MX, sb, MX, output_dtype=torch.float32)
    assert out.item() == 16 * 0.5 * 2 * 8 + 16 * 0.5 * 0.25


def test_fp4_b_row_major_and_weight_transpose_are_the_same_bytes(gen):
    """quantize(b, dim=0) on a (K, N) b and quantize(b.t()).t() give one operand."""
    bt = torch.randn(64, 5, generator=gen)
    b1, s1 = xvendor.quantize(bt, FP4, "mx", dim=0)
    b2, s2 = xvendor.quantize(bt.t().contiguous(), FP4, "mx")
    assert torch.equal(b1.view(torch.uint8), b2.t().view(torch.uint8))
    assert torch.equal(s1.t().view(torch.uint8), s2.view(torch.uint8))


def test_tensorwise_scale_shapes_accepted(gen):
    a, b, sa, sb = operands(gen, 3, 16, 4, TW)
    ref = xvendor.scaled_mm(a, b, sa, TW, sb, TW, output_dtype=torch.float32)
    for shape in ((1,), (1, 1)):
        out = xvendor.scaled_mm(a, b, sa.reshape(shape), TW, sb.reshape(shape), TW,
                                output_dtype=torch.float32)
        assert torch.equal(out, ref)


def test_recipe_as_int_value_and_no_swizzle(gen):
    a, b, sa, sb = operands(gen, 3, 32, 4, MX)
    ref = xvendor.scaled_mm(a, b, sa, MX, sb, MX)
    out = xvendor.scaled_mm(a, b, sa, 3, sb, 3, swizzle_a=SwizzleType.NO_SWIZZLE, swizzle_b=0)
    assert torch.equal(out, ref)


# ---- against torch's own CPU kernels ---------------------------------------------------------

@pytest.mark.parametrize("recipe", [TW, RW])
@pytest.mark.parametrize("da,db", [(E4, E4), (E4, E5), (E5, E4)])
@pytest.mark.parametrize("col", [False, True])
def test_matches_torch_scaled_mm_on_cpu(gen, recipe, da, db, col):
    """torch's CPU _scaled_mm dequantizes in fp32 and runs an fp32 mm, as ours does: equal
    within fp32 rounding (the mm's summation order may differ)."""
    a, b, sa, sb = operands(gen, 7, 48, 13, recipe, da, db, b_col_major=col)
    bias = torch.randn(13, generator=gen).bfloat16()
    ours = xvendor.scaled_mm(a, b, sa, recipe, sb, recipe, output_dtype=torch.float32)
    theirs = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
    scale = theirs.abs().max().item()
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6 * scale)
    ours = xvendor.scaled_mm(a, b, sa, recipe, sb, recipe, bias=bias)
    theirs = F.scaled_mm(a, b, sa, recipe, sb, recipe, bias=bias, output_dtype=torch.bfloat16)
    assert theirs.dtype == ours.dtype == torch.bfloat16
    # one bf16 rounding of fp32 values that agree to fp32 rounding: at most one bf16 ulp
    torch.testing.assert_close(ours.float(), theirs.float(), rtol=2 ** -7, atol=1e-6 * scale)


# ---- bad input -------------------------------------------------------------------------------

def _good(gen=None, recipe=RW, da=E4, db=E4, m=5, k=64, n=7):
    gen = gen or torch.Generator().manual_seed(0)
    a, b, sa, sb = operands(gen, m, k, n, recipe, da, db)
    return [a, b, sa, recipe, sb, recipe], {}


def _bad_cases():
    g = torch.Generator().manual_seed(0)
    rw = _good(g)[0]
    mx = _good(g, MX)[0]
    tw = _good(g, TW)[0]
    fp4 = _good(g, MX, FP4, FP4)[0]
    a, b, sa, _, sb, _ = rw
    cases = [
        ((a, b, sa, "rowwise", sb, RW), {},
         r"recipe_a must be a torch.nn.functional.ScalingType"),
        ((a, b, sa, RW, sb, True), {}, r"recipe_b must be a torch.nn.functional.ScalingType"),
        ((a, b, sa, RW, sb, TW), {}, r"recipe_b recipes must be TensorWise/TensorWise, RowWise/"
                                     r"RowWise or BlockWise1x32/BlockWise1x32, "
                                     r"got RowWise/TensorWise"),
        ((a, b, sa, ScalingType.BlockWise1x128, sb, ScalingType.BlockWise1x128), {},
         r"got BlockWise1x128/BlockWise1x128"),
        (tuple(rw), {"swizzle_a": SwizzleType.SWIZZLE_32_4_4}, r"swizzle_a must be None or "
                                                               r"SwizzleType.NO_SWIZZLE"),
        (tuple(rw), {"swizzle_b": 2}, r"swizzle_b must be None or SwizzleType.NO_SWIZZLE"),
        ((a.float(), b, sa, RW, sb, RW), {}, r"a must be float8_e4m3fn, float8_e5m2 or "
                                             r"float4_e2m1fn_x2, got torch.float32"),
        ((a, b.view(torch.int8), sa, RW, sb, RW), {}, r"b must be float8_e4m3fn"),
        ((a.view(E5), b.view(E5), sa, RW, sb, RW), {}, r"b float8_e5m2 x float8_e5m2 is not "
                                                       r"supported"),
        ((fp4[0], mx[1][:32], fp4[2], MX, mx[4], MX), {}, r"b fp4 multiplies only fp4"),
        ((a.view(torch.uint8).view(FP4), b.view(torch.uint8)[:5].view(FP4).t(), sa, RW, sa, RW),
         {}, r"recipe_a fp4 operands need BlockWise1x32"),
        ((a[:, :32], b, sa, RW, sb, RW), {}, r"b inner dimensions must match: a is \(5, 32\), "
                                             r"b is \(64, 7\)"),
        ((fp4[0], fp4[1][:16], fp4[2], MX, fp4[4], MX), {},
         r"b inner dimensions must match \(fp4: K/2 bytes each, packed along K\)"),
        ((a[0], b, sa, RW, sb, RW), {}, r"a must be 2-D \(M, K\), got shape \(64,\)"),
        ((a, b.unsqueeze(0), sa, RW, sb, RW), {}, r"b must be 2-D \(K, N\)"),
        ((a, b, sa.t(), RW, sb, RW), {}, r"scale_a must have shape \(M, 1\) = \(5, 1\) for "
                                         r"RowWise, got \(1, 5\)"),
        ((a, b, sa, RW, sb.t(), RW), {}, r"scale_b must have shape \(1, N\) = \(1, 7\)"),
        ((a, b, sa.double(), RW, sb, RW), {}, r"scale_a must be torch.float32 for RowWise, "
                                              r"got torch.float64"),
        ((a, b, tw[2].reshape(1, 1, 1), TW, tw[4], TW), {}, r"scale_a must hold one element "
                                                            r"for TensorWise"),
        ((a, b, tw[2], TW, sb, TW), {}, r"scale_b must hold one element for TensorWise"),
        ((mx[0], mx[1], mx[2].t(), MX, mx[4], MX), {}, r"scale_a must have shape \(M, K/32\) = "
                                                       r"\(5, 2\) for BlockWise1x32"),
        ((mx[0], mx[1], mx[2], MX, mx[4].t(), MX), {}, r"scale_b must have shape \(N, K/32\) = "
                                                       r"\(7, 2\)"),
        ((mx[0], mx[1], mx[2].view(torch.uint8), MX, mx[4], MX), {},
         r"scale_a must be torch.float8_e8m0fnu for BlockWise1x32, got torch.uint8"),
        ((mx[0], mx[1], mx[2], MX, sb, MX), {}, r"scale_b must be torch.float8_e8m0fnu"),
        ((mx[0][:, :48], mx[1][:48], mx[2], MX, mx[4], MX), {},
         r"a K must be a multiple of 32 for BlockWise1x32.*got K=48"),
        ((fp4[0][:, :8], fp4[1][:8], fp4[2], MX, fp4[4], MX), {},
         r"a K must be a multiple of 32 for BlockWise1x32.*got K=16"),
        (tuple(rw), {"output_dtype": E4}, r"output_dtype must be torch.bfloat16, torch.float16 "
                                          r"or torch.float32, got torch.float8_e4m3fn"),
        (tuple(rw), {"output_dtype": torch.float64}, r"output_dtype must be"),
        (tuple(rw), {"bias": torch.randn(5)}, r"bias must have shape \(N,\) = \(7,\), got \(5,\)"),
        (tuple(rw), {"bias": torch.randn(1, 7)}, r"bias must have shape \(N,\)"),
        (tuple(rw), {"bias": torch.randn(7).half()}, r"bias dtype must be output_dtype "
                                                     r"\(torch.bfloat16\) or torch.float32, "
                                                     r"got torch.float16"),
        (tuple(rw), {"bias": [0.0] * 7}, r"bias must be a torch.Tensor"),
        ((a, b, 1.0, RW, sb, RW), {}, r"scale_a must be a torch.Tensor"),
        (([1.0], b, sa, RW, sb, RW), {}, r"a must be a torch.Tensor"),
        ((a, b.to("meta"), sa, RW, sb, RW), {}, r"b must be on the same device as a \(cpu\), "
                                                r"got meta"),
        ((a, b, sa, RW, sb.to("meta"), RW), {}, r"scale_b must be on the same device as a"),
        (tuple(rw), {"bias": torch.randn(7, device="meta")}, r"bias must be on the same device"),
    ]
    return cases


@pytest.mark.parametrize("args,kwargs,match", _bad_cases())
def test_bad_input_names_argument_and_rule(args, kwargs, match):
    with pytest.raises(xvendor.ArgumentError, match=match):
        xvendor.scaled_mm(*args, **kwargs)


def test_bad_input_raises_at_trace_time_through_the_fake():
    a, b, sa, _, sb, _ = _good()[0]
    meta = [t.to("meta") for t in (a, b, sa, sb)]
    with pytest.raises(xvendor.ArgumentError, match=r"scale_a must have shape \(M, 1\)"):
        torch.ops.xvendor.scaled_mm(meta[0], meta[1], meta[2].t(), 1, meta[3], 1)
    with pytest.raises(xvendor.ArgumentError, match=r"swizzle_b must be None"):
        torch.ops.xvendor.scaled_mm(*meta[:3], 1, meta[3], 1, None, 1)


def test_explicit_backend_not_serving_scaled_mm_raises():
    a, b, sa, _, sb, _ = _good()[0]
    with pytest.raises(xvendor.BackendUnavailable):
        xvendor.scaled_mm(a, b, sa, RW, sb, RW, backend="triton")


# ---- torch.library, compile, dispatcher path, no autograd, self-check ------------------------

@pytest.mark.parametrize("recipe,da,db", [(TW, E4, E5), (RW, E5, E4), (MX, E4, E4), (MX, FP4, FP4)])
def test_opcheck(gen, recipe, da, db):
    a, b, sa, sb = operands(gen, 5, 64, 9, recipe, da, db, b_col_major=recipe == MX)
    for kw in ({}, {"bias": torch.randn(9, generator=gen), "output_dtype": torch.float32}):
        opcheck(torch.ops.xvendor.scaled_mm.default, (a, b, sa, recipe.value, sb, recipe.value),
                kw, test_utils=OPCHECK_UTILS)


def test_fake_accepts_what_eager_accepts(gen):
    """Row-major b and sizes off 16, which torch's own meta for _scaled_mm refuses."""
    a, b, sa, sb = operands(gen, 5, 37, 7, RW)
    assert b.stride() == (7, 1)
    out = torch.ops.xvendor.scaled_mm(*(t.to("meta") for t in (a, b, sa)), 1, sb.to("meta"), 1,
                                      output_dtype=torch.float16)
    assert out.shape == (5, 7) and out.dtype == torch.float16 and out.is_meta
    with pytest.raises(RuntimeError):
        torch._scaled_mm(a.to("meta"), b.to("meta"), sa.to("meta"), sb.to("meta"))


def test_inputs_not_mutated(gen):
    args = operands(gen, 5, 64, 9, MX, FP4, FP4)
    before = [t.view(torch.uint8).clone() if t.element_size() == 1 else t.clone() for t in args]
    a, b, sa, sb = args
    xvendor.scaled_mm(a, b, sa, MX, sb, MX)
    torch.ops.xvendor.scaled_mm(a, b, sa, 3, sb, 3)
    for t, old in zip(args, before):
        assert torch.equal(t.view(torch.uint8) if t.element_size() == 1 else t, old)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("recipe,da", [(RW, E4), (MX, E4), (MX, FP4), (TW, E5)])
def test_compile_fullgraph(gen, backend, recipe, da):
    torch._dynamo.reset()
    db = E4 if da == E5 else da
    a, b, sa, sb = operands(gen, 7, 64, 5, recipe, da, db)
    bias = torch.randn(5, generator=gen)

    @torch.compile(fullgraph=True, backend=backend)
    def f(a, b, sa, sb, bias):
        return xvendor.scaled_mm(a, b, sa, recipe, sb, recipe, bias=bias * 2,
                                 swizzle_a=SwizzleType.NO_SWIZZLE, output_dtype=torch.float32)

    eager = xvendor.scaled_mm(a, b, sa, recipe, sb, recipe, bias=bias * 2,
                              output_dtype=torch.float32)
    assert torch.equal(f(a, b, sa, sb, bias), eager)


def test_dispatcher_path_equals_fast_path(gen):
    a, b, sa, sb = operands(gen, 5, 64, 9, MX, FP4, FP4)
    fast = xvendor.scaled_mm(a, b, sa, MX, sb, MX, output_dtype=torch.float32)
    xvendor.set_fast_path(False)
    try:
        slow = xvendor.scaled_mm(a, b, sa, MX, sb, MX, output_dtype=torch.float32)
    finally:
        xvendor.set_fast_path(True)
    assert torch.equal(fast, slow)
    assert torch.equal(torch.ops.xvendor.scaled_mm(a, b, sa, 3, sb, 3, output_dtype=torch.float32),
                       fast)


@pytest.mark.parametrize("which", ["bias", "scale_a", "scale_b"])
def test_not_differentiable(gen, which):
    """A tensor requiring grad takes the op, whose backward says there is no formula (the
    eager fast path would otherwise differentiate through the reference kernel)."""
    a, b, sa, sb = operands(gen, 3, 32, 4, RW)
    kw = {"bias": torch.randn(4), "scale_a": sa.clone(), "scale_b": sb.clone()}
    kw[which].requires_grad_(True)
    out = xvendor.scaled_mm(a, b, kw["scale_a"], RW, kw["scale_b"], RW, bias=kw["bias"],
                            output_dtype=torch.float32)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        out.sum().backward()


def test_error_hook_rejects_wrong_dtype_shape_and_values(gen):
    a, b, sa, sb = operands(gen, 5, 64, 9, RW)
    args, kw = (a, b, sa, RW, sb, RW), {}
    out, expected = xvendor.scaled_mm(*args), smod._oracle(*args)
    assert smod.error(out, expected, args, kw) == 0.0
    assert smod.error(out.float(), expected, args, kw) == float("inf")
    assert smod.error(out[:4], expected, args, kw) == float("inf")
    bad = out.clone()
    bad[2, 3] += expected.abs().max().item() * 0.1
    assert smod.error(bad, expected, args, kw) > 1


# ==== scaled_grouped_mm: 2Dx3D (RowWise, MX) and 2Dx2D ragged K (MX) ===========================

gmod = importlib.import_module("xvendor.ops.scaled_grouped_mm")


def grouped_operands(gen, m, k, n, g, recipe, da=E4, db=E4):
    """a (M, K) quantized along K; b (G, K, N) as the transpose of (G, N, K) weights
    quantized along K. RowWise scales (M,) and (G, N); MX (M, K/32) and (G, N, K/32)."""
    x = torch.randn(m, k, generator=gen)
    x = x * torch.exp2(torch.randint(-4, 5, (m, 1), generator=gen).float())
    a, sa = xvendor.quantize(x, da, _Q[recipe])
    w, sw = xvendor.quantize(torch.randn(g, n, k, generator=gen), db, _Q[recipe])
    if recipe == RW:
        sa, sw = sa.squeeze(-1), sw.squeeze(-1)
    return a, w.transpose(-2, -1), sa, sw


def check_grouped(a, b, sa, r, sb, offs, **kw):
    out = xvendor.scaled_grouped_mm(a, b, sa, r, sb, r, offs, **kw)
    expected = gmod._oracle(a, b, sa, r, sb, r, offs, **kw)
    out_dtype = kw.get("output_dtype", torch.bfloat16)
    assert out.dtype == out_dtype and out.shape == expected.shape
    assert oracle.rel_error(out, expected) <= oracle.TOLERANCE[out_dtype]
    assert gmod.error(out, expected, (a, b, sa, r, sb, r, offs), kw) == 0.0
    return out


@pytest.mark.parametrize("recipe,da,db", [(RW, E4, E4), (RW, E4, E5), (RW, E5, E4),
                                          (MX, E4, E4), (MX, E5, E4), (MX, FP4, FP4)])
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
def test_grouped_2d3d_matches_oracle(gen, recipe, da, db, out_dtype):
    k = 96 if recipe == MX else 40
    a, b, sa, sb = grouped_operands(gen, 37, k, 11, 4, recipe, da, db)
    offs = oracle.random_offs([9, 0, 17, 6])  # an empty group; rows 32..36 past offs[-1]
    out = check_grouped(a, b, sa, recipe, sb, offs, output_dtype=out_dtype)
    assert (out[32:] == 0).all()


@pytest.mark.parametrize("recipe,dt", [(RW, E4), (MX, E4), (MX, FP4)])
def test_grouped_2d3d_equals_scaled_mm_per_group(gen, recipe, dt):
    a, b, sa, sb = grouped_operands(gen, 29, 64, 7, 3, recipe, dt, dt)
    offs = oracle.random_offs([10, 3, 12])
    out = xvendor.scaled_grouped_mm(a, b, sa, recipe, sb, recipe, offs,
                                    output_dtype=torch.float32)
    for g, (s, e) in enumerate([(0, 10), (10, 13), (13, 25)]):
        sa_g = sa[s:e].unsqueeze(-1) if recipe == RW else sa[s:e]
        sb_g = sb[g].unsqueeze(0) if recipe == RW else sb[g]
        want = xvendor.scaled_mm(a[s:e], b[g], sa_g, recipe, sb_g, recipe,
                                 output_dtype=torch.float32)
        # Two different torch kernels (grouped vs one GEMM) may sum the K=64 products in
        # another order (seen on an AVX-512 CPU: ~9 ulp): equal up to fp32 reordering,
        # k * eps of the largest output (a wrong group or scale is off by O(1)).
        bound = 64 * torch.finfo(torch.float32).eps * want.abs().max()
        assert ((out[s:e] - want).abs() <= bound).all(), (out[s:e] - want).abs().max()
    assert (out[25:] == 0).all()


@pytest.mark.parametrize("dt", [E4, FP4])
@pytest.mark.parametrize("sizes", [[64, 0, 32, 50], [32], [0, 96]])
def test_grouped_2d2d_mx_matches_oracle(gen, dt, sizes):
    k = 160
    a, sa = xvendor.quantize(torch.randn(5, k, generator=gen), dt, "mx")
    b, sb = xvendor.quantize(torch.randn(k, 9, generator=gen), dt, "mx", dim=0)
    offs = oracle.random_offs(sizes)
    out = check_grouped(a, b, sa, MX, sb.t(), offs, output_dtype=torch.float32)
    assert out.shape == (len(sizes), 5, 9)


def _grouped_bad_cases():
    g = torch.Generator().manual_seed(0)
    a, b, sa, sb = grouped_operands(g, 12, 64, 5, 3, RW)
    ma, mb, msa, msb = grouped_operands(g, 12, 64, 5, 3, MX)
    offs = oracle.random_offs([4, 4, 4])
    k2 = xvendor.quantize(torch.randn(64, 5), E4, "mx", dim=0)
    kb, ksb = k2[0], k2[1].t()
    koffs = oracle.random_offs([32, 32])
    return [
        ((a, b, sa, RW, sb, RW, offs), {"swizzle_b": SwizzleType.SWIZZLE_32_8},
         r"swizzle_b must be None or SwizzleType.NO_SWIZZLE"),
        ((a.unsqueeze(0), b, sa, RW, sb, RW, None), {}, r"b layouts supported are 2Dx3D"),
        ((a, b, sa[:1].reshape(()), TW, sb[0, :1].reshape(()), TW, offs), {},
         r"recipe_a must be RowWise or BlockWise1x32 for 2Dx3D"),
        ((a, b, sa, RW, sb, MX, offs), {}, r"recipe_b recipes must be"),
        ((a.view(E5), b.view(E5), sa, RW, sb, RW, offs), {}, r"float8_e5m2 x float8_e5m2"),
        ((a, b, sa.unsqueeze(-1), RW, sb, RW, offs), {},
         r"scale_a must have shape \(M,\) = \(12,\)"),
        ((a, b, sa, RW, sb.t(), RW, offs), {}, r"scale_b must have shape \(G, N\) = \(3, 5\)"),
        ((ma, mb, msa, MX, msb.transpose(1, 2), MX, offs), {},
         r"scale_b must have shape \(G, N, K/32\) = \(3, 5, 2\)"),
        ((a, b, sa, RW, sb, RW, offs.long()), {}, r"offs must be a 1-D int32 tensor"),
        ((a, b, sa, RW, sb, RW, offs[:2]), {}, r"offs must have one entry per group of b: b has 3"),
        ((a, b, sa, RW, sb, RW, oracle.random_offs([4, 4, 5])), {},
         r"offs last entry must be at most the rows of a \(12\), got offs\[-1\] = 13"),
        ((a, b, sa, RW, sb, RW, torch.tensor([4, 2, 8], dtype=torch.int32)), {},
         r"offs must be non-decreasing"),
        ((a, b, sa, RW, sb, RW, torch.tensor([-1, 2, 8], dtype=torch.int32)), {},
         r"offs must be non-negative"),
        ((a, b, sa, RW, sb, RW, offs), {"output_dtype": torch.float64}, r"output_dtype must be"),
        ((a, b[:, :32], sa, RW, sb, RW, offs), {}, r"b inner dimensions must match"),
        ((ma, mb, msa, MX, msb, MX, offs.to("meta")), {}, r"offs must be on the same device"),
        ((ma, kb, msa, MX, ksb, MX, koffs), {}, None),  # the valid 2Dx2D call
        ((a, b[0], sa, RW, sb[0], RW, koffs), {},
         r"recipe_a must be BlockWise1x32 for 2Dx2D \(ragged K\)"),
        ((ma, kb, msa, MX, ksb, MX, torch.tensor([16, 64], dtype=torch.int32)), {},
         r"offs group starts must be multiples of 32 under BlockWise1x32.*offs\[0\] = 16"),
        ((ma, kb, msa, MX, ksb, MX, torch.tensor([32, 40, 64], dtype=torch.int32)), {},
         r"offs group starts must be multiples of 32.*offs\[1\] = 40"),
        ((ma, kb, msa, MX, ksb, MX, torch.tensor([32, 96], dtype=torch.int32)), {},
         r"offs last entry must be at most the K \(64\)"),
        ((ma, kb, msa, MX, ksb, MX, koffs[:0]), {}, r"offs must have at least one group"),
        ((ma, kb, msa, MX, ksb.t(), MX, koffs), {}, r"scale_b must have shape \(N, K/32\)"),
    ]


@pytest.mark.parametrize("args,kwargs,match", _grouped_bad_cases())
def test_grouped_bad_input_names_argument_and_rule(args, kwargs, match):
    if match is None:
        xvendor.scaled_grouped_mm(*args, **kwargs)
        return
    with pytest.raises(xvendor.ArgumentError, match=match):
        xvendor.scaled_grouped_mm(*args, **kwargs)


@pytest.mark.parametrize("recipe,dt,layout", [(RW, E4, "2d3d"), (MX, FP4, "2d3d"),
                                              (MX, E4, "2d2d")])
def test_grouped_opcheck_and_compile(gen, recipe, dt, layout):
    if layout == "2d3d":
        a, b, sa, sb = grouped_operands(gen, 21, 64, 6, 3, recipe, dt, dt)
        offs = oracle.random_offs([5, 0, 11])
    else:
        a, sa = xvendor.quantize(torch.randn(5, 96, generator=gen), dt, "mx")
        b, sb = xvendor.quantize(torch.randn(96, 7, generator=gen), dt, "mx", dim=0)
        sb, offs = sb.t(), oracle.random_offs([32, 0, 40])
    opcheck(torch.ops.xvendor.scaled_grouped_mm.default,
            (a, b, sa, recipe.value, sb, recipe.value, offs), {"output_dtype": torch.float32},
            test_utils=OPCHECK_UTILS)
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, backend="aot_eager")
    def f(a, b, sa, sb, offs):
        return xvendor.scaled_grouped_mm(a, b, sa, recipe, sb, recipe, offs,
                                         output_dtype=torch.float32)

    eager = xvendor.scaled_grouped_mm(a, b, sa, recipe, sb, recipe, offs,
                                      output_dtype=torch.float32)
    assert torch.equal(f(a, b, sa, sb, offs), eager)


def test_grouped_fake_shape_matches_torch_meta(gen):
    a, b, sa, sb = grouped_operands(gen, 32, 64, 16, 4, RW)
    offs = oracle.random_offs([8, 0, 16, 6])
    meta = [t.to("meta") for t in (a, b, sa, sb, offs)]
    ours = torch.ops.xvendor.scaled_grouped_mm(meta[0], meta[1], meta[2], 1, meta[3], 1, meta[4])
    theirs = torch._scaled_grouped_mm(meta[0], meta[1], meta[2], meta[3], offs=meta[4],
                                      out_dtype=torch.bfloat16)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype


def test_grouped_not_differentiable(gen):
    a, b, sa, sb = grouped_operands(gen, 8, 32, 3, 2, RW)
    sa = sa.clone().requires_grad_(True)
    out = xvendor.scaled_grouped_mm(a, b, sa, RW, sb, RW, oracle.random_offs([3, 5]))
    with pytest.raises(RuntimeError, match="no autograd formula"):
        out.float().sum().backward()


def test_explain_decides_on_the_output_dtype():
    """The operands are fp8, which no backend record lists: the op dispatches (and explain
    decides) on output_dtype."""
    from torch.nn.functional import ScalingType
    x, w = torch.randn(8, 64), torch.randn(64, 16)
    a, sa = xvendor.quantize(x, torch.float8_e4m3fn, "rowwise")
    b, sb = xvendor.quantize(w, torch.float8_e4m3fn, "rowwise", dim=0)
    args = (a, b, sa, ScalingType.RowWise, sb, ScalingType.RowWise)
    dec = xvendor.explain("scaled_mm", *args, output_dtype=torch.float32)
    assert dec.backend == "torch" and dec.dtype == torch.float32  # torch serves RowWise on cpu
    assert xvendor.explain("scaled_mm", *args).dtype == torch.bfloat16
