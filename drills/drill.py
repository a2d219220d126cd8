"""Fault drills: the worker the l1 tests and the recovery benchmark start (it must live in an
importable module: tests are imported with --import-mode=importlib, and the agent's
forkserver imports it).

The update rule makes every mistake visible. At step ``s`` a member at rank ``r`` of an
epoch of ``W`` contributes ``(s + 1) * (r + 1)``; the all_reduce must give
``(s + 1) * W (W + 1) / 2`` exactly (so a missing or extra contributor shows), and the
parameter grows by ``s + 1``. After ``steps`` steps every finisher must hold
``steps (steps + 1) / 2`` everywhere and ``applied[s] == 1`` for every step: a lost step
leaves a 0, a step applied twice a 2. Broadcast, all_gather, reduce_scatter and barrier are
checked every few steps.

Fault points (``spec["die"]``): a real SIGKILL of the worker itself at a point a test cannot
hit by timing from outside: ``{"member": m, "at": "handoff_source"}`` (while serving state
to a newcomer or to survivors, epoch > 0) or ``{"role": "newcomer", "at": "joining"}`` (a
newcomer, while receiving its state).
"""

from __future__ import annotations

import faulthandler
import gc
import hashlib
import json
import os
import signal
import time

import torch

from xvendor.distributed.control import EpochAborted, Excluded, Timing
from xvendor.distributed.group import ResilientGroup


class _Model:
    def __init__(self, n: int, steps: int):
        self.param = torch.zeros(n, dtype=torch.float64)
        self.applied = torch.zeros(steps, dtype=torch.int64)

    def get(self) -> dict:
        return {"param": self.param, "applied": self.applied}

    def set(self, s: dict) -> None:
        self.param, self.applied = s["param"].clone(), s["applied"].clone()


def _check(errors: list, ok: bool, what: str) -> None:
    if not ok and len(errors) < 20:
        errors.append(what)


def _step(rg: ResilientGroup, m: _Model, errors: list) -> None:
    s, r, w = rg.step, rg.rank, rg.size
    tri = w * (w + 1) // 2
    out = rg.all_reduce(torch.full_like(m.param, float((s + 1) * (r + 1))))
    _check(errors, bool((out == (s + 1) * tri).all()),
           f"step {s} epoch {rg.epoch}: all_reduce {out[0].item()} != {(s + 1) * tri}")
    if s % 4 == 1:
        b = rg.broadcast(torch.full((4,), float(r * 100 + s)), src=w - 1)
        _check(errors, bool((b == (w - 1) * 100 + s).all()), f"step {s}: broadcast {b.tolist()}")
        g = rg.all_gather(torch.tensor([float(r)]))
        _check(errors, [x.item() for x in g] == [float(i) for i in range(w)],
               f"step {s}: all_gather {[x.item() for x in g]}")
        rs = rg.reduce_scatter([torch.full((3,), float(j + 1)) for j in range(w)])
        _check(errors, bool((rs == w * (r + 1)).all()), f"step {s}: reduce_scatter {rs.tolist()}")
        rg.barrier()
    m.param += out / tri
    m.applied[s] += 1


def _maybe_die(spec: dict, at: str) -> None:
    die = spec.get("die") or {}
    if die.get("at") == at and (die.get("member") == spec["member"] or
                                die.get("role") == spec["role"]):
        os.kill(os.getpid(), signal.SIGKILL)


