"""``xvendor.tuning``'s view of the ``triton`` backend (its record names ``TUNABLE`` here).

Tuning is a layer above the backends: the candidates come from the cross-compile sweep
(``xvendor.tuning.sweep``), which compiles through ``xvendor.triton.crosscompile``. Keeping
this object out of ``backend.py`` keeps the kernels importable without the tuner, and the
sweep importable without the backend.
"""

from __future__ import annotations

from ..tuning.sweep import sweep
from ..tuning.tuner import Candidate
from . import backend

__all__ = ["TUNABLE"]


class _Tunable:
    """The arch's config space (its cross-compile records included) and one launch each."""

    def candidates(self, op, info, key):
        recs = [r for r in sweep("triton", [info.arch], "all") if r.get("template") == op]
        return [Candidate(r["config_name"], r["config"], r) for r in recs]

    def run(self, op, config, args):
        # The serving path itself, so a tuned winner is timed exactly as it will be served.
        return backend.KERNELS[op](*args, config=config)


TUNABLE = _Tunable()
