"""The NCCL/RCCL fast path on real GPUs (l2): a kill -9 with the backend's shrink mechanism
chosen by feature detection. Needs at least two GPUs; skipped with the reason elsewhere.
Never run where this was written (no GPU): see docs/resilient-groups.md."""

import glob
import json
import signal
import time

import pytest
import torch

from drills import drill
from xvendor.distributed import Agent, Timing, dataplane

N_GPU = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.l2, pytest.mark.timeout(300),
              pytest.mark.skipif(N_GPU < 2, reason=f"needs >= 2 CUDA/ROCm GPUs, found {N_GPU}")]


def test_nccl_shrink_after_kill9(tmp_path):
    n = min(N_GPU, 4)
    with Agent(Timing(hb_timeout_s=5.0), fr_dir=str(tmp_path / "fr"),
               preload=(drill.__name__,)) as agent:
        ids = agent.found(n, drill.train, steps=60, out_dir=str(tmp_path), backend="nccl")
        end = time.monotonic() + 120
        while agent.progress(ids[-1]) < 10:
            assert time.monotonic() < end, "no progress"
            time.sleep(0.01)
        agent.signal(ids[-1], signal.SIGKILL)
        end = time.monotonic() + 120
        while len(glob.glob(str(tmp_path / "result_*.json"))) < n - 1:
            assert time.monotonic() < end, "survivors did not finish"
            time.sleep(0.05)
    rs = [json.load(open(p)) for p in glob.glob(str(tmp_path / "result_*.json"))]
    assert all(r["finished"] and r["errors"] == [] and r["applied"] == [1] * 60 for r in rs)
    assert len({r["digest"] for r in rs}) == 1
    want = dataplane.choose(dataplane.detect("nccl"))[0]
    assert all(r["strategy"] == want for r in rs)
