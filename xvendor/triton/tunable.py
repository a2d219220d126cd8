"""``xvendor.tuning``'s view of the ``triton`` backend (its record names ``TUNABLE`` here).

Tuning is a layer above the backends: the candidates come from the cross-compile sweep
(``xvendor.tuning.sweep``), which compiles through ``xvendor.triton.crosscompile``. Keeping
this object out of ``backend.py`` keeps the kernels importable without the tuner, and the
sweep importable without the backend.

Scaled ops (``scaled_mm``, ``scaled_grouped_mm``): the candidates are the arch's scaled
config space (``scaled_configs.SPACES``), each compiled as the variant that matches the
problem key's recipe, element formats and grouped layout (``variant_for``), and judged on
its code object: no spills or scratch, LDS within the limit, at least one workgroup per CU,
and the EXACT matrix instruction of ``scaled_configs.instruction`` (on gfx950 an fp8
``tl.dot`` at the wrong BLOCK_K silently picks an MI300-era MFMA; any ``v_mfma`` would
not do). What is verified here: the compile records and the ranking. Not verified here:
the configs' speed, which only a device measures.
"""

from __future__ import annotations

import re

from ..tuning.problem import SCALED_OPS, ProblemKey
from ..tuning.sweep import sweep
from ..tuning.tuner import Candidate
from . import backend, configs, scaled_configs

__all__ = ["TUNABLE", "variant_for", "scaled_records"]

_WIDTH = {"e4m3": 8, "e5m2": 8, "e2m1": 4}


def variant_for(key: ProblemKey) -> tuple[str, bool]:
    """(the ``scaled_configs.VARIANTS`` name compiled for ``key``, whether it is exact).

    Exact: same recipe kind (MX / fp8: TensorWise is the RowWise kernel with scale strides
    0), formats and grouped layout. Otherwise the variant of the same kind and layout whose
    operands have the same bit widths (e.g. MX e5m2 x e4m3 is compiled as MXFP8 e4m3 x
    e4m3): the same tiles and instruction shape; only the instruction's format fields differ.
    """
    recipe, fa, fb = key.scaled or (None, None, None)
    if recipe is None:
        raise ValueError(f"not a scaled problem key: {key}")
    kind = "mx" if recipe == "mx" else "fp8"
    form = key.layout.partition(":")[0] if key.op == "scaled_grouped_mm" else ""
    same = {v: spec for v, spec in scaled_configs.VARIANTS.items()
            if v.partition(":")[0] == key.op and spec[2] == kind and spec[3] == form}
    for v, (va, vb, _, _) in same.items():
        if (va, vb) == (fa, fb):
            return v, True
    for v, (va, vb, _, _) in same.items():
        if (_WIDTH[va], _WIDTH[vb]) == (_WIDTH[fa], _WIDTH[fb]):
            return v, False
    raise ValueError(f"no scaled Triton template variant for {key.op} {recipe} {fa} x {fb} "
                     f"{form or ''}; variants: {sorted(scaled_configs.VARIANTS)}")


def _judge(record: dict, arch: str, variant: str, cfg) -> dict:
    """The sweep's record plus the exact-instruction verdict of this variant."""
    want = scaled_configs.instruction(arch, variant, cfg)
    got = record.get("mma_instr") or ""
    out = dict(record, variant=variant, instruction=want)
    if record.get("ok") and not re.search(want, got):
        out.update(ok=False, reason=f"matrix instruction {got or 'none'}, not the expected "
                                    f"{want}")
    return out


def scaled_records(arch: str, key: ProblemKey, cache_dir=None) -> list[dict]:
    """Compile records of ``key``'s variant for every config of ``arch``'s scaled space
    (cached by the sweep: a repeat costs nothing)."""
    if arch not in scaled_configs.SPACES:
        raise ValueError(f"no scaled Triton config space for {arch!r} (archs: "
                         f"{sorted(scaled_configs.SPACES)})")
    variant, _ = variant_for(key)
    space = scaled_configs.candidates(arch, variant)
    recs = sweep("triton", jobs=[(variant, arch, cfg) for cfg in space], cache_dir=cache_dir)
    return [_judge(r, arch, variant, cfg) for r, cfg in zip(recs, space)]


class _Tunable:
    """The arch's config space (its cross-compile records included) and one launch each."""

    def candidates(self, op, info, key):
        if op in SCALED_OPS:
            recs = scaled_records(info.arch, key)
        else:
            recs = [r for r in sweep("triton", [info.arch], "all") if r.get("template") == op]
        return [Candidate(r["config_name"], r["config"], r) for r in recs]

    def run(self, op, config, args):
        # The serving path itself, so a tuned winner is timed exactly as it will be served.
        return backend.KERNELS[op](*args, config=config)

    def default_name(self, arch, op):
        """The config the backend launches untuned for ``op`` on ``arch``."""
        per = scaled_configs if op in SCALED_OPS else configs
        return per.default(arch, op).name


TUNABLE = _Tunable()
