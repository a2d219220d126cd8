"""``xvendor demo elastic``: a small MoE model trained data-parallel over 4 gloo ranks on the
CPU. One rank is killed (SIGKILL) mid-run, training continues on 3, a replacement joins and
receives the state, training continues on 4; the loss is printed, and at the end every
finisher's parameters are hashed: the demo fails unless all hashes are equal.

The model: a top-1 router over ``E`` experts (each a 2-layer MLP) with stacked expert
weights ``(E, D, H)`` / ``(E, H, D)``, tokens dispatched to their expert by index; the task is
regression onto a fixed random teacher. Gradients travel as one flat all_reduce per step (the loss rides along).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import tempfile
import time

import torch
import torch.nn.functional as F

from .agent import Agent
from .control import EpochAborted, Timing
from .group import ResilientGroup

D, H, E, BATCH = 32, 64, 4, 64


class TinyMoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.router = torch.nn.Parameter(torch.randn(D, E, generator=g) * 0.1)
        self.w_up = torch.nn.Parameter(torch.randn(E, D, H, generator=g) * D ** -0.5)
        self.w_down = torch.nn.Parameter(torch.randn(E, H, D, generator=g) * H ** -0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = F.softmax(x @ self.router, dim=-1)
        weight, expert = gate.max(dim=-1)
        out = torch.zeros_like(x)
        for e in range(E):  # top-1 dispatch: each expert sees only its tokens
            rows = (expert == e).nonzero(as_tuple=True)[0]
            if rows.numel():
                h = F.gelu(x[rows] @ self.w_up[e])
                out[rows] = (h @ self.w_down[e]) * weight[rows, None]
        return x + out


def _batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 1009 + rank)
    x = torch.randn(BATCH, D, generator=g)
    teacher = torch.Generator().manual_seed(42)
    w = torch.randn(D, D, generator=teacher) / D ** 0.5
    return x, torch.tanh(x @ w)


def worker(spec: dict) -> None:
    torch.set_num_threads(1)
    model = TinyMoE()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    params = list(model.parameters())

    def get_state():
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    def set_state(s):
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["optim"])

    kw = dict(get_state=get_state, set_state=set_state, timing=Timing(**spec["timing"]),
              fr_dir=spec["fr_dir"])
    make = ResilientGroup.found if spec["role"] == "founder" else ResilientGroup.newcomer
    rg = make(spec["host"], spec["port"], spec["member"], **kw)
    if spec["role"] == "newcomer":
        print(f"  [member {rg.member}] joined at step {rg.step} as rank {rg.rank} of {rg.size} "
              f"({rg.stats['admitted_s']:.2f} s after asking; state from the oldest survivor)",
              flush=True)
    while rg.step < spec["steps"]:
        try:
            x, y = _batch(rg.step, rg.rank)
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(model(x), y)
            loss.backward()
            flat = torch.cat([p.grad.reshape(-1) for p in params] + [loss.detach().reshape(1)])
            total = rg.all_reduce(flat) / rg.size
            off = 0
            for p in params:
                p.grad = total[off:off + p.numel()].view_as(p).clone()
                off += p.numel()
            opt.step()
            if rg.rank == 0 and rg.step % 10 == 0:
                print(f"  step {rg.step:4d}  ranks {rg.size}  epoch {rg.epoch}  "
                      f"loss {total[-1].item():.5f}", flush=True)
            rg.commit_step()
            time.sleep(spec.get("step_sleep", 0.03))  # paced, so the show can be followed
        except EpochAborted as e:
            t0 = time.monotonic()
            rg.recover()
            if rg.rank == 0:
                print(f"  ! {str(e)[:110]}\n  -> epoch {rg.epoch}: continuing on {rg.size} ranks "
                      f"from step {rg.step} (recovered in {time.monotonic() - t0:.3f} s)", flush=True)
    rg.close()
    blob = b"".join(p.detach().numpy().tobytes() for p in params)
    with open(os.path.join(spec["out_dir"], f"demo_{rg.member}.json"), "w") as f:
        json.dump({"member": rg.member, "rank": rg.rank, "step": rg.step,
                   "digest": hashlib.sha256(blob).hexdigest()}, f)


def run(steps: int = 150, ranks: int = 4, kill_at: float = 0.25, join_at: float = 0.4) -> int:
    out = tempfile.mkdtemp(prefix="xv-demo-")
    t0 = time.monotonic()
    print(f"xvendor demo elastic: {ranks} gloo ranks on 127.0.0.1, {steps} steps, "
          f"flight recorder in {out}/fr")
    # torch._dynamo too: the first optimizer a process builds imports it (~2 s here), and
    # the forkserver should pay that once, not each replacement.
    with Agent(Timing(hb_timeout_s=3.0), fr_dir=os.path.join(out, "fr"),
               preload=(__name__, "torch._dynamo")) as agent:
        ids = agent.found(ranks, worker, steps=steps, out_dir=out)
        victim = ids[ranks // 2]
        _wait(lambda: agent.progress(ids[0]) >= int(steps * kill_at), 120)
        print(f"  >>> kill -9 member {victim} (pid {agent.pid(victim)})", flush=True)
        agent.signal(victim, signal.SIGKILL)
        _wait(lambda: agent.progress(ids[0]) >= int(steps * join_at), 120)
        newcomer = agent.newcomer(worker, steps=steps, out_dir=out)
        print(f"  >>> replacement member {newcomer} started", flush=True)
        if not agent.wait(120) and not _all_done(out, ranks):
            print("xvendor demo elastic: FAIL (workers did not finish in 120 s)")
            return 1
    done = [json.load(open(os.path.join(out, f))) for f in sorted(os.listdir(out))
            if f.startswith("demo_")]
    digests = {d["digest"] for d in done}
    for d in done:
        print(f"  member {d['member']} rank {d['rank']} step {d['step']} params sha256 "
              f"{d['digest'][:16]}")
    ok = len(done) == ranks and len(digests) == 1 and all(d["step"] == steps for d in done)
    print(f"xvendor demo elastic: {'PASS' if ok else 'FAIL'}: {len(done)} finishers, "
          f"{len(digests)} distinct parameter hash(es), {time.monotonic() - t0:.1f} s")
    return 0 if ok else 1


def _all_done(out: str, n: int) -> bool:
    return sum(f.startswith("demo_") for f in os.listdir(out)) >= n


def _wait(cond, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError(f"demo: no progress within {timeout_s} s")
        time.sleep(0.01)
