"""``xvendor run`` (l1): an agent starts fresh interpreters running a user script, one dies
(SIGKILL), a replacement is started and admitted, and every finisher agrees on the state."""

import glob
import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.l1, pytest.mark.timeout(240)]

SCRIPT = r'''
import json, os, signal, sys, time
import torch
from xvendor.distributed import EpochAborted, ResilientGroup

state = {"x": torch.zeros(4, dtype=torch.float64), "applied": torch.zeros(2000, dtype=torch.int64)}
rg = ResilientGroup.from_env(lambda: state, lambda s: state.update(s))
# 40 steps, and on until the replacement (a cold interpreter: seconds) has joined
while rg.step < 40 or (rg.size < 3 and rg.step < 1800):
    try:
        if rg.member == 1 and rg.step == 10:
            os.kill(os.getpid(), signal.SIGKILL)
        out = rg.all_reduce(torch.ones(4, dtype=torch.float64))
        state["x"] += out / rg.size
        state["applied"][rg.step] += 1
        rg.commit_step()
        time.sleep(0.05)
    except EpochAborted:
        rg.recover()
rg.close()
with open(os.path.join(os.environ["OUT"], f"r{rg.member}.json"), "w") as f:
    json.dump({"x": state["x"].tolist(), "applied": state["applied"].tolist(), "size": rg.size,
               "step": rg.step}, f)
sys.stdout.flush()
os._exit(0)
'''


def test_xvendor_run_replaces_a_killed_worker(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OUT=str(tmp_path))
    cmd = [sys.executable, "-m", "xvendor.distributed.cli", "run", "--nproc", "3",
           "--replace", "1", "--fr-dir", str(tmp_path / "fr"), str(script)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=220,
                       start_new_session=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "member 1 failed: process" in p.stderr and "started replacement member 3" in p.stderr
    rs = [json.load(open(f)) for f in sorted(glob.glob(str(tmp_path / "r*.json")))]
    assert len(rs) == 3, p.stderr[-3000:]
    steps = rs[0]["step"]
    assert 40 <= steps < 1800, steps
    for r in rs:
        assert r["step"] == steps and r["size"] == 3 and r["x"] == [float(steps)] * 4
        assert r["applied"] == [1] * steps + [0] * (2000 - steps)
