"""xvendor.quantize: bit-exact vs torch's to_mxfp helper (rceil), the fp64 OCP oracle
(floor, tensorwise, rowwise), saturation, round-trip bounds, fp4 packing, bad input,
opcheck, torch.compile, explain and the self-check cases."""

import ast
import importlib
import math
from pathlib import Path

import pytest
import torch
from torch.library import opcheck
from torch.nn.functional import ScalingType

import xvendor
from xvendor import numerics as oracle
qmod = importlib.import_module("xvendor.ops.quantize")  # xvendor.ops.quantize is the function

pytestmark = pytest.mark.l0

E4, E5, FP4 = torch.float8_e4m3fn, torch.float8_e5m2, torch.float4_e2m1fn_x2
FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _torch_to_mxfp():
    """torch's own ``to_mxfp`` test helper. Its module imports torch's test utilities, which
    need ``expecttest`` (not a dependency here); then its functions are taken from the
    installed source file by name and run unchanged."""
    try:
        from torch.testing._internal.common_quantized import to_mxfp
        return to_mxfp
    except ImportError:
        pass
    import torch.testing._internal as internal
    tree = ast.parse((Path(internal.__file__).parent / "common_quantized.py").read_text())
    funcs = {"_n_ones", "_f32_to_floatx_unpacked", "down_size", "pack_uint4",
             "_bfloat16_to_float4_e2m1fn_x2", "to_mxfp"}
    consts = {"EBITS_F32", "MBITS_F32", "F32_EXP_BIAS", "FP4_EBITS", "FP4_MBITS"}

    def names(node):
        for t in node.targets:
            yield from (e.id for e in getattr(t, "elts", [t]) if isinstance(e, ast.Name))

    body = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name in funcs)
            or (isinstance(n, ast.Assign) and set(names(n)) & consts)]
    ns = {"torch": torch, "Tensor": torch.Tensor}
    exec(compile(ast.Module(body=body, type_ignores=[]), "common_quantized.py", "exec"), ns)
    return ns["to_mxfp"]


to_mxfp = _torch_to_mxfp()


def _hard_input(gen, rows=48, cols=256, dtype=torch.float32):
    """Rows spread over 2^-40..2^40, plus blocks of zeros, of fp32-subnormal and tiny values,
    of huge values, a NaN, +-inf, exact powers of two and values at the format's max."""
    x = torch.randn(rows, cols, generator=gen)
    x *= torch.exp2(torch.randint(-40, 40, (rows, 1), generator=gen).float())
    x[0, :32] = 0
    x[1, 3] = float("nan")
    x[2, 5] = float("inf")
    x[3, 40] = -float("inf")
    x[4, :32] *= 1e-37  # code 0x00 blocks
    x[5, :32] = torch.finfo(torch.float32).tiny / 3  # fp32 subnormals
    x[6, :32] = torch.randn(32, generator=gen) * 1e38  # huge, near fp32 max
    x[7, :32] = 2.0 ** torch.arange(-16, 16).float()  # powers of two
    x[8, 64:96] = -448.0
    return x.to(dtype)


def _bits(t):
    return t.view(torch.uint8)


# ---- rceil: bit-exact against torch's helper -----------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mxfp8_e4m3_rceil_bit_exact_vs_torch_helper(gen, dtype):
    for x in (_hard_input(gen, dtype=dtype), torch.randn(3, 5, 64, generator=gen).to(dtype)):
        scale, data = to_mxfp(x, format="mxfp8")
        ours, our_scale = xvendor.quantize(x, E4, "mx")
        assert our_scale.dtype == torch.float8_e8m0fnu and our_scale.shape == scale.shape
        assert torch.equal(_bits(our_scale), _bits(scale))
        assert ours.dtype == E4 and torch.equal(_bits(ours), _bits(data))


