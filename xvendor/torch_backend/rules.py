"""Where torch's own ops take a call: per op, device type, arch, dtype and recipe, as data.

The rules are torch 2.15's, read from its own checks (``_grouped_mm_validate_inputs``
mirrored in ``torch/_meta_registrations.py``, ``_scaled_mm_v2``'s recipe table) and, on
the CPU, tested on both sides of each rule (``tests/torch_backend/test_rules.py``). GPU
rows follow torch's documentation and sources; they are not run here (no GPU): where a
row is wrong, torch raises, the call falls back to the next candidate with one warning,
and ``bench/gpu_check.sh`` shows it. What ``kernels.py`` adds around torch's op (bias,
``out_dtype``, strides, zeros past ``offs[-1]``) is not a rule: it never sends a call away.

``accepts(op, device_info)`` is the backend's rule hook: a reason when torch takes no call
of ``op`` on that device (selection passes it over), ``None`` when it takes every call
(gemm, topk), else the per-call rule ``fn(*args) -> None | reason`` (``explain`` prints
the reason).
"""

from __future__ import annotations

import torch
from torch.compiler import is_compiling as _compiling

from ..devices import DeviceInfo

F32, BF16, F16, F64 = torch.float32, torch.bfloat16, torch.float16, torch.float64
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
TENSORWISE, ROWWISE, MX = 0, 1, 3  # torch.nn.functional.ScalingType values
_NAMES = {TENSORWISE: "TensorWise", ROWWISE: "RowWise", MX: "BlockWise1x32"}

# F.grouped_mm: operand dtypes per device type. Every layout, on every device; strides are
# made 16-byte aligned by kernels.py (a copy only where the caller's are not).
GROUPED_MM_DTYPES = {
    "cpu": {F32, BF16, F16},
    "cuda": {F32, BF16, F16},  # CUTLASS / CK for bf16 on sm_90+ / gfx942+, torch's loop else
    "xpu": {BF16},             # torch-xpu-ops' grouped GEMM: bf16 (not run here)
    "meta": {F32, BF16, F16},  # the meta kernel: torch's own checks, no device
}
# Devices whose grouped GEMM kernels (CUTLASS/CK TMA loads) also want a 16-byte aligned
# base pointer; the CPU's does not (tested).
GROUPED_MM_ALIGNED_BASE = {"cuda", "xpu"}
# (input dtype, out_dtype) pairs torch's grouped_mm produces itself; other out_dtypes are
# an fp32 computation cast once (kernels.py).
GROUPED_MM_NATIVE_OUT = {"cuda": {(BF16, F32)}}
# torch.mm(a, b, out_dtype=): fp32 output of half inputs (CUDA only in torch 2.15)
MM_NATIVE_OUT = {"cuda": {(BF16, F32), (F16, F32)}}

# Device types where torch's eager rms_norm is its composite (upcast, pow, mean, add, rsqrt,
# mul, mul, cast: three x-sized temporaries besides the upcast), and per dtype from how many
# elements of x the same arithmetic on one buffer is faster there in eager inference
# (kernels.py, NOTE [rms_norm in one buffer]). Measured with ``python bench/rms_norm_cpu.py``
# at 1 and 2 threads (bench/RESULTS.md); a device type or dtype not listed runs torch's op
# (CUDA's is one fused kernel).
RMS_NORM_ONE_BUFFER = {"cpu": {F32: 524288, F64: 262144, BF16: 262144, F16: 262144}}

# F.scaled_mm: (recipe_a, recipe_b) pairs and operand dtypes, per device type and arch
# ("*": any arch of that type). MX here means NO_SWIZZLE scales, xvendor's layout.
SCALED_MM = {
    ("cpu", "*"): ({(TENSORWISE, TENSORWISE), (ROWWISE, ROWWISE)}, {E4, E5}),
    ("meta", "*"): ({(TENSORWISE, TENSORWISE), (ROWWISE, ROWWISE)}, {E4, E5}),
    # cuBLASLt FP8: TensorWise from sm_89, RowWise from sm_90 (CUTLASS); MX on sm_100
    # needs swizzled scales, which xvendor's NO_SWIZZLE layout is not.
    ("cuda", "sm_89"): ({(TENSORWISE, TENSORWISE)}, {E4, E5}),
    ("cuda", "sm_90"): ({(TENSORWISE, TENSORWISE), (ROWWISE, ROWWISE)}, {E4, E5}),
    ("cuda", "sm_100"): ({(TENSORWISE, TENSORWISE), (ROWWISE, ROWWISE)}, {E4, E5}),
    # hipBLASLt: OCP fp8 (e4m3fn/e5m2) on gfx950 with MX NO_SWIZZLE; gfx942 takes only the
    # fnuz types, which xvendor's ops do not.
    ("cuda", "gfx950"): ({(TENSORWISE, TENSORWISE), (ROWWISE, ROWWISE), (MX, MX)}, {E4, E5}),
}
# F.scaled_grouped_mm: no CPU kernel in torch 2.15. RowWise e4m3fn 2Dx3D with b
# column-major on sm_90/sm_100 (CUTLASS) and gfx942/gfx950 (CK).
SCALED_GROUPED_MM = {
    ("cuda", "sm_90"): {(ROWWISE, ROWWISE)},
    ("cuda", "sm_100"): {(ROWWISE, ROWWISE)},
    ("cuda", "gfx950"): {(ROWWISE, ROWWISE)},
}


