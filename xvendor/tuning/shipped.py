"""Shipped tuning tables: analytical defaults for gfx950 and gfx1250, until measured.

For the common MoE and dense shapes below, each arch's Triton and FlyDSL config spaces are
pruned with the real cross-compile records (``xvendor compile``: spills, LDS, matrix
instruction) and ranked with the analytical model (``model``): the tuning loop up to its
ranking step, which is as far as it goes without the chip. The top prediction per
(toolchain, shape) is written to ``tables/<arch>-anycu.json`` with provenance
``{"kind": "predicted"}``. The tables hold
per-backend config entries only: a prediction never makes a backend the dispatch default
(that needs a measurement, ``xvendor tune`` on the chip, which then overrides them).

FlyDSL's memory-bound ops (rms_norm, rms_norm_backward, topk) are added the same way for the
shapes of ``xvendor.rocm.tunable.SHAPES``: their templates' compile records (no spills, no
scratch, LDS within limit, vector accesses as wide as the config), pruned by what the kernel
takes, ranked by that tunable's memory-bound model (``predicted_entries``), under the same
``rows`` problem keys as ``xvendor tune --shape rms_norm:RxH`` writes.

"anycu" tables apply to every CU count of that exact arch (gfx1250's CU count is not
published); entries measured on a device always take precedence.

    python -m xvendor.tuning.shipped            # regenerate (uses the compile cache)
"""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict
from pathlib import Path

from ..rocm.configs import TARGETS as FLYDSL_TARGETS
from . import model
from .problem import KEY_VERSION, ProblemKey
from .store import FILE_VERSION, SHIPPED, Winner

ANY_CU = 0
ARCHS = FLYDSL_TARGETS  # the arches the shipped tables cover: the FlyDSL pair
# (label, op, layout, M (tokens x top-k, or tokens), N, K, groups)
SHAPES = [
    ("DeepSeek-V3 experts up/gate", "grouped_mm", "2Dx3D:NT", 32768, 4096, 7168, 256),
    ("DeepSeek-V3 experts down", "grouped_mm", "2Dx3D:NT", 32768, 7168, 2048, 256),
    ("Qwen3-235B-A22B experts up/gate", "grouped_mm", "2Dx3D:NT", 32768, 3072, 4096, 128),
    ("Qwen3-235B-A22B experts down", "grouped_mm", "2Dx3D:NT", 32768, 4096, 1536, 128),
    ("Qwen3-30B-A3B experts up/gate", "grouped_mm", "2Dx3D:NT", 16384, 1536, 2048, 128),
    ("Qwen3-30B-A3B experts down", "grouped_mm", "2Dx3D:NT", 16384, 2048, 768, 128),
    ("Mixtral-8x7B experts up", "grouped_mm", "2Dx3D:NT", 8192, 14336, 4096, 8),
    ("dense 4096 square", "gemm", "NT", 4096, 4096, 4096, 0),
    ("Llama-70B MLP up", "gemm", "NT", 8192, 28672, 8192, 0),
    ("Llama-70B MLP down", "gemm", "NT", 8192, 8192, 28672, 0),
    ("decode-size gemm", "gemm", "NT", 64, 8192, 8192, 0),
]


TOOLCHAINS = ("triton", "flydsl")  # backend name == cross-compile toolchain name here


def _records(toolchain: str, arch: str, template: str) -> list[dict]:
    from .sweep import sweep
    return [r for r in sweep(toolchain, [arch], "all") if r.get("template") == template]


def _memory_bound(arch: str) -> dict:
    """FlyDSL's predicted entries of the memory-bound ops for ``arch`` (none where FlyDSL has
    no config space for it)."""
    from ..rocm import configs, tunable
    return tunable.predicted_entries(arch) if arch in configs.NORM_SPACES else {}


def generate(arch: str, records_for=_records, toolchains=TOOLCHAINS,
             memory_bound=_memory_bound) -> dict:
    """The table of ``arch``: per toolchain and GEMM-family shape, the best prediction; then,
    with ``flydsl`` among ``toolchains``, ``memory_bound(arch)``'s entries."""
    entries = {}
    for toolchain in toolchains:
        for label, op, layout, m, n, k, groups in SHAPES:
            recs = records_for(toolchain, arch, op)
            kept, _ = model.prune(recs, m, n, k, groups)
            ranked = model.rank(kept, m, n, k, groups, "bfloat16", arch)
            if not ranked:
                continue
            predicted, best = ranked[0]
            key = ProblemKey(op, toolchain, arch, ANY_CU, "*", "bfloat16", "bfloat16", layout,
                             m, n, k, groups)
            entries[str(key)] = asdict(Winner(
                toolchain, best["config"], best["config_name"], None, predicted,
                {"kind": "predicted", "model": "xvendor.tuning.model v1", "shape": label,
                 "from": f"{toolchain} cross-compile records (no spills, LDS within limit, "
                         "matrix instruction present)",
                 "date": datetime.date.today().isoformat()}))
    if "flydsl" in toolchains:
        entries.update(memory_bound(arch))
    return {"version": FILE_VERSION, "key_version": KEY_VERSION, "arch": arch, "cus": ANY_CU,
            "entries": entries}


def main() -> None:
    SHIPPED.mkdir(exist_ok=True)
    for arch in ARCHS:
        path = Path(SHIPPED) / f"{arch}-anycu.json"
        path.write_text(json.dumps(generate(arch), indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