def test_mxfp4_rceil_bit_exact_vs_torch_helper_on_bf16(gen):
    """The helper converts bf16 to fp4; for bf16 inputs V/X is exact in bf16, so it rounds
    once. NaN blocks are left out: e2m1 has no NaN, the helper stores bit garbage there and
    we store +0 (the block's scale is NaN either way)."""
    x = _hard_input(gen, dtype=torch.bfloat16)
    scale, data = to_mxfp(x, format="mxfp4")
    ours, our_scale = xvendor.quantize(x, FP4, "mx")
    assert ours.dtype == FP4 and ours.shape == data.shape
    assert torch.equal(_bits(our_scale), _bits(scale))
    nan_block = (_bits(scale) == 255).repeat_interleave(16, dim=-1)
    assert nan_block.any()
    assert torch.equal(_bits(ours)[~nan_block], _bits(data)[~nan_block])
    assert _bits(ours)[1, 1].item() >> 4 == 0  # x[1, 3] is NaN: stored as +0


def test_mxfp4_fp32_rounds_once_where_torch_helper_rounds_twice(gen):
    """For fp32 inputs the helper rounds V/X to bf16 first, then to e2m1: a double rounding
    that differs from one round-to-nearest-even. Ours equals the fp64 oracle's single
    rounding, and every difference from the helper sits on a V/X that bf16 cannot hold."""
    x = torch.randn(64, 256, generator=gen)
    scale, data = to_mxfp(x, format="mxfp4")
    ours, our_scale = xvendor.quantize(x, FP4, "mx")
    assert torch.equal(_bits(our_scale), _bits(scale))
    codes, exp_scale = oracle.quantize(x, FP4, "mx")
    assert torch.equal(oracle.element_codes(ours).long(), codes)
    diff = oracle.element_codes(ours) != oracle.element_codes(data)
    assert diff.any()
    v = x / oracle.e8m0_value(_bits(scale)).float().repeat_interleave(32, dim=-1)
    assert (v[diff].bfloat16().float() != v[diff]).all()


def test_rceil_is_exact_where_an_fp32_log2_rounds_down():
    """amax / 448 = 2^20 (1 + 2^-23): the exact ceiling is 2^21. torch's helper takes an fp32
    log2, which rounds to exactly 20, picks 2^20 and saturates that element; we follow the
    exact rule (cuBLAS's round-up conversion) and keep it unsaturated."""
    x = torch.zeros(1, 32)
    x[0, 0] = 448 * 2.0 ** 20 * (1 + 2.0 ** -23)
    data, scale = xvendor.quantize(x, E4, "mx")
    assert _bits(scale).item() == 127 + 21
    helper_scale, _ = to_mxfp(x)
    assert _bits(helper_scale).item() == 127 + 20


# ---- the fp64 oracle: floor, tensorwise, rowwise, every format -----------------------------

def _assert_matches_oracle(x, dtype, recipe, **kw):
    out = xvendor.quantize(x, dtype, recipe, **kw)
    expected = oracle.quantize(x, dtype, recipe, **kw)
    assert qmod.error(out, expected, (x, dtype, recipe), kw) == 0.0
    return out


@pytest.mark.parametrize("xdtype", FLOATS)
@pytest.mark.parametrize("dtype", [E4, E5, FP4])
@pytest.mark.parametrize("rounding", ["rceil", "floor"])
def test_mx_matches_oracle(gen, xdtype, dtype, rounding):
    x = _hard_input(gen).to(xdtype) if xdtype != torch.float16 else \
        (torch.randn(16, 128, generator=gen) * 1e3).half()
    if dtype == FP4:  # NaN blocks of fp4 hold no meaningful element codes; checked above
        x = torch.nan_to_num(x, nan=0.0)
    _assert_matches_oracle(x, dtype, "mx", rounding=rounding)


