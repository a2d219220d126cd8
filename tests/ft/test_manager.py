"""``xvendor.ft`` (l1): a torchft-style training script (Manager, DistributedDataParallel,
OptimizerWrapper; only the import changed) on 3 replicas under ``xvendor run``; one is
killed (SIGKILL) mid-run, a replacement is started and admitted. Every finisher holds the
same parameters and optimizer state, every step was committed exactly once, and the
parameters equal an fp64 replay of the committed steps' averaged gradients."""

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
import xvendor.ft as torchft

torch.manual_seed(0)
model = torch.nn.Linear(6, 3, dtype=torch.float64)
opt = torch.optim.AdamW(model.parameters(), lr=0.05)
applied = torch.zeros(20000, dtype=torch.int64)

def state_dict():
    return {"model": model.state_dict(), "optim": opt.state_dict(), "applied": applied.clone()}

def load_state_dict(sd):
    model.load_state_dict(sd["model"])
    opt.load_state_dict(sd["optim"])
    applied.copy_(sd["applied"])

manager = torchft.Manager(pg=torchft.ProcessGroupGloo(), min_replica_size=1,
                          load_state_dict=load_state_dict, state_dict=state_dict)
ddp = torchft.DistributedDataParallel(manager, model)
optim = torchft.Optimizer(manager, opt)
members = []
sizes = {}

def committed(step):  # inside the commit: a newcomer admitted at this step sees it
    applied[step] += 1
    members.append([step, sizes[step]])

manager.register_commit_hook(committed)
# 30 steps, and on until the replacement (a cold interpreter: seconds, a minute on a loaded
# machine) has joined; ~10 ms per step, so 15000 steps wait > 150 s for it
while manager.current_step() < 30 or (manager.num_participants() < 3
                                      and manager.current_step() < 15000):
    step = manager.current_step()
    optim.zero_grad()
    if manager.rg.member == 1 and step == 10:
        os.kill(os.getpid(), signal.SIGKILL)
    g = torch.Generator().manual_seed(step * 100 + manager.participating_rank())
    x = torch.randn(4, 6, dtype=torch.float64, generator=g)
    ddp(x).square().mean().backward()
    sizes[step] = manager.num_participants()
    optim.step()
    time.sleep(0.01)
manager.shutdown()
with open(os.path.join(os.environ["OUT"], f"r{manager.rg.member}.json"), "w") as f:
    json.dump({"w": [p.detach().flatten().tolist() for p in model.parameters()],
               "exp_avg": [opt.state[p]["exp_avg"].flatten().tolist() for p in model.parameters()],
               "applied": applied.tolist(), "step": manager.current_step(),
               "participants": manager.num_participants(),
               "batches": manager.batches_committed(), "members": members}, f)
sys.stdout.flush()
os._exit(0)
'''


@pytest.mark.heavy
def test_torchft_style_script_survives_a_kill_and_a_replacement(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OUT=str(tmp_path))
    cmd = [sys.executable, "-m", "xvendor.distributed.cli", "run", "--nproc", "3",
           "--replace", "1", str(script)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=220,
                       start_new_session=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "member 1 failed: process" in p.stderr and "started replacement member 3" in p.stderr
    rs = [json.load(open(f)) for f in sorted(glob.glob(str(tmp_path / "r*.json")))]
    assert len(rs) == 3, p.stderr[-3000:]
    steps = rs[0]["step"]
    assert 30 <= steps < 15000
    for r in rs:
        assert r["step"] == steps and r["participants"] == 3
        assert r["w"] == rs[0]["w"] and r["exp_avg"] == rs[0]["exp_avg"]  # bit-identical
        assert r["applied"] == [1] * steps + [0] * (20000 - steps)  # none lost, none twice
        assert r["batches"] == rs[0]["batches"]
    # the survivors committed through the failure: 3 participants before, then 2
    sizes = [s for _, s in rs[0]["members"]]
    assert sizes[0] == 3 and 2 in sizes  # and 3 again at the end: "participants" above
