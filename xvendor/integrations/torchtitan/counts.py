"""What a torchtitan run did with xvendor, per process: op call counts and the losses.

The overrides call ``record(op)`` just before the xvendor op, so a count proves the model
reached xvendor (a count of 0 for an op whose override was applied means the model never
called it). With ``XVENDOR_TITAN_COUNTS=DIR``, ``write_at_exit`` also records every step's
loss and gradient norm at full precision (torchtitan's console log rounds to 5 digits) and
dumps ``DIR/rank<R>.json``: ``{"calls": {op: n}, "steps": [[step, loss, grad_norm], ...]}``.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
from pathlib import Path

CALLS: collections.Counter = collections.Counter()
STEPS: list[list[float]] = []
ENV = "XVENDOR_TITAN_COUNTS"


def record(op: str) -> None:
    CALLS[op] += 1


def write(directory: str | Path) -> Path:
    path = Path(directory) / f"rank{os.environ.get('RANK', '0')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"calls": dict(CALLS), "steps": STEPS}, sort_keys=True))
    return path


def _record_steps() -> None:
    from torchtitan.components.metrics import MetricsProcessor
    original = MetricsProcessor.log

    def log(self, step, global_avg_loss, global_max_loss, grad_norm, *args, **kwargs):
        STEPS.append([int(step), float(global_avg_loss), float(grad_norm)])
        return original(self, step, global_avg_loss, global_max_loss, grad_norm, *args, **kwargs)

    MetricsProcessor.log = log


def write_at_exit() -> None:
    """With ``XVENDOR_TITAN_COUNTS`` set: record the steps and write the file at exit."""
    directory = os.environ.get(ENV)
    if directory:
        _record_steps()
        atexit.register(write, directory)