def test_floor_scale_is_the_ocp_formula():
    x = torch.zeros(4, 32)
    x[0, 0], x[1, 0], x[2, 0], x[3, 0] = 1.0, 500.0, 3.0, 2.0 ** -130
    _, scale = xvendor.quantize(x, E4, "mx", rounding="floor")
    # floor(log2 amax) - 8, biased by 127; 2^-130 clamps to code 0.
    assert _bits(scale).flatten().tolist() == [127 - 8, 127 + 8 - 8, 127 + 1 - 8, 0]
    _, scale = xvendor.quantize(x, E4, "mx")  # rceil: ceil(log2(amax / 448))
    assert _bits(scale).flatten().tolist() == [127 - 8, 127 + 1, 127 - 7, 0]


@pytest.mark.parametrize("xdtype", FLOATS)
@pytest.mark.parametrize("dtype", [E4, E5, FP4])
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_tensorwise_rowwise_match_oracle(gen, xdtype, dtype, recipe):
    x = (torch.randn(12, 34, generator=gen) * torch.rand(12, 1, generator=gen) * 50).to(xdtype)
    x[3] = 0  # an all-zero row: scale 1
    data, scale = _assert_matches_oracle(x, dtype, recipe)
    assert scale.dtype == torch.float32
    assert scale.shape == (() if recipe == "tensorwise" else (12, 1))
    if recipe == "rowwise":
        assert scale[3].item() == 1.0
        assert torch.equal(scale.flatten(), (x.float().abs().amax(1) / oracle.QFORMATS[dtype][2])
                           .where(x.float().abs().amax(1) > 0, torch.tensor(1.0)))


@pytest.mark.parametrize("dtype", [E4, E5])
@pytest.mark.parametrize("recipe,kw", [("tensorwise", {}), ("rowwise", {}), ("rowwise", {"dim": 0})])
def test_tensorwise_rowwise_non_finite_match_oracle(gen, dtype, recipe, kw):
    """NaN or inf in a row (or the tensor) makes its scale NaN or inf; the data follows
    x / scale (inf / inf is NaN, finite / inf is 0), equal to the oracle NaN for NaN."""
    data, scale = _assert_matches_oracle(_hard_input(gen), dtype, recipe, **kw)
    assert not torch.isfinite(scale).all()


@pytest.mark.parametrize("dtype,step", [(E4, 2 ** -4), (E5, 2 ** -3), (FP4, 2 ** -2)])
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "mx"])
def test_round_trip_error_bound(gen, dtype, step, recipe):
    """|data * scale - x| <= half a step relative, plus the subnormal half-step absolute."""
    x = torch.randn(16, 64, generator=gen) * 10
    data, scale = xvendor.quantize(x, dtype, recipe)
    codes = oracle.element_codes(data)
    deq = oracle.decode(codes, dtype) * qmod._expand_scale(scale, recipe, -1, x)
    ebits, mbits, _, _ = oracle.QFORMATS[dtype]
    half_sub = 2.0 ** (2 - 2 ** (ebits - 1) - mbits - 1)
    s = qmod._expand_scale(scale, recipe, -1, x)
    assert ((deq - x.double()).abs() <= step * x.double().abs() + half_sub * s).all()


# ---- saturation, packing, dims, empty --------------------------------------------------------

@pytest.mark.parametrize("dtype,max_pos", [(E4, 448.0), (E5, 57344.0), (FP4, 6.0)])
def test_saturation_past_max(dtype, max_pos):
    # floor: X = 2^(floor(log2 amax) - emax) puts amax up to 2*2^emax > max_pos: saturates.
    x = torch.full((1, 32), 1.0)
    x[0, 0], x[0, 1] = 1.99 * 2.0 ** oracle.QFORMATS[dtype][3], -1.99 * 2.0 ** oracle.QFORMATS[dtype][3]
    data, scale = xvendor.quantize(x, dtype, "mx", rounding="floor")
    vals = oracle.decode(oracle.element_codes(data), dtype)
    assert vals[0, 0].item() == max_pos and vals[0, 1].item() == -max_pos
    assert _bits(scale).item() == 127  # X = 1
    # inf saturates under every recipe; its block/row/tensor scale is inf or 2^127.
    x = torch.tensor([[float("inf"), -float("inf")] + [1.0] * 30])
    data, _ = xvendor.quantize(x, dtype, "mx")
    vals = oracle.decode(oracle.element_codes(data), dtype)
    assert vals[0, 0].item() == max_pos and vals[0, 1].item() == -max_pos


