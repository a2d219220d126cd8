"""Numerics cases of the triton backend, run under the Triton interpreter in ONE subprocess.

``python interpreter_cases.py`` must be started with ``TRITON_INTERPRET=1`` (the
interpreter is chosen when the kernels are imported); ``test_interpreter.py`` does that and
asserts on the JSON line this prints: one record per case with the backend that ran, the
number of Triton launches, the max error against an fp64 reference and the tolerance.

Every call goes through the dispatch layer (``xvendor.gemm(..., backend="triton")``) on
CPU tensors; outputs are poisoned with NaN before the kernel writes them
(``backend.POISON_OUTPUTS``), so an element the kernel forgets is a NaN, i.e. a failure.
The interpreter config uses 32x32x32 tiles, GROUP_M=2 and 3 persistent programs: the shapes
below are chosen off that grid (tail tiles in M, N and K) and span several tiles.

NOTE [bf16 in the interpreter]: the interpreter's bf16 ``tl.dot`` is wrong (triton#11584).
Under the interpreter the backend upcasts bf16 tiles to fp32 inside the kernel before
``tl.dot`` (``UPCAST``), so bf16 cases here verify loads, masks, offsets, accumulation,
epilogue and the bf16 rounding of the output, but not the bf16 matrix instruction itself;
that is checked by cross-compilation (the bf16 MFMA/WMMA/wgmma is present) and on hardware
(l2). ``bf16_dot_is_broken`` records whether the upstream bug is still there.

Served configs (``config_cases``): the dispatch layer hands a tuned config to the kernel as
``config=`` (a ``Config.to_dict()``). These cases pass a config other than the
interpreter's and record the config and grid the launch builder really got, plus the
normwise error against the fp64 oracle of ``xvendor.numerics``.
"""

from __future__ import annotations

import json
import math
import os
import sys

import torch

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
# Relative tolerance per output dtype: a few ulps of the output rounding.
RTOL = {F32: 2e-5, F16: 4e-3, BF16: 3e-2}


def _r(*shape, dtype=F32, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape) * 7919)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _offs(*ends):
    return torch.tensor(ends, dtype=torch.int32)


def gemm_cases():
    # (name, a, b, bias, out_dtype)  -- the path each covers in the comment
    return [
        ("gemm_f32_tails", _r(67, 45), _r(45, 50), None, None),  # M, N, K tails
        ("gemm_f16_bias", _r(67, 45, dtype=F16), _r(45, 50, dtype=F16), _r(50, dtype=F16), None),
        ("gemm_bf16_bias_out_f32", _r(70, 40, dtype=BF16), _r(40, 66, dtype=BF16),
         _r(66, dtype=BF16), F32),  # fp32 out keeps the fp32 accumulator
        ("gemm_f16_out_bf16_bias_bf16", _r(33, 65, dtype=F16), _r(65, 31, dtype=F16),
         _r(31, dtype=BF16), BF16),  # bias in out_dtype
        ("gemm_f32_transposed", _r(45, 67).t(), _r(50, 45).t(), _r(50), None),  # strides
        ("gemm_bf16_aligned", _r(64, 64, dtype=BF16), _r(64, 96, dtype=BF16), None, None),
        ("gemm_f32_k0_bias", _r(40, 0), _r(0, 36), _r(36), None),  # empty K: bias only
        ("gemm_f32_m1", _r(1, 70), _r(70, 33), None, None),  # M=1: stride-1 specialization
    ]


