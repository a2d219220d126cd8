"""MXFP8 training vs bf16 on the CPU reference backend: the loss of both runs, side by side.

    python bench/mx_training.py [--steps 150]

Runs the model and data of tests/nn/test_mx.py (a 2-layer MoE transformer, bf16 parameters)
twice from the same initial weights and data: as is, and after
``xvendor.nn.convert_to_mx_training``. Prints the first loss, the mean of the last 20 steps
and the wall time of each, and their ratios. On the CPU quantization runs as separate
reference ops, so the time ratio measures this machine's reference path, not a GPU.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "nn"))
from test_mx import TinyMoETransformer, _train  # noqa: E402  (the test's own model and data)

from xvendor.nn import convert_to_mx_training  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=150)
    steps = p.parse_args().steps
    torch.manual_seed(0)
    base = TinyMoETransformer().to(torch.bfloat16)
    runs = {"bf16": base, "mxfp8": convert_to_mx_training(copy.deepcopy(base))}
    rows = {}
    for name, model in runs.items():
        t0 = time.perf_counter()
        losses = _train(model, steps)
        rows[name] = (losses[0], sum(losses[-20:]) / 20, time.perf_counter() - t0)
    print("| run | first loss | last-20 mean loss | wall s |\n|---|---|---|---|")
    for name, (first, end, wall) in rows.items():
        print(f"| {name} | {first:.4f} | {end:.5f} | {wall:.1f} |")
    (_, e0, w0), (_, e1, w1) = rows["bf16"], rows["mxfp8"]
    print(f"\nmxfp8 / bf16: loss {e1 / e0:.3f}x, wall time {w1 / w0:.1f}x ({steps} steps)")


if __name__ == "__main__":
    main()