def test_fp4_packing_lower_index_in_low_nibble():
    # e2m1 codes: 0.5 -> 1, 1 -> 2, 6 -> 7, -2 -> 0xC.
    x = torch.tensor([[0.5, 6.0, -2.0, 1.0]])
    data, scale = xvendor.quantize(x, FP4, "tensorwise")
    assert scale.item() == 1.0 and data.shape == (1, 2)
    assert _bits(data).flatten().tolist() == [0x71, 0x2C]
    # Along dim 0: pairs of rows share bytes, row 2i in the low nibble.
    data, _ = xvendor.quantize(x.t().contiguous(), FP4, "tensorwise", dim=0)
    assert data.shape == (2, 1) and _bits(data).flatten().tolist() == [0x71, 0x2C]


@pytest.mark.parametrize("dtype", [E4, FP4])
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "mx"])
@pytest.mark.parametrize("dim", [0, 1, -3])
def test_dims_other_than_last_equal_moving_dim_last(gen, dtype, recipe, dim):
    x = torch.randn(64, 32, 6, generator=gen)
    data, scale = _assert_matches_oracle(x, dtype, recipe, dim=dim)
    last, lscale = xvendor.quantize(x.movedim(dim, -1).contiguous(), dtype, recipe)
    assert torch.equal(_bits(data), _bits(last.movedim(-1, dim)))
    assert torch.equal(scale.view(torch.uint8) if recipe == "mx" else scale,
                       (lscale.view(torch.uint8) if recipe == "mx" else lscale).movedim(-1, dim)
                       if recipe != "tensorwise" else lscale)
    assert data.is_contiguous() and scale.is_contiguous()


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "mx"])
@pytest.mark.parametrize("shape", [(0, 64), (3, 0), (0,)])
@pytest.mark.parametrize("dtype", [E4, FP4])
def test_empty(recipe, shape, dtype):
    x = torch.randn(*shape)
    data, scale = xvendor.quantize(x, dtype, recipe)
    fake_data, fake_scale = torch.ops.xvendor.quantize(x.to("meta"), dtype, recipe)
    assert data.shape == fake_data.shape and data.dtype == fake_data.dtype
    assert scale.shape == fake_scale.shape and scale.dtype == fake_scale.dtype
    if recipe != "mx":
        assert (scale == 1).all()


# ---- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("args,kwargs,match", [
    ((torch.randn(4, 64), torch.float16, "mx"), {}, r"dtype must be torch.float8_e4m3fn"),
    ((torch.randn(4, 64), "e4m3", "mx"), {}, r"dtype must be"),
    ((torch.randn(4, 64), E4, "blockwise"), {}, r"recipe must be one of"),
    ((torch.randn(4, 48), E4, "mx"), {}, r"x size along dim -1 must be a multiple of 32"),
    ((torch.randn(48, 64), E4, "mx"), {"dim": 0}, r"x size along dim 0 must be a multiple of 32"),
    ((torch.randn(4, 7), FP4, "rowwise"), {}, r"x size along dim -1 must be even for fp4"),
    ((torch.randint(0, 4, (4, 64)), E4, "mx"), {}, r"x must be float32, float16 or bfloat16"),
    ((torch.randn(4, 64, dtype=torch.float64), E4, "mx"), {}, r"x must be float32"),
    ((torch.tensor(1.0), E4, "tensorwise"), {}, r"x must have at least 1 dimension"),
    ((torch.randn(4, 64), E4, "mx"), {"dim": True}, r"dim must be an int"),
    ((torch.randn(4, 64), E4, "mx"), {"dim": 2}, r"dim must be in \[-2, 2\)"),
    ((torch.randn(4, 64), E4, "mx"), {"rounding": "nearest"}, r"rounding must be one of"),
    (([1.0] * 32, E4, "mx"), {}, r"x must be a torch.Tensor"),
])
def test_bad_input_names_argument_and_rule(args, kwargs, match):
    with pytest.raises(xvendor.ArgumentError, match=match):
        xvendor.quantize(*args, **kwargs)
    # The schema itself refuses a non-dtype dtype and a bool dim before our checks run.
    if isinstance(args[0], torch.Tensor) and isinstance(args[1], torch.dtype) \
            and not isinstance(kwargs.get("dim"), bool):
        with pytest.raises(xvendor.ArgumentError, match=match):  # the fake, at trace time
            torch.ops.xvendor.quantize(args[0].to("meta"), *args[1:], **kwargs)