def train(spec: dict) -> None:
    """Run ``spec["steps"]`` steps through every failure; write a JSON result at the end."""
    torch.set_num_threads(1)
    # A drill that is still running after stack_dump_s leaves its threads' stacks behind
    # (stack_<id>.txt): a hang then says where it hung.
    stacks = open(os.path.join(spec["out_dir"], f"stack_{spec['member']}.txt"), "w")
    faulthandler.dump_traceback_later(spec.get("stack_dump_s", 45), exit=False, file=stacks)
    m = _Model(spec.get("numel", 64), spec["steps"])
    member = spec["member"]
    holder: dict = {}

    def get_state():
        if "rg" in holder and holder["rg"].epoch > 0:  # serving state in a later epoch
            _maybe_die(spec, "handoff_source")
        return m.get()

    def set_state(s):
        if "rg" not in holder:  # a newcomer receiving its first state
            _maybe_die(spec, "joining")
        m.set(s)

    kw = dict(get_state=get_state, set_state=set_state, timing=Timing(**spec["timing"]),
              fr_dir=spec["fr_dir"], backend=spec.get("backend", "gloo"),
              strategy=spec.get("strategy"))
    if kw["backend"] != "gloo":  # l2: one GPU per worker, by member id
        kw["device"] = f"cuda:{member % torch.cuda.device_count()}"
        torch.cuda.set_device(kw["device"])
    result = {"members": [member], "errors": [], "excluded": [], "pid": os.getpid()}
    try:
        if spec["role"] == "founder":
            rg = ResilientGroup.found(spec["host"], spec["port"], member, **kw)
        else:
            rg = ResilientGroup.newcomer(spec["host"], spec["port"], member, **kw)
    except Excluded as e:
        result["excluded"].append(str(e))
        _write(spec, member, result)
        return
    holder["rg"] = rg
    calls, recov, rejoined = [], [], False
    while rg.step < spec["steps"]:
        try:
            try:
                _step(rg, m, result["errors"])
                rg.commit_step()
                time.sleep(spec.get("step_sleep", 0.02))
            except EpochAborted:
                rg.recover()  # may raise Excluded: caught below, not by a sibling clause
        except Excluded as e:
            result["excluded"].append(str(e))
            calls.append(rg.stats["max_call_s"])
            recov += rg.stats["recoveries"]
            if not spec.get("rejoin"):
                _write(spec, member, result | {"finished": False})
                return
            rg = rg.rejoin()
            holder["rg"] = rg
            result["members"].append(rg.member)
            rejoined = True
        if rejoined:
            # The excluded object became garbage when the except clause ended: collect it
            # here, at a fixed point, not wherever the collector happens to run. The fix is
            # in the library (``group._exclude`` hands its groups to the retirer); this
            # makes the drill deterministic about it: were a stuck gloo group still held
            # by the excluded object, its destructor would block right here, every run,
            # for gloo's op timeout, and the drill's call bound would fail.
            rejoined = False
            gc.collect()
    rg.close()
    calls.append(rg.stats["max_call_s"])
    recov += rg.stats["recoveries"]
    result.update(finished=True, step=rg.step, epoch=rg.epoch, size=rg.size,
                  param0=m.param[0].item(), param_ok=bool((m.param == m.param[0]).all()),
                  digest=hashlib.sha256(m.param.numpy().tobytes()).hexdigest(),
                  applied=m.applied.tolist(), max_call_s=max(calls), recoveries=recov,
                  epochs=rg.stats["epochs"], strategy=rg.strategy, paths=rg.plane.used,
                  member=rg.member)
    _write(spec, member, result)


def _write(spec: dict, member: int, result: dict) -> None:
    path = os.path.join(spec["out_dir"], f"result_{member}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(result, f)
    os.replace(path + ".tmp", path)


def pulse(spec: dict) -> None:
    """The benchmark's worker: a small all_reduce every ``period_s`` until ``xv/bench/stop``.

    It writes ``xv/bench/up/<id>`` (process up, wall clock) and ``xv/bench/ok/<epoch>/<id>``
    (its first good collective in each epoch) for the driver to time recoveries with.
    """
    t_up = time.time()
    torch.set_num_threads(1)
    state = {"w": torch.zeros(spec.get("numel", 1 << 18))}
    if spec.get("ckpt"):  # a full restart loads the checkpoint
        state = torch.load(spec["ckpt"], weights_only=True)
    kw = dict(get_state=lambda: state, set_state=lambda s: state.update(s),
              timing=Timing(**spec["timing"]), fr_dir=spec.get("fr_dir"))
    make = ResilientGroup.found if spec["role"] == "founder" else ResilientGroup.newcomer
    rg = make(spec["host"], spec["port"], spec["member"], **kw)
    store = rg.ctl.store
    store.set(f"xv/bench/up/{rg.member}", repr(t_up))
    x, seen = torch.ones(1024), -1
    while not store.check(["xv/bench/stop"]):
        try:
            rg.all_reduce(x)
            if rg.epoch != seen:
                seen = rg.epoch
                store.set(f"xv/bench/ok/{rg.epoch}/{rg.member}", repr(time.time()))
            rg.commit_step()
            time.sleep(spec.get("period_s", 0.01))
        except EpochAborted:
            rg.recover()
    rg.close()


def _pulse_from_env() -> None:
    import sys
    spec = json.loads(os.environ["XV_BENCH"])
    spec.update(host=os.environ["XV_STORE_HOST"], port=int(os.environ["XV_STORE_PORT"]),
                member=int(os.environ["XV_MEMBER"]), role=os.environ["XV_ROLE"],
                timing=json.loads(os.environ["XV_TIMING"]))
    pulse(spec)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a retired group may still hold a stuck op


if __name__ == "__main__":
    _pulse_from_env()