def grouped_cases():
    # (name, a, b, offs, bias, out_dtype)
    cases = []
    for dt in (F32, F16, BF16):
        n = str(dt).removeprefix("torch.")
        # 2Dx3D MoE forward: empty groups 0 and 2, rows 83..99 past offs[-1] -> zeros
        cases.append((f"g2x3_{n}", _r(99, 40, dtype=dt), _r(4, 40, 37, dtype=dt),
                      _offs(0, 35, 35, 83), _r(4, 37, dtype=dt), None))
        # 3Dx2D: ragged columns, cols 70..80 past offs[-1] -> zeros, bias (N,)
        cases.append((f"g3x2_{n}", _r(3, 45, 33, dtype=dt), _r(33, 80, dtype=dt),
                      _offs(20, 20, 70), _r(80, dtype=dt), None))
        # 2Dx2D weight gradient: ragged K with an empty group (bias only there)
        cases.append((f"g2x2_{n}", _r(36, 90, dtype=dt), _r(90, 41, dtype=dt),
                      _offs(30, 30, 77, 90), _r(4, 41, dtype=dt), None))
        # 3Dx3D batched
        cases.append((f"g3x3_{n}", _r(3, 40, 35, dtype=dt), _r(3, 35, 50, dtype=dt),
                      None, _r(3, 50, dtype=dt), None))
    cases += [
        ("g2x3_bf16_out_f32_transposed_b", _r(70, 48, dtype=BF16),
         _r(3, 33, 48, dtype=BF16).transpose(1, 2), _offs(10, 50, 70), None, F32),
        ("g2x3_f32_all_empty", _r(50, 40), _r(2, 40, 30), _offs(0, 0), _r(2, 30), None),
        ("g2x3_f16_no_tail_out_f32", _r(64, 32, dtype=F16), _r(2, 32, 64, dtype=F16),
         _offs(31, 64), _r(2, 64, dtype=F32), F32),
        ("g2x2_f32_k_all_empty", _r(20, 0), _r(0, 24), _offs(0, 0), _r(2, 24), None),
        ("g3x3_f16_out_bf16", _r(2, 33, 65, dtype=F16), _r(2, 65, 34, dtype=F16), None,
         None, BF16),
    ]
    return cases


def _compare(out, ref, out_dtype, k):
    refd = ref.double()
    err = (out.double() - refd).abs()
    tol = RTOL[out_dtype] * (refd.abs() + math.sqrt(max(k, 1)))
    nan = int(torch.isnan(out).sum())
    worst = float((err / tol).nan_to_num(float("inf")).max()) if out.numel() else 0.0
    return {"max_abs_err": float(err.nan_to_num(float("inf")).max()) if out.numel() else 0.0,
            "worst_err_over_tol": worst, "nans": nan, "shape": list(out.shape),
            "dtype": str(out.dtype)}


# A gfx950 candidate, not the interpreter's 32x32x32: its 64-wide tiles change the grid.
SERVED = {"block_m": 64, "block_n": 64, "block_k": 64, "group_m": 4, "num_warps": 4,
          "num_stages": 2, "waves_per_eu": 2, "matrix_instr_nonkdim": 16, "kpack": 1}


def config_cases():
    """(name, op, how it is called, args): each call is served ``SERVED``."""
    gemm_args = (_r(67, 45), _r(45, 130), _r(130), None)  # grid 2x3 with SERVED, 3x5 without
    return [
        ("served_gemm_kernel", "gemm", "kernel", gemm_args),
        ("served_gemm_bf16_out_f32_kernel", "gemm", "kernel",
         (_r(70, 40, dtype=BF16), _r(40, 66, dtype=BF16), _r(66, dtype=BF16), F32)),
        ("served_gemm_dispatch", "gemm", "dispatch", gemm_args),
        ("served_gemm_tunable", "gemm", "tunable", gemm_args),
        ("served_g2x3_f16_kernel", "grouped_mm", "kernel",
         (_r(99, 40, dtype=F16), _r(4, 40, 37, dtype=F16), _offs(0, 35, 35, 83),
          _r(4, 37, dtype=F16), None)),
    ]


def _run_served(op, how, args):
    """One call served ``SERVED``: straight to the kernel, through dispatch, or the tuner's run."""
    import xvendor
    from xvendor import registry
    from xvendor.triton import backend

    if how == "kernel":
        return backend.KERNELS[op](*args, config=dict(SERVED))
    if how == "tunable":
        return registry.tunable("triton").run(op, dict(SERVED), args)

    def lookup(op_, info, dtype, shape_class, name):  # the registry's tuned-winner lookup
        return ("triton", dict(SERVED)) if name in ("triton", "*") else None
    registry.set_tuned_lookup(lookup)
    try:
        return getattr(xvendor, op)(*args, backend="triton")
    finally:
        registry.reset(configuration=True)