# ---- torch.library, compile, explain, self-check ----------------------------------------------

@pytest.mark.parametrize("dtype,recipe,dim", [(E4, "mx", -1), (E5, "rowwise", 0),
                                              (FP4, "mx", 0), (FP4, "tensorwise", -1)])
def test_opcheck(gen, dtype, recipe, dim):
    x = torch.randn(64, 32, generator=gen)
    opcheck(torch.ops.xvendor.quantize.default, (x, dtype, recipe, dim, "rceil"))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("dtype,recipe", [(E4, "mx"), (FP4, "mx"), (E5, "rowwise")])
def test_compile_fullgraph(gen, dtype, recipe, backend):
    torch._dynamo.reset()
    x = torch.randn(8, 64, generator=gen).bfloat16()

    @torch.compile(fullgraph=True, backend=backend)
    def f(x):
        return xvendor.quantize(x * 2, dtype, recipe, rounding="floor")

    data, scale = f(x)
    eager_data, eager_scale = xvendor.quantize(x * 2, dtype, recipe, rounding="floor")
    assert torch.equal(_bits(data), _bits(eager_data))
    assert torch.equal(scale.view(torch.uint8) if recipe == "mx" else scale,
                       eager_scale.view(torch.uint8) if recipe == "mx" else eager_scale)


def test_dispatcher_path_equals_fast_path(gen):
    x = torch.randn(4, 64, generator=gen)
    a = xvendor.quantize(x, E4, "mx")
    b = torch.ops.xvendor.quantize(x, E4, "mx")
    assert all(torch.equal(_bits(u), _bits(v)) for u, v in zip(a, b))


def test_explain():
    d = xvendor.explain("quantize", torch.randn(4, 64), E4, "mx")
    assert d.backend == "reference"  # torch has no quantize op
    with pytest.raises(xvendor.ArgumentError, match="recipe must be one of"):
        xvendor.explain("quantize", torch.randn(4, 64), E4, "nope")


def test_error_hook_catches_a_wrong_bit(gen):
    x = torch.randn(4, 64, generator=gen)
    data, scale = xvendor.quantize(x, E4, "mx")
    bad = _bits(data).clone()
    bad[1, 7] ^= 1
    expected = oracle.quantize(x, E4, "mx")
    assert qmod.error((bad.view(E4), scale), expected, (x, E4, "mx"), {}) == math.inf


@pytest.mark.parametrize("member,name", [(ScalingType.TensorWise, "tensorwise"),
                                         (ScalingType.RowWise, "rowwise"),
                                         (ScalingType.BlockWise1x32, "mx")])
def test_recipe_takes_scaled_mms_scaling_type(member, name):
    """One vocabulary: the ScalingType member scaled_mm wants gives the same bits."""
    x = torch.randn(8, 64)
    got, want = xvendor.quantize(x, E4, member), xvendor.quantize(x, E4, name)
    assert all(torch.equal(_bits(u.reshape(-1)), _bits(v.reshape(-1))) for u, v in zip(got, want))


def test_recipe_scaling_type_it_cannot_make_is_named():
    with pytest.raises(xvendor.ArgumentError, match="recipe must be one of .*BlockWise1x128"):
        xvendor.quantize(torch.randn(8, 64), E4, ScalingType.BlockWise1x128)
