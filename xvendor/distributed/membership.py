"""How a ``ResilientGroup`` agrees on an epoch and forms it: the membership half of
``group`` (functions over the group object, as ``env.reconnect`` is).

``converge`` loops until this member belongs to a formed epoch newer than ``after``: it
reads the latest proposed epoch, forms it (``form``) when it is not aborted, and otherwise
waits for the verdict on who failed and proposes the survivors (first proposal wins,
``Control.propose``). ``form`` meets the epoch's members through their ready flags (each
says whether its member holds state, and at which committed step), builds the group on a
helper thread that keeps reading the abort flag (``build``), and copies step and state from
the most advanced member that holds state (``sync_state``). A member found dead, or absent
from the latest epoch, is excluded (``ResilientGroup._exclude`` raises ``Excluded``).
"""

from __future__ import annotations

import io
import threading
import time

import torch

from . import control as cp
from .control import EpochAborted


def converge(rg, after: int, t0: float) -> None:
    """Return once ``rg`` is a member of a formed epoch newer than ``after``."""
    settle: dict[int, float] = {}
    while True:
        if time.monotonic() - t0 > rg.timing.join_timeout_s:
            raise RuntimeError(f"member {rg.member}: membership did not converge within "
                               f"{rg.timing.join_timeout_s} s")
        if rg.ctl.is_dead(rg.member):
            rg._exclude(f"member {rg.member} was declared dead: "
                        f"{rg.ctl.get(cp.key_dead(rg.member))}")
        latest = rg.ctl.latest_epoch()
        rec = rg.ctl.record(latest)
        if rg.member not in rec["members"]:
            rg._exclude(f"member {rg.member} is not in epoch {latest} {rec['members']}")
        if latest > after and not rg.ctl.aborted(latest):
            try:
                form(rg, latest, rec)
                return
            except EpochAborted:
                rg._retire_current()
                continue
        rg.ctl.abort(latest, f"member {rg.member} left epoch {latest}")
        gone = departed(rg, rec["members"])
        first = settle.setdefault(latest, time.monotonic())
        if not gone and time.monotonic() - first < rg.timing.hb_timeout_s + rg.timing.margin_s:
            time.sleep(rg.timing.slice_s)  # wait for the agent's verdict on who failed
            continue
        rg._dump(latest, rec["members"])
        rg.ctl.propose(latest + 1, {"members": [m for m in rec["members"] if m not in gone],
                                    "joins": rec.get("joins", 0),
                                    "why": f"shrink after epoch {latest}: {sorted(gone)}"})


def departed(rg, members: list[int]) -> set[int]:
    """The members that died (a verdict) or left cleanly."""
    dead = rg.ctl.dead()
    return {m for m in members if m in dead or rg.ctl.store.check([cp.key_left(m)])}


def form(rg, e: int, rec: dict) -> None:
    """Meet epoch ``e``'s members, build its group, sync step and state; ``EpochAborted``
    when a member will not arrive or the epoch is aborted meanwhile."""
    members = rec["members"]
    keys = [cp.key_ready(e, m) for m in members]
    rg.ctl.store.set(cp.key_ready(e, rg.member),
                     f"1:{int(rg.step)}" if rg.has_state else "0")
    t0, polls = time.monotonic(), 0
    while not rg.ctl.store.check(keys):
        polls += 1
        if polls % 4:  # arrivals are polled often, deaths and aborts every 4th time
            time.sleep(rg.timing.slice_s / 4)
            continue
        if rg.ctl.aborted(e):
            raise EpochAborted(f"epoch {e} aborted while forming")
        gone = departed(rg, members)
        if gone or time.monotonic() - t0 > rg.timing.join_timeout_s:
            rg.ctl.abort(e, f"members {sorted(gone)} will not arrive at epoch {e}")
            raise EpochAborted(f"epoch {e}: members {sorted(gone)} will not arrive")
        time.sleep(rg.timing.slice_s / 4)
    flags = [v.decode() for v in rg.ctl.store.multi_get(keys)]
    steps = [int(f[2:]) if f.startswith("1:") else -1 for f in flags]
    if max(steps) < 0:
        raise RuntimeError(f"epoch {e}: no member holds state (members {members})")
    # The oldest member holding state; among several, the most advanced (members differ
    # only after a coordinator restart, when some committed a step the others did not).
    src = steps.index(max(steps))
    prev, prev_members = rg._prev or (None, [])
    rg._prev = None
    rg.epoch, rg.rank, rg.members, rg.record = e, members.index(rg.member), members, rec
    try:
        rg.pg = build(rg, e, members, prev, prev_members)
    except RuntimeError as err:
        rg.ctl.abort(e, f"member {rg.member}: group creation failed: {err}")
        raise EpochAborted(f"epoch {e}: group creation failed: {err}") from err
    sync_state(rg, src)
    rg.has_state = True
    rg.stats["epochs"].append({"epoch": e, "members": members, "rank": rg.rank})
    for notify in rg.listeners:  # adapters (resilient_ddp) move to the new epoch
        notify(rg, prev_members)


def build(rg, e: int, members: list[int], prev, prev_members: list[int]):
    """The epoch's group, built on a helper thread: a gloo constructor connects to every
    peer and blocks for the whole op timeout if one died after the rendezvous (seen in
    the two-failures drill). The constructor releases the GIL, so this thread keeps
    reading the abort flag and, on abort, leaves the builder behind (it times out)."""
    box: dict = {}

    def construct():
        try:
            box["pg"] = rg.plane.form(e, rg.rank, members, prev, prev_members,
                                      lambda w: rg._wait(w, time.monotonic()))
        except BaseException as err:  # handed to the training thread
            box["err"] = err

    th = threading.Thread(target=construct, name=f"xv-build-{e}", daemon=True)
    th.start()
    while th.is_alive():
        th.join(rg.timing.slice_s)
        if th.is_alive() and (rg.ctl.aborted(e) or departed(rg, members)):
            rg.ctl.abort(e, f"member {rg.member}: a peer died while epoch {e} connected")
            raise EpochAborted(f"epoch {e} aborted while its group connected")
    if "err" in box:
        raise box["err"]
    return box["pg"]


def sync_state(rg, src: int) -> None:
    payload = None
    if rg.rank == src:
        bio = io.BytesIO()
        torch.save({"step": int(rg.step), "state": rg.get_state()}, bio)
        payload = torch.frombuffer(bytearray(bio.getvalue()), dtype=torch.uint8)
        header = torch.tensor([payload.numel(), rg.step], dtype=torch.int64)
    else:
        header = torch.zeros(2, dtype=torch.int64)
    header = rg.broadcast(header, src, _op="state_header")
    buf = payload if payload is not None else torch.empty(int(header[0]), dtype=torch.uint8)
    buf = rg.broadcast(buf, src, _op="state_payload").cpu()
    if rg.rank != src:
        obj = torch.load(io.BytesIO(buf.numpy().tobytes()), weights_only=True)
        rg.set_state(obj["state"])
        rg.step = int(obj["step"])
