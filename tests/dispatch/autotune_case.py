"""Run by ``test_autotune.py`` in its own process (``TRITON_INTERPRET=1`` must be set
before triton is imported): a max-autotune compile of ``xvendor.grouped_mm`` on the CPU,
where a plugin record makes the SYCL backend (on the OpenCL CPU device) the decision and
the Triton interpreter eligible. Prints one JSON line: per case (the decision; an explicit
request) the choices Inductor benchmarked with their times, the compiled code's calls,
and the error against the fp64 oracle.
"""

import dataclasses
import json
import os
import sys

import torch
import torch._inductor.config as inductor_config
from torch._inductor import select_algorithm
from torch._inductor.utils import run_and_get_code

import xvendor
from xvendor import numerics, registry

assert os.environ.get("TRITON_INTERPRET") == "1", "start with TRITON_INTERPRET=1"
# a graph compiled by an earlier run would come from the cache without being lowered again
inductor_config.fx_graph_cache = False
inductor_config.autotune_local_cache = False

timings: list = []
select_algorithm.add_feedback_saver(
    lambda found, name, *rest: timings.append({c.name: t for c, t in found.items()}))

table = registry.backends()
registry.register(dataclasses.replace(
    table["sycl"], device_types={"xpu", "cpu"}, defaults={"grouped_mm": {"cpu"}}, priority=5,
    evidence="a plugin's claim, for this test: the SYCL kernels on the CPU"), replace=True)
registry.register(dataclasses.replace(table["triton"], device_types={"cuda", "cpu"}),
                  replace=True)

torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
x, w = torch.randn(45, 40), torch.randn(4, 40, 24)
offs = numerics.random_offs([9, 0, 17, 14], "cpu")  # an empty group, rows past offs[-1]
want = numerics.grouped_mm(x, w, offs)  # fp64


def run(mode: str) -> dict:
    """One max-autotune compile and call: ``auto`` (the decision) or ``explicit``."""
    def fn(x, w, o):
        if mode == "explicit":
            return xvendor.grouped_mm(x, w, o, backend="sycl") * 2
        return xvendor.grouped_mm(x, w, o) * 2

    torch._dynamo.reset()
    timings.clear()
    out, code = run_and_get_code(torch.compile(fn, mode="max-autotune", fullgraph=True),
                                 x, w, offs)
    # the graph's own module (Inductor also returns the modules it built to benchmark)
    code = "\n".join(c for c in code if "benchmark_xvendor_" not in c)
    err = ((out.double() / 2 - want).abs().max() / want.abs().max()).item()
    return {"timings": list(timings), "err": err,
            "calls_xvendor": "torch.ops.xvendor.grouped_mm.default(" in code,
            "calls_torch": "aten._grouped_mm" in code}


print(json.dumps({
    "decision": registry.decide("grouped_mm", torch.device("cpu"), torch.float32).backend,
    "auto": run("auto"), "explicit": run("explicit")}))
