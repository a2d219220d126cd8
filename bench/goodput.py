"""Goodput under failures: one small training job, three ways, the same seeded failures.

The job: data-parallel training of an MLP (``--width`` 1024: 4.4 MB of fp32 parameters, SGD
with momentum) on synthetic batches, gloo on 127.0.0.1, ``--replicas`` replica groups of one
process each, a fixed 20 ms of "compute" per step (``bench/elastic_ddp.py``'s workers, model
and data: the same code for xvendor and torchft). It runs for fixed wall times, three ways:

  xvendor   resilient DDP: each replica group under its own ``torchrun --max-restarts N``,
            ``xvendor coordinator`` outside them; survivors go on on a shrunk epoch, a
            restarted worker rejoins and receives the state from a survivor;
  torchft   torchft 0.2.0 (``pip install -e '.[bench]'``): the same layout with its Rust
            lighthouse; its Manager drops the step a failure hit and heals the restarted one;
  ckpt      restart from a checkpoint: ONE ``torchrun --nproc-per-node R --max-restarts N``
            running plain torch DDP; any worker's death makes torchrun restart all of them,
            and they resume from the last ``torch.distributed.checkpoint`` save, written
            every K steps. K comes from the Young/Daly rule: the interval that minimises the
            expected waste is tau = sqrt(2 * C * MTBF) for a checkpoint cost C, so
            K = tau / step time; C and the step time are measured by the job itself before
            the windows start (printed with the choice).

Each way, in order: start, warm up (every replica committed ``--warm`` steps together), a
failure-free window (``--ff-window`` s), the failure window (``--window`` s: kill -9 of one
random worker at exponential inter-arrival times of mean ``--mtbf`` s, drawn once from
``--seed`` so the three ways get the same times and victims), a wait until the job is whole
again, a second failure-free window (the failure-free rate is the mean of the windows either
side, so load drift on a shared machine cancels to first order). Reported per way:

  goodput      useful steps/s in the failure window / useful steps/s failure-free. A useful
               step is one the training keeps, weighted by the share of the replicas that
               trained it: xvendor and torchft go on with fewer replicas, and a step
               committed by 2 of 3 saw 2/3 of the batch (it counts 2/3); for ckpt, steps
               done since the last checkpoint are undone by a failure and count nothing;
  steps        the same for the committed step counter, unweighted (with fewer replicas a
               step is quicker on a shared CPU: this fraction can exceed 1);
  steps lost   ckpt: steps rolled back to the checkpoint, summed over the failures;
               xvendor/torchft: committed steps lost (a replica's committed step counter
               that goes back or skips: must be 0) / attempts discarded (a step in flight at
               a failure, not committed);
  recover      mean over failures of kill -> the first step past the one the job had reached,
               begun after the kill (ckpt: after the restart, the restore and the redo);
  whole        mean of kill -> the job trains with all R replicas again.

    python bench/goodput.py [--mtbf 30] [--window 120] [--replicas 3]
                            [--ways xvendor,torchft,ckpt] [--quick] [--json out.json]

Every process the bench starts carries a marker in its environment (``XVENDOR_GOODPUT_RUN``,
set from the environment if present) and is killed (SIGKILL) at the end of each way, on
Ctrl-C, SIGTERM or an error, whatever session it put itself in (torchrun starts each worker
in a new session). A SIGKILL of the bench itself cannot be caught: its children would stay.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import elastic_ddp as E  # noqa: E402  (the workers, model, data and coordinators)

PY = sys.executable
MARK = "XVENDOR_GOODPUT_RUN"
WAYS = ("xvendor", "torchft", "ckpt")


# -- the checkpoint-restart worker (under one torchrun with R processes) --------------------
def ckpt_worker(a) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    log = E._Log(a.workdir, rank)
    log.write(event="up")
    model = E._model(a.width)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ddp = DDP(model)
    root = os.path.join(a.workdir, "ckpt")
    latest_path = os.path.join(root, "latest")

    def state():
        msd, osd = get_state_dict(ddp, opt)
        return {"model": msd, "optim": osd, "step": torch.tensor(step)}

    def save() -> float:
        t = time.perf_counter()
        path = os.path.join(root, f"step_{step:07d}")
        dcp.save(state(), checkpoint_id=path)
        dist.barrier()                              # every rank's shard is on disk
        if rank == 0:
            with open(latest_path + ".tmp", "w") as f:
                f.write(path)
            os.replace(latest_path + ".tmp", latest_path)
            for old in sorted(x for x in os.listdir(root) if x.startswith("step_"))[:-2]:
                _rmtree(os.path.join(root, old))      # keep the newest two
        log.write(event="ckpt", step=step)
        return time.perf_counter() - t

    step = 0
    if os.path.exists(latest_path):
        with open(latest_path) as f:
            path = f.read().strip()
        sd = state()
        dcp.load(sd, checkpoint_id=path)
        set_state_dict(ddp, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        step = int(sd["step"])
        log.write(event="resume", step=step)
    os.makedirs(root, exist_ok=True)

    def train_step() -> None:
        nonlocal step
        t0 = time.time()
        opt.zero_grad()
        x, y = E._batch(rank, step)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        time.sleep(E.COMPUTE_S)
        opt.step()
        step += 1
        log.write(event="attempt", step=step, committed=True, n=world, t0=t0)

    plan_path = os.path.join(a.workdir, "ckpt_plan.json")
    if not os.path.exists(plan_path):               # first start: measure, then choose K
        for _ in range(a.warm):
            train_step()
        t = time.perf_counter()
        for _ in range(a.warm):
            train_step()
        t_step = (time.perf_counter() - t) / a.warm
        costs = [save() for _ in range(3)]
        c = statistics.median(costs)
        both = torch.tensor([c, t_step], dtype=torch.float64)
        dist.all_reduce(both, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        c, t_step = float(both[0]), float(both[1])
        tau = math.sqrt(2 * c * a.mtbf)
        k = max(1, round(tau / t_step))
        if rank == 0:
            with open(plan_path + ".tmp", "w") as f:
                json.dump({"checkpoint_s": c, "checkpoint_each_s": costs, "step_s": t_step,
                           "tau_s": tau, "K": k, "mtbf_s": a.mtbf}, f)
            os.replace(plan_path + ".tmp", plan_path)
        dist.barrier()                              # the plan is on disk before anyone reads it
    with open(plan_path) as f:
        k = json.load(f)["K"]
    while True:
        train_step()
        if step % k == 0:
            save()


def _rmtree(path: str) -> None:
    import shutil
    shutil.rmtree(path, ignore_errors=True)


# -- processes: started with the marker, found and killed by it -----------------------------
def _marked(run: str) -> list[int]:
    """Every live process (not this one) whose environment carries ``MARK=run``."""
    needle = f"{MARK}={run}".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{d}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if needle in env and not zombie:
            out.append(int(d))
    return out


def kill_marked(run: str, popens=()) -> None:
    """SIGKILL every marked process until none is left (torchrun may start a worker while
    we kill: repeat), then reap the ones we started."""
    for _ in range(50):
        pids = _marked(run)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in popens:
            if p.poll() is None:
                try:
                    p.wait(0.05)
                except subprocess.TimeoutExpired:
                    pass
        time.sleep(0.05)
    for p in popens:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass


def _env_of(pid: int) -> dict:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            items = f.read().split(b"\0")
    except OSError:
        return {}
    return dict(i.decode(errors="replace").split("=", 1) for i in items if b"=" in i)


# -- the schedule -----------------------------------------------------------------------------
def schedule(seed: int, mtbf: float, window: float, replicas: int,
             max_failures: int | None = None) -> list[tuple[float, int]]:
    """(seconds into the failure window, victim replica): a Poisson process of mean gap
    ``mtbf``, the victim uniform over the replicas."""
    rng, out, t = random.Random(seed), [], 0.0
    while True:
        t += rng.expovariate(1.0 / mtbf)
        if t >= window or (max_failures is not None and len(out) >= max_failures):
            return out
        out.append((round(t, 3), rng.randrange(replicas)))


# -- reading the logs -------------------------------------------------------------------------
class Logs:
    def __init__(self, workdir: str, replicas: int):
        self.workdir, self.R = workdir, replicas

    def recs(self) -> list[dict]:
        out = []
        for i in range(self.R):
            out += [dict(r, replica=i) for r in E._read(self.workdir, i)]
        return sorted(out, key=lambda r: r["t"])

    def commits(self) -> list[dict]:
        return [r for r in self.recs() if r.get("event") == "attempt" and r["committed"]]


class Progress:
    """The training's progress at time t, from the workers' logs.

    ``step_at(t)``: the step it has reached and keeps. xvendor/torchft: the highest committed
    step (a committed step is never undone: checked, see ``steps_lost``). ckpt: the newest
    step of the incarnation alive at t; from a kill until the restarted incarnation logs,
    the step of the checkpoint it restores.
    ``useful_at(t)``: the kept steps, each weighted by the share of the R replicas that
    trained it (a step committed by 2 of 3 replicas saw 2/3 of the batch); ckpt's steps
    all have R."""

    def __init__(self, way: str, recs: list[dict], kills: list[dict], replicas: int):
        self.way, self.recs, self.R = way, recs, replicas
        self.kills = [k for k in kills if k.get("pid")]
        self.steps = [r for r in recs if r.get("event") in ("attempt", "resume")
                      and r.get("committed", True)]
        self.first: dict[int, dict] = {}           # committed step -> its first record
        if way != "ckpt":
            for r in self.steps:
                self.first.setdefault(r["step"], r)

    def restored(self, kill: dict) -> int:
        later = [r for r in self.recs if r.get("event") == "resume" and r["t"] > kill["t"]]
        if later:
            return later[0]["step"]
        saved = [r for r in self.recs if r.get("event") == "ckpt" and r["t"] <= kill["t"]
                 and r["replica"] == 0]
        return saved[-1]["step"] if saved else 0

    def step_at(self, t: float) -> int:
        if self.way != "ckpt":
            done = [r["step"] for r in self.steps if r["t"] <= t]
            return max(done) if done else 0
        kill = next((k for k in reversed(self.kills) if k["t"] <= t), None)
        alive = [r for r in self.steps if r["t"] <= t
                 and (kill is None or (r["t"] > kill["t"] and r["restart"] > kill["restart"]))]
        if alive:
            return alive[-1]["step"]
        return 0 if kill is None else self.restored(kill)

    def useful_at(self, t: float) -> float:
        if self.way == "ckpt":
            return float(self.step_at(t))
        return sum(r["n"] / self.R for r in self.first.values() if r["t"] <= t)


# -- one way ----------------------------------------------------------------------------------
def _wait(cond, timeout_s: float, what: str, procs) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{what}: a launcher exited: {' '.join(map(str, dead[0]))}")
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(0.01)


def _sleep_until(t: float, procs, what: str) -> None:
    while time.time() < t:
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"{what}: a launcher exited: {' '.join(map(str, dead[0]))}")
        time.sleep(min(0.01, max(0.0, t - time.time())))


def _launch_ckpt(a, workdir: str) -> subprocess.Popen:
    argv = [PY, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(a.replicas), "--max-restarts", str(a.max_restarts),
            "--monitor-interval", "0.1", os.path.abspath(__file__), "--worker", "ckpt",
            "--workdir", workdir, "--width", str(a.width), "--mtbf", str(a.mtbf),
            "--warm", str(a.warm)]
    # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: torch's documented way out of pytorch#135712
    # (open in 2.15 as #167288). By default the workers' env:// init shares torchrun's
    # rendezvous store, and after a restart a rank reads the keys of the round before:
    # gloo's connectFullMesh goes to dead peers ("Connection refused") and the round dies,
    # measured here 17 rounds in a row after one kill. Without it this baseline would
    # measure that bug, not checkpoint-restart.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LOGLEVEL": "WARNING",
           "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    log = open(os.path.join(workdir, "launcher.log"), "w")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _worker_pid(way: str, launchers, victim: int) -> int | None:
    """The live worker process of replica ``victim`` (a child of its torchrun), found from
    the process table: it may be a restarted one still importing torch."""
    for pid in E._process_tree().get(launchers[0 if way == "ckpt" else victim].pid, []):
        env = _env_of(pid)
        if way != "ckpt" or env.get("LOCAL_RANK") == str(victim):
            if "TORCHELASTIC_RESTART_COUNT" in env:
                return pid
    return None


def run_way(way: str, a, sched: list[tuple[float, int]], run: str) -> dict:
    R = a.replicas
    workdir = tempfile.mkdtemp(prefix=f"goodput_{way}_")
    logs = Logs(workdir, R)
    procs: list[subprocess.Popen] = []
    coord = None
    kills: list[dict] = []
    try:
        if way == "ckpt":
            launchers = [_launch_ckpt(a, workdir)]
            procs += launchers
            plan = os.path.join(workdir, "ckpt_plan.json")
            ready = lambda: os.path.exists(plan) and all(  # noqa: E731
                sum(1 for r in E._read(workdir, i) if r.get("event") == "attempt"
                    and r["restart"] == 0) >= 2 * a.warm + 1 for i in range(R))
        else:
            coord = E._Coordinator(way, R, a)
            procs.append(coord.proc)
            wargs = ("--width", str(a.width), "--tf-min-replicas", str(a.tf_min_replicas))
            launchers = [E._launch(way, i, workdir, coord, a.max_restarts, wargs)
                         for i in range(R)]
            procs += launchers
            ready = lambda: all(  # noqa: E731
                sum(1 for c in E._commits(E._read(workdir, i)) if c["n"] == R) >= a.warm
                for i in range(R))
        t_launch = time.time()
        _wait(ready, a.start_timeout, f"{way}: {R} replicas warming up", procs)
        t_start = time.time()
        print(f"  {way}: up and warm after {t_start - t_launch:.1f} s", flush=True)
        t1 = t_start + a.ff_window
        _sleep_until(t1, procs, way)
        for s, victim in sched:
            _sleep_until(t1 + s, procs, way)
            t_k, pid = time.time(), None
            while pid is None and time.time() < t_k + 1.0:
                pid = _worker_pid(way, launchers, victim)
                if pid is None:
                    time.sleep(0.01)
            restart = int(_env_of(pid).get("TORCHELASTIC_RESTART_COUNT", -1)) if pid else -1
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pid = None
            kills.append({"at": s, "victim": victim, "pid": pid, "t": time.time(),
                          "restart": restart})
            print(f"  {way}: t+{s:6.2f} s kill -9 replica {victim} "
                  + (f"(pid {pid})" if pid else "(no live worker: missed)"), flush=True)
        t2 = t1 + a.window
        _sleep_until(t2, procs, way)
        t3 = t4 = t2
        last = kills[-1]["t"] if kills else t1

        def whole():
            if way == "ckpt":
                rs = [r for r in logs.recs() if r.get("event") == "attempt" and r["t"] > last]
                return len({r["replica"] for r in rs}) == R
            return all(any(c["n"] == R and c["t"] > last for c in E._commits(E._read(workdir, i)))
                       for i in range(R))

        if a.ff_after:
            _wait(whole, a.start_timeout, f"{way}: whole again after the failures", procs)
            t3 = time.time()
            t4 = t3 + a.ff_window
            _sleep_until(t4, procs, way)
    finally:
        kill_marked(run, procs)
    recs = logs.recs()
    out = summarize(way, recs, kills, R, t_start, t1, t2, t3, t4)
    out["workdir"] = workdir
    if way == "ckpt":
        with open(os.path.join(workdir, "ckpt_plan.json")) as f:
            out["plan"] = json.load(f)
    return out


def summarize(way, recs, kills, R, t_start, t1, t2, t3, t4) -> dict:
    P = Progress(way, recs, kills, R)

    def rates(at):
        ff = [(at(t1) - at(t_start)) / (t1 - t_start)]
        if t4 > t3:
            ff.append((at(t4) - at(t3)) / (t4 - t3))
        ff_rate = ((at(t1) - at(t_start)) + (at(t4) - at(t3))) / ((t1 - t_start) + (t4 - t3))
        return ff_rate, ff, (at(t2) - at(t1)) / (t2 - t1)

    ff_rate, ff, rate = rates(P.useful_at)
    raw_ff, _, raw = rates(P.step_at)
    out = {"way": way, "ff_rate": ff_rate, "ff_rates": ff, "rate": rate,
           "goodput": rate / ff_rate if ff_rate else float("nan"),
           "steps_fraction": raw / raw_ff if raw_ff else float("nan"),
           "useful_steps": P.useful_at(t2) - P.useful_at(t1),
           "failures": len(kills), "landed": sum(1 for k in kills if k["pid"]),
           "windows": {"start": t_start, "fail_from": t1, "fail_to": t2, "whole": t3,
                       "end": t4}}
    landed = [k for k in kills if k["pid"]]
    recover, whole = [], []
    lost = 0
    for k in landed:
        before = P.step_at(k["t"] - 1e-6)
        if way == "ckpt":
            lost += before - P.restored(k)
            new = [r for r in P.steps if r.get("event") == "attempt" and r["t"] > k["t"]
                   and r["restart"] > k["restart"]]
            back = [r for r in new if r["step"] > before]
            w = new
        else:
            new = [r for r in P.steps if r.get("event") == "attempt" and r["t0"] > k["t"]]
            back = [r for r in new if r["step"] > before]
            w = [r for r in new if r["replica"] == k["victim"] and r["n"] == R
                 and r["restart"] > k["restart"]]
        if back:
            recover.append(back[0]["t"] - k["t"])
        if w:
            whole.append(w[0]["t"] - k["t"])
    if way != "ckpt":
        discarded = 0
        for i in range(R):
            mine = [r for r in recs if r["replica"] == i and r.get("event") == "attempt"]
            for pid in {r["pid"] for r in mine}:
                steps = [r["step"] for r in mine if r["pid"] == pid and r["committed"]]
                lost += sum(abs(b - a - 1) for a, b in zip(steps, steps[1:]))
            discarded += sum(1 for r in mine if not r["committed"] and t1 < r["t"] <= t3)
        out["attempts_discarded"] = discarded
    # A failure-free window in which the job (nearly) stopped is not a failure-free rate:
    # the goodput against it means nothing, and the table says so instead of printing it.
    out["invalid"] = ("stalled in a failure-free window (useful steps/s "
                      + ", ".join(f"{x:.2f}" for x in ff) + ")"
                      if len(ff) > 1 and min(ff) < 0.25 * max(ff) else None)
    out.update(steps_lost=lost, recover_s=recover, whole_s=whole,
               recover_mean_s=statistics.mean(recover) if recover else None,
               whole_mean_s=statistics.mean(whole) if whole else None,
               unrecovered=len(landed) - len(recover))
    return out


# -- the run ----------------------------------------------------------------------------------
def _row(r: dict) -> str:
    lost = (f"{r['steps_lost']} rolled back" if r["way"] == "ckpt" else
            f"{r['steps_lost']} committed / {r['attempts_discarded']} in flight")
    rec = "-" if r["recover_mean_s"] is None else f"{r['recover_mean_s']:.2f} s"
    whole = "-" if r["whole_mean_s"] is None else f"{r['whole_mean_s']:.2f} s"
    ff = ", ".join(f"{x:.2f}" for x in r["ff_rates"])
    good = (f"n/a: {r['invalid']}" if r.get("invalid") else f"**{r['goodput']:.3f}**")
    return (f"| {r['way']} | {r['ff_rate']:.2f} ({ff})"
            f" | {r['rate']:.2f} | {good} | {r['steps_fraction']:.3f} | "
            f"{r['landed']}/{r['failures']} | {lost} | {rec} | {whole} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ways", default=",".join(WAYS), help="comma-separated, of " + ",".join(WAYS))
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--mtbf", type=float, default=30.0,
                   help="mean seconds between failures of the whole job (any worker)")
    p.add_argument("--window", type=float, default=100.0, help="failure window, seconds")
    p.add_argument("--ff-window", type=float, default=12.0,
                   help="each of the two failure-free windows, seconds")
    p.add_argument("--no-ff-after", dest="ff_after", action="store_false",
                   help="no second failure-free window (nor the wait until the job is whole)")
    p.add_argument("--seed", type=int, default=24)
    p.add_argument("--max-failures", type=int, default=None)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--warm", type=int, default=10)
    p.add_argument("--max-restarts", type=int, default=100)
    p.add_argument("--start-timeout", type=float, default=180.0)
    p.add_argument("--tf-heartbeat-ms", type=int, default=1000)
    p.add_argument("--tf-join-ms", type=int, default=1000)
    p.add_argument("--quick", action="store_true",
                   help="2 replicas, MTBF 3 s, a 12 s failure window with one failure, one 4 s "
                        "failure-free window before it (a smoke run: not the comparison)")
    p.add_argument("--json")
    p.add_argument("--worker", choices=("ckpt",), help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        ckpt_worker(a)
        return 0
    if a.quick:
        a.replicas, a.window, a.ff_window, a.max_failures, a.warm = 2, 12.0, 4.0, 1, 3
        a.mtbf, a.ff_after = 3.0, False
    ways = [w.strip() for w in a.ways.split(",") if w.strip()]
    bad = [w for w in ways if w not in WAYS]
    if bad or not ways:
        p.error(f"--ways: {bad or 'nothing'} not among {', '.join(WAYS)}")
    for name in ("mtbf", "window", "ff_window"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(a, name)}")
    if a.replicas < 2:
        p.error(f"--replicas must be >= 2 (one must survive a failure), got {a.replicas}")
    if "torchft" in ways:
        try:
            import torchft  # noqa: F401
        except ImportError:
            p.error("--ways torchft needs torchft 0.2.0: pip install -e '.[bench]'")
    # torchft's quorum needs min_replicas: one fewer than all, so a failure does not stall it
    a.tf_min_replicas = max(1, a.replicas - 1)
    run = os.environ.get(MARK) or uuid.uuid4().hex
    os.environ[MARK] = run               # every process started from here on carries it
    sched = schedule(a.seed, a.mtbf, a.window, a.replicas, a.max_failures)

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    print(f"goodput: {a.replicas} replicas, MLP width {a.width}, MTBF {a.mtbf:g} s, failure "
          f"window {a.window:g} s, failure-free windows 2 x {a.ff_window:g} s, seed {a.seed}")
    print(f"schedule ({len(sched)} failures): "
          + ", ".join(f"t+{s:.2f}s r{v}" for s, v in sched))
    print(f"load average (1 min) before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
          flush=True)
    results = {"args": {k: v for k, v in vars(a).items() if k not in ("worker", "workdir")},
               "schedule": sched, "load_before": os.getloadavg()[0], "ways": {}}
    try:
        for way in ways:
            r = run_way(way, a, sched, run)
            results["ways"][way] = r
            if way == "ckpt":
                pl = r["plan"]
                print(f"  ckpt: checkpoint cost C = {pl['checkpoint_s']:.3f} s (median of 3 "
                      f"DCP saves), step {pl['step_s'] * 1e3:.1f} ms, MTBF {pl['mtbf_s']:g} s "
                      f"-> Young/Daly tau = sqrt(2 C MTBF) = {pl['tau_s']:.2f} s -> checkpoint "
                      f"every K = {pl['K']} steps", flush=True)
            print("  " + _row(r), flush=True)
    finally:
        kill_marked(run)
    results["load_after"] = os.getloadavg()[0]
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.1f}")
    print("| way | failure-free useful steps/s (before, after) | useful steps/s under failures "
          "| goodput | committed steps/s fraction | failures landed | steps lost | mean recover "
          "| mean whole again |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results["ways"].values():
        print(_row(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
