"""The DDP drill worker: ``python -m drills.ddp_drill`` (plain, or under
``torchrun``), joining a ``Coordinator`` from the environment, spec in ``XV_DRILL`` (JSON).

The model makes every mistake visible, exactly. Two float64 parameters; the loss is
``(w1 * x1).sum() + (w2 * x2).sum()``, so the gradients are the inputs. At step ``s`` rank
``r`` of ``W`` feeds ``x = 6 ((s + 1) + (r - (W - 1) / 2))``: the rank terms cancel only in
the true average over all ``W`` members, so DDP's averaged gradient must be exactly
``6 (s + 1)``: a missing or extra contributor shows. (DDP divides each contribution by ``W``
before summing; the factor 6 keeps ``x / W`` exact in binary for ``W <= 4``.) SGD (lr 1)
makes ``w = -3 n (n + 1)`` after ``n`` steps, and ``applied[s]`` counts the optimizer steps
taken at step ``s``: a lost step leaves a 0, a doubled one a 2.

Faults, from the spec: ``die`` ``{"replica", "step"}`` SIGKILLs this worker inside backward
(while its peers are in the all_reduce) on its first incarnation; ``slow`` ``{"replica",
"from_step", "s"}`` sleeps in every step from then on (a straggler); ``stop`` ``{"replica",
"step"}`` SIGSTOPs itself (a hang); ``veto_at`` makes the guard's ``agree`` overrule the
first commit of that step (as a replica group's other lane would). ``backend`` ``"nccl"`` (l2) puts replica ``rK`` on GPU
``K mod count``.
"""

from __future__ import annotations

import faulthandler
import hashlib
import json
import os
import signal
import sys
import time

import torch

from xvendor.distributed.control import Excluded
from xvendor.distributed.ddp import resilient_ddp
from xvendor.distributed.group import ResilientGroup


class ExactModel(torch.nn.Module):
    def __init__(self, n1: int = 37, n2: int = 300):  # sizes that fill no bucket evenly
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.zeros(n1, dtype=torch.float64))
        self.w2 = torch.nn.Parameter(torch.zeros(n2, dtype=torch.float64))

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        return (self.w1 * x1).sum() + (self.w2 * x2).sum()


def check_collectives(rg) -> list[str]:
    """Every collective of this epoch's ``ResilientProcessGroup`` once, through its own methods
    and through ``torch.distributed``'s functions, into NaN-poisoned outputs; exact checks."""
    import torch.distributed as dist
    pg, r, w = rg.torch_group(), rg.rank, rg.size
    f64, nan, errors = torch.float64, float("nan"), []

    def ok(cond, what):
        if not bool(cond):
            errors.append(what)
    t = torch.full((5,), float(r + 1), dtype=f64)
    pg.allreduce([t]).wait()
    ok((t == w * (w + 1) / 2).all(), f"allreduce {t.tolist()}")
    t = torch.full((7,), float(r + 1), dtype=f64)
    o = dist.AllreduceOptions()
    o.reduceOp = dist.ReduceOp.AVG
    pg.allreduce([t], o).wait()
    ok((t == (w + 1) / 2).all(), f"allreduce AVG {t.tolist()}")
    a, b = torch.full((3,), float(r)), torch.full((2,), 2.0 * r)
    pg.allreduce_coalesced([a, b]).wait()
    ok((a == w * (w - 1) / 2).all() and (b == w * (w - 1)).all(), "allreduce_coalesced")
    x = torch.arange(3, dtype=f64) if r == w - 1 else torch.full((3,), nan, dtype=f64)
    bo = dist.BroadcastOptions()
    bo.rootRank = w - 1
    pg.broadcast([x], bo).wait()
    ok((x == torch.arange(3, dtype=f64)).all(), f"broadcast {x.tolist()}")
    outs = [torch.full((2,), nan) for _ in range(w)]
    pg.allgather([outs], [torch.full((2,), float(r))]).wait()
    ok(all((o == i).all() for i, o in enumerate(outs)), "allgather")
    big = torch.full((w * 3,), nan)
    pg._allgather_base(big, torch.full((3,), float(r))).wait()
    ok((big == torch.arange(w).repeat_interleave(3)).all(), f"_allgather_base {big.tolist()}")
    out = torch.full((3,), nan, dtype=f64)
    pg._reduce_scatter_base(out, torch.arange(w * 3, dtype=f64) + r).wait()
    want = w * torch.arange(3 * r, 3 * r + 3, dtype=f64) + w * (w - 1) / 2
    ok((out == want).all(), f"_reduce_scatter_base {out.tolist()} != {want.tolist()}")
    out = torch.full((2,), nan)
    pg.reduce_scatter([out], [[torch.full((2,), float(j + r)) for j in range(w)]]).wait()
    ok((out == w * r + w * (w - 1) / 2).all(), f"reduce_scatter {out.tolist()}")
    pg.barrier().wait()
    t = torch.full((4,), float(r + 1), dtype=f64)
    dist.all_reduce(t, group=pg)  # the functional API resolves the group through c10d
    ok((t == w * (w + 1) / 2).all(), f"dist.all_reduce {t.tolist()}")
    import torch.distributed._functional_collectives as funcol
    t = funcol.all_reduce(torch.full((3,), float(r + 1), dtype=f64), "sum", pg)
    t = funcol.wait_tensor(t)  # resolved by name through c10d's registry
    ok((t == w * (w + 1) / 2).all(), f"functional all_reduce {t.tolist()}")
    ok(pg.error is None, f"latched: {pg.error}")
    return errors