def _recipe(r) -> int:
    """A recipe as its int (kernels get ints; ``explain`` passes the caller's enums)."""
    return getattr(r, "value", r)


def _scaled_row(table: dict, dev: DeviceInfo):
    kind = dev.device.type
    return table.get((kind, dev.arch), table.get((kind, "*")))


def _where(dev: DeviceInfo) -> str:
    return f"{dev.device.type} ({dev.arch})"


def _grouped_mm(dev: DeviceInfo):
    """The per-call rule on ``dev`` (the dtype table read once, not per call)."""
    takes = GROUPED_MM_DTYPES[dev.device.type]
    names = ", ".join(sorted(str(d).replace("torch.", "") for d in takes))

    def rule(a, b, offs=None, bias=None, out_dtype=None) -> str | None:
        if a.dtype not in takes:
            return f"torch's grouped_mm on {_where(dev)} takes {names}, not {a.dtype}"
        if (a.requires_grad or b.requires_grad) and _compiling():
            # A traced training graph differentiates torch's op, whose backward calls it on
            # the output gradient as it comes: its sizes must keep 16-byte rows themselves.
            align = 16 // a.element_size()
            if any(d % align for d in (*a.shape[-2:], b.shape[-1])):
                return (f"torch's grouped_mm backward needs M, K and N multiples of {align} "
                        f"for {a.dtype} (got a {tuple(a.shape)}, b {tuple(b.shape)})")
        return None
    return rule


def _scaled_mm(dev: DeviceInfo, a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a,
               swizzle_b, bias, output_dtype) -> str | None:
    row = _scaled_row(SCALED_MM, dev)
    if row is None:
        return f"torch's scaled_mm has no FP8 recipes on {_where(dev)}"
    recipes, dtypes = row
    recipe_a, recipe_b = _recipe(recipe_a), _recipe(recipe_b)
    if (recipe_a, recipe_b) not in recipes:
        return (f"torch's scaled_mm on {_where(dev)} takes "
                f"{sorted('x'.join((_NAMES[x], _NAMES[y])) for x, y in recipes)}, not "
                f"{_NAMES.get(recipe_a, recipe_a)}x{_NAMES.get(recipe_b, recipe_b)}")
    if a.dtype not in dtypes or b.dtype not in dtypes:
        return f"torch's scaled_mm on {_where(dev)} takes no {a.dtype} x {b.dtype}"
    if bias is not None and a.shape[1] == 0:
        return "torch's scaled_mm drops the bias when K = 0"
    return None


def _scaled_grouped_mm(dev: DeviceInfo, a, b, scale_a, recipe_a, scale_b, recipe_b, offs,
                       swizzle_a, swizzle_b, output_dtype) -> str | None:
    recipes = _scaled_row(SCALED_GROUPED_MM, dev)
    if recipes is None:
        return f"torch has no scaled_grouped_mm on {_where(dev)}"
    if (_recipe(recipe_a), _recipe(recipe_b)) not in recipes or a.dtype != E4 or b.dtype != E4:
        return f"torch's scaled_grouped_mm on {_where(dev)} takes RowWise e4m3fn only"
    if b.dim() != 3 or output_dtype != BF16:
        return "torch's scaled_grouped_mm takes the 2Dx3D form with a bfloat16 output only"
    return None


def _rms_norm(dev: DeviceInfo):
    def rule(x, weight=None, eps=None) -> str | None:
        if weight is not None and weight.dtype != x.dtype:  # torch's unfused path
            return (f"torch's rms_norm does not fuse a {weight.dtype} weight with {x.dtype} x "
                    "(xvendor keeps x's dtype with fp32 master weights: the reference does)")
        return None
    return rule


def _per_call(check):
    """A rule written as ``check(dev, *args)``, bound to ``dev``."""
    return lambda dev: (lambda *args: check(dev, *args))


# op -> (device info -> the per-call rule ``fn(*args) -> None | reason``)
_RULES = {"grouped_mm": _grouped_mm, "rms_norm": _rms_norm, "scaled_mm": _per_call(_scaled_mm),
          "scaled_grouped_mm": _per_call(_scaled_grouped_mm)}


def _never(op: str, dev: DeviceInfo) -> str | None:
    """Why torch's op takes no call of ``op`` at all on ``dev`` (``None``: some calls)."""
    if op == "grouped_mm" and dev.device.type not in GROUPED_MM_DTYPES:
        return f"torch has no grouped_mm on {dev.device.type} devices"
    if op == "scaled_mm" and _scaled_row(SCALED_MM, dev) is None:
        return f"torch's scaled_mm has no FP8 recipes on {_where(dev)}"
    if op == "scaled_grouped_mm" and _scaled_row(SCALED_GROUPED_MM, dev) is None:
        return f"torch has no scaled_grouped_mm on {_where(dev)}"
    return None


def accepts(op: str, dev: DeviceInfo):
    """``op`` on ``dev``: a reason (str) when torch takes no call there, the per-call rule
    ``fn(*args) -> None | reason`` (metadata only), or ``None``: every call."""
    never = _never(op, dev)
    if never is not None:
        return never
    rule = _RULES.get(op)
    return None if rule is None else rule(dev)