def bf16_dot_is_broken() -> bool:
    """Whether the interpreter's plain bf16 tl.dot is still wrong (triton#11584)."""
    import triton
    import triton.language as tl

    @triton.jit
    def dot16(a_ptr, b_ptr, c_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))

    a, b = _r(16, 16, dtype=BF16), _r(16, 16, dtype=BF16, seed=1)
    c = torch.empty(16, 16, dtype=F32)
    dot16[(1,)](a, b, c)
    return not torch.allclose(c.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-2)


def main() -> None:
    import xvendor
    from xvendor import numerics
    from xvendor.triton import backend, configs, launch

    assert backend.interpreting(), "start with TRITON_INTERPRET=1"
    backend.POISON_OUTPUTS = True
    launches = {"n": 0, "seen": []}
    for name in ("gemm_launch", "grouped_mm_launch"):  # count real launches, see their config
        orig = getattr(launch, name)

        def counted(*args, _orig=orig, **kwargs):
            launches["n"] += 1
            kernel, grid, largs, lkwargs = _orig(*args, **kwargs)
            cfg = next(x for x in args if isinstance(x, configs.Config))
            launches["seen"].append({"config": cfg.to_dict(), "grid": list(grid)})
            return kernel, grid, largs, lkwargs
        setattr(launch, name, counted)
    results = {}
    for name, a, b, bias, out_dtype in gemm_cases():
        launches["n"] = 0
        out = xvendor.gemm(a, b, bias, out_dtype, backend="triton")
        ref = xvendor.gemm(a.double(), b.double(), None if bias is None else bias.double(),
                           backend="reference")
        rec = _compare(out, ref, out_dtype or a.dtype, a.shape[1])
        dec = xvendor.explain("gemm", a, b, bias, out_dtype, backend="triton")
        results[name] = dict(rec, backend=dec.backend, launches=launches["n"])
    for name, a, b, offs, bias, out_dtype in grouped_cases():
        launches["n"] = 0
        out = xvendor.grouped_mm(a, b, offs, bias, out_dtype, backend="triton")
        ref = xvendor.grouped_mm(a.double(), b.double(), offs,
                                 None if bias is None else bias.double(), backend="reference")
        rec = _compare(out, ref, out_dtype or a.dtype, a.shape[-1])
        if a.dim() == 2 and b.dim() == 3 and offs.numel():  # rows past offs[-1]
            rec["tail_max_abs"] = float(out[int(offs[-1]):].double().abs().max()) \
                if int(offs[-1]) < out.shape[0] else 0.0
        if a.dim() == 3 and b.dim() == 2:  # columns past offs[-1]
            rec["tail_max_abs"] = float(out[:, int(offs[-1]):].double().abs().max())
        dec = xvendor.explain("grouped_mm", a, b, offs, bias, out_dtype, backend="triton")
        results[name] = dict(rec, backend=dec.backend, launches=launches["n"])
    served = {}
    for name, op, how, args in config_cases():
        launches.update(n=0, seen=[])
        out = _run_served(op, how, args)
        ref = numerics.gemm(*args[:3]) if op == "gemm" else numerics.grouped_mm(*args[:4])
        out_dtype = args[-1] or args[0].dtype
        served[name] = {"launches": launches["n"], "seen": launches["seen"],
                        "rel_error": numerics.rel_error(out, ref),
                        "tolerance": numerics.TOLERANCE[out_dtype],
                        "nans": int(torch.isnan(out).sum()), "dtype": str(out.dtype)}
    print(json.dumps({"results": results, "served": served,
                      "bf16_dot_is_broken": bf16_dot_is_broken(),
                      "interpret_env": os.environ.get("TRITON_INTERPRET")}))


if __name__ == "__main__":
    sys.exit(main())