def _mine(spec: dict, what: str, replica: str, restart: int) -> dict | None:
    f = spec.get(what)
    return f if f and f["replica"] == replica and restart == 0 else None


def main() -> None:
    spec = json.loads(os.environ["XV_DRILL"])
    replica = os.environ.get("XVENDOR_REPLICA_ID", "?")
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    tag = f"{replica}_r{os.environ.get('RANK', '0')}_i{restart}"
    torch.set_num_threads(1)
    stacks = open(os.path.join(spec["out_dir"], f"stack_{tag}.txt"), "w")
    faulthandler.dump_traceback_later(spec.get("stack_dump_s", 100), exit=False, file=stacks)
    model = ExactModel(*spec.get("sizes", (37, 300)))
    if spec.get("wrong_model") == replica:
        model = ExactModel(38, 300)
    kw = {}
    if spec.get("backend", "gloo") != "gloo":  # l2: one GPU per replica, by replica index
        dev = torch.device("cuda", int(replica.lstrip("r") or 0) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
        model = model.to(dev)
        kw = {"backend": spec["backend"], "device": dev}
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    cap = spec.get("max_steps", spec["steps"])
    applied = torch.zeros(cap, dtype=torch.int64)
    result = {"replica": replica, "restart": restart, "pid": os.getpid(), "errors": []}
    holder: dict = {}

    def after_step(*_):  # the optimizer stepped: count it and check the averaged gradient
        s = int(holder["rg"].step)
        applied[s] += 1
        for p in model.parameters():
            if not bool((p.grad == 6 * (s + 1)).all()) and len(result["errors"]) < 20:
                result["errors"].append(f"step {s}: grad {p.grad.unique()[:4].tolist()} "
                                        f"!= {6 * (s + 1)}")
    opt.register_step_post_hook(after_step)

    def get_state():
        return {"model": model.state_dict(), "applied": applied, "optim": opt.state_dict()}

    def set_state(s):
        model.load_state_dict(s["model"])
        applied.copy_(s["applied"])
        opt.load_state_dict(s["optim"])

    try:
        rg = ResilientGroup.from_env(get_state, set_state, model=model, **kw)
    except Exception as e:  # refused (token, version, model) or no coordinator
        import traceback
        _write(spec, tag, result | {"refused": f"{type(e).__name__}: {e}",
                                    "traceback": traceback.format_exc()[-2000:]})
        return
    holder["rg"] = rg
    result["joined_at"] = int(rg.step)
    if spec.get("check_collectives"):
        result["collective_errors"] = check_collectives(rg)
    ddp = resilient_ddp(model, rg)
    die, slow = _mine(spec, "die", replica, restart), _mine(spec, "slow", replica, restart)
    stop = _mine(spec, "stop", replica, restart)
    if die:
        model.w2.register_hook(lambda g: os.kill(os.getpid(), signal.SIGKILL)
                               if int(rg.step) == die["step"] else g)
    want = spec.get("final_size", 0)
    vetoed: set[int] = set()

    def veto(commit: bool) -> bool:  # overrule the first commit of step veto_at, once
        s = int(rg.step)
        if commit and s == spec["veto_at"] and s not in vetoed:
            vetoed.add(s)
            return False
        return commit
    try:
        while rg.step < spec["steps"] or (rg.size < want and rg.step < cap):
            s, r, w = int(rg.step), rg.rank, rg.size
            if spec.get("progress"):  # for a driver that acts at a step (coordinator restart)
                with open(os.path.join(spec["out_dir"], f"progress_{tag}"), "w") as f:
                    f.write(str(s))
            if stop and s == stop["step"]:
                os.kill(os.getpid(), signal.SIGSTOP)
            with rg.step(opt, agree=veto if spec.get("veto_at") is not None else None):
                if slow and s >= slow["from_step"]:
                    time.sleep(slow["s"])
                x = 6.0 * ((s + 1) + (r - (w - 1) / 2))
                opt.zero_grad(set_to_none=True)
                ddp(torch.full_like(model.w1, x), torch.full_like(model.w2, x)).backward()
            time.sleep(spec.get("step_sleep", 0.02))
    except Excluded as e:
        _write(spec, tag, result | {"excluded": str(e), "member": rg.member})
        return
    rg.close()
    blob = b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())
    n = int(rg.step)
    result.update(finished=True, member=rg.member, step=n, size=rg.size, epoch=rg.epoch,
                  w_ok=all(bool((p == -3 * n * (n + 1)).all()) for p in model.parameters()),
                  applied_ok=applied[:n].tolist() == [1] * n and int(applied[n:].sum()) == 0,
                  digest=hashlib.sha256(blob).hexdigest(), redone=rg.stats.get("redone", []),
                  rebuilds=ddp.rebuilds, updates=ddp.updates,
                  recoveries=[x["kind"] for x in rg.stats["recoveries"]],
                  reconnects=len(rg.stats.get("reconnects", [])))
    _write(spec, tag, result)


def _write(spec: dict, tag: str, result: dict) -> None:
    path = os.path.join(spec["out_dir"], f"result_{tag}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # skip teardown: a retired group may still hold an op stuck on a dead peer
