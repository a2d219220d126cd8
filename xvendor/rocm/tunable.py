"""``xvendor.tuning``'s view of the ``flydsl`` backend (its record names ``TUNABLE`` here).

The candidates are the arch's config space (``xvendor.rocm.configs``) with the real code
object of each (``xvendor.tuning.sweep`` compiles it through ``xvendor.rocm.crosscompile``:
registers, spills, LDS, matrix instruction), so pruning works from what was compiled. A
candidate runs through the serving path itself (``backend.KERNELS[op](..., config=)``), so
a winner is timed exactly as it will be served.

What runs where: on a gfx950/gfx1250 device the whole loop runs (prune, rank, gate against
the reference, time). Without one, nothing here can launch: the loop stops after ranking,
which is how the shipped tables' ``predicted`` FlyDSL entries are made
(``python -m xvendor.tuning.shipped``).
"""

from __future__ import annotations

from ..tuning.sweep import sweep
from ..tuning.tuner import Candidate
from . import backend, configs

__all__ = ["TUNABLE"]


class _Tunable:
    """The arch's FlyDSL config space (compile records included) and one launch each."""

    def candidates(self, op, info, key):
        if info.arch not in configs.SPACES:
            return []
        recs = [r for r in sweep("flydsl", [info.arch], "all") if r.get("template") == op]
        return [Candidate(r["config_name"], r["config"], r) for r in recs]

    def run(self, op, config, args):
        return backend.KERNELS[op](*args, config=config)

    def default_name(self, arch: str, op: str) -> str:
        return configs.default(arch, op).name


TUNABLE = _Tunable()
