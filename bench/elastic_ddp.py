"""The elastic DDP drill, run with xvendor and with torchft 0.2.0 in one run (gloo, 127.0.0.1).

Both systems get the same drill: R replica groups (one process each: pure DDP), each launched
by its own ``torchrun --standalone --max-restarts 1``, a coordinator outside all of them
(xvendor: ``xvendor coordinator``; torchft: its Rust lighthouse), the same model, data and a
fixed 20 ms of "compute" per step. Once every replica has committed ``--warm`` steps, one
worker is killed with SIGKILL; its torchrun restarts it and it rejoins. Measured:

  first commit   kill -> the slowest survivor's first committed step among the steps begun
                 after the kill (a step in flight at the kill may still commit in both
                 systems, with the victim's gradient; it does not count);
  lost           committed steps lost (a survivor's committed-step counter that goes back or
                 skips) - must be 0; beside it the attempts discarded after the kill;
  rejoin         kill -> the restarted replica's first committed step with all R replicas;
                 "after up" counts from the restarted worker's first line after its imports
                 (torchrun's restart and the Python + torch import are the rest).

At the end every replica stops at the same committed step and reports a hash of its
parameters: the hashes must be identical (checked, the run fails otherwise). The ratio printed
is torchft's first commit / xvendor's (the issue's target: >= 3).

    python bench/elastic_ddp.py [--replicas 3] [--rounds 3] [--systems xvendor,torchft]
                                [--json out.json]

Settings that decide the numbers (stated so the comparison can be judged): torchft's
lighthouse declares a replica dead after ``--tf-heartbeat-ms`` (1000 ms, its default is 5000)
without heartbeats and its manager heartbeats every 100 ms (default); its collectives time
out after 10 s (default 60). xvendor's coordinator holds one TCP connection per worker and
sees a kill as a closed socket; its waits are sliced. torchft 0.2.0's DDP comm hook crashes
every survivor when an all-reduce fails mid-step (NOTE [torchft 0.2.0 DDP hook]): the drill
uses torchft's DDP with that one hook fixed. Rounds interleave the systems so both see the
same load drift; the medians are compared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
COMPUTE_S = 0.02  # the same fixed "compute" per step for both systems


# -- what runs inside each worker (under torchrun) -----------------------------------------
def _model(width: int = 0):
    """The drill's small MLP; ``width`` > 0 (bench/goodput.py) adds a ``width`` x ``width``
    hidden layer: 4.4 MB of fp32 parameters at 1024."""
    import torch
    torch.manual_seed(0)
    if not width:
        return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                   torch.nn.Linear(128, 8))
    return torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 8))


def _batch(replica: int, step: int):
    import torch
    g = torch.Generator().manual_seed(1000 * step + replica)
    return torch.randn(16, 64, generator=g), torch.randn(16, 8, generator=g)


def _param_hash(model) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


class _Log:
    """One JSON line per step attempt, flushed at once (the parent reads it while we run)."""

    def __init__(self, workdir: str, replica: int):
        self.workdir = workdir
        self.f = open(os.path.join(workdir, f"r{replica}.jsonl"), "a", buffering=1)
        self.restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    def write(self, **rec) -> None:
        rec.update(pid=os.getpid(), restart=self.restart, t=time.time())
        self.f.write(json.dumps(rec) + "\n")

    def stop_at(self) -> int | None:
        path = os.path.join(self.workdir, "stop")
        if os.path.exists(path):
            with open(path) as f:
                return int(f.read().strip() or 0) or None
        return None


def _torchft_ddp_class():
    """torchft's DDP with its comm hook fixed for a failure inside the all-reduce.

    NOTE [torchft 0.2.0 DDP hook]: when the bucket's all-reduce fails (a peer was killed),
    ``_ManagedWork.wait()`` latches the error but never sets the future chain, and torchft's
    hook then fails ``assert fut._fut`` inside autograd: every survivor crashes, its torchrun
    restarts it, and the job starts over from step 0 (seen here on the first run of this
    drill). The fix keeps torchft's design: on a failed wait the hook returns the local
    bucket, and the latched error makes ``should_commit()`` false, so the step is dropped.
    """
    import torch
    from torchft import DistributedDataParallel

    class TorchftDDP(DistributedDataParallel):
        @staticmethod
        def _comm_hook(state, bucket):
            work = state.allreduce(bucket.buffer())
            if work.wait():
                return work.get_future()._fut
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut

    return TorchftDDP


def torchft_worker(a) -> None:
    from datetime import timedelta

    import torch
    from torchft import Manager, ProcessGroupGloo
    from torchft.optim import OptimizerWrapper

    _TorchftDDP = _torchft_ddp_class()
    log = _Log(a.workdir, a.replica)
    log.write(event="up")
    model = _model(a.width)
    opt_inner = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=10)), min_replica_size=a.tf_min_replicas,
        load_state_dict=lambda s: (model.load_state_dict(s["model"]),
                                   opt_inner.load_state_dict(s["optim"])),
        state_dict=lambda: {"model": model.state_dict(), "optim": opt_inner.state_dict()},
        replica_id=f"replica_{a.replica}", lighthouse_addr=a.coordinator,
        timeout=timedelta(seconds=10), quorum_timeout=timedelta(seconds=30))
    ddp = _TorchftDDP(manager, model)
    opt = OptimizerWrapper(manager, opt_inner)
    while True:
        stop = log.stop_at()
        if stop is not None and manager.current_step() >= stop:
            break
        before, t0 = manager.current_step(), time.time()
        opt.zero_grad()                                # starts the quorum for this step
        x, y = _batch(a.replica, before)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        time.sleep(COMPUTE_S)
        opt.step()                                     # commits only if every replica succeeded
        log.write(event="attempt", step=manager.current_step(),
                  committed=manager.current_step() > before, n=manager.num_participants(), t0=t0)
    log.write(event="done", step=manager.current_step(), hash=_param_hash(model))
    manager.shutdown(wait=False)


def xvendor_worker(a) -> None:
    import torch
    import xvendor.distributed as xd

    log = _Log(a.workdir, a.replica)
    log.write(event="up")
    model = _model(a.width)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def get_state():
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    def set_state(s):
        model.load_state_dict(s["model"])
        opt.load_state_dict(s["optim"])

    rg = xd.ResilientGroup.from_env(get_state=get_state, set_state=set_state, model=model)
    log.write(event="admitted", stats={k: v for k, v in rg.stats.items()  # where a rejoin goes
                                       if k in ("admitted_s", "recoveries")})
    ddp = xd.resilient_ddp(model, rg)
    while True:
        stop = log.stop_at()
        if stop is not None and rg.step >= stop:
            break
        before, t0 = int(rg.step), time.time()
        with rg.step(opt) as guard:                    # steps the optimizer only if all succeeded
            opt.zero_grad()
            x, y = _batch(a.replica, before)
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            time.sleep(COMPUTE_S)
        log.write(event="attempt", step=int(rg.step), committed=bool(guard.committed),
                  n=rg.size, t0=t0)
    log.write(event="done", step=int(rg.step), hash=_param_hash(model))
    rg.close()


# -- the drill (parent process) ------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(workdir: str, replica: int) -> list[dict]:
    path = os.path.join(workdir, f"r{replica}.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def _wait(cond, timeout_s: float, what: str, procs) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        dead = [p.args for p in procs if p.poll() not in (None, 0)]
        if dead:
            raise RuntimeError(f"{what}: a launcher exited with an error: {dead[0]}")
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(0.01)


class _Coordinator:
    """Starts the system's coordinator as its own process; ``env`` is what workers need."""

    def __init__(self, system: str, replicas: int, a):
        port = _free_port()
        if system == "torchft":
            argv = [os.path.join(os.path.dirname(PY), "torchft_lighthouse"),
                    "--bind", f"127.0.0.1:{port}",
                    "--min_replicas", str(getattr(a, "tf_min_replicas", 2)),
                    "--join_timeout_ms", str(a.tf_join_ms),
                    "--heartbeat_timeout_ms", str(a.tf_heartbeat_ms), "--quorum_tick_ms", "20"]
            self.address = f"http://127.0.0.1:{port}"
            self.env = {"TORCHFT_LIGHTHOUSE": self.address}
        else:
            token = hashlib.sha256(os.urandom(16)).hexdigest()
            argv = [PY, "-m", "xvendor.cli", "coordinator", "--host", "127.0.0.1",
                    "--port", str(port), "--store-port", str(_free_port()),
                    "--min-replicas", str(replicas), "--join-timeout", "60"]
            self.address = f"127.0.0.1:{port}"
            self.env = {"XVENDOR_COORDINATOR": self.address, "XVENDOR_TOKEN": token}
        self.proc = subprocess.Popen(argv, env={**os.environ, **self.env},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        _wait_port("127.0.0.1", port, 60)

    def close(self) -> None:
        _kill_group(self.proc)


def _wait_port(host: str, port: int, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"coordinator on {host}:{port} not listening after {timeout_s} s")


def _process_tree() -> dict[int, list[int]]:
    """parent pid -> its live children's pids, read from /proc."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    return children


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (torchrun starts each worker in a session of its
    own, so killing torchrun's process group alone would leave the workers running)."""
    children = _process_tree()
    out, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _kill_group(p: subprocess.Popen) -> None:
    for pid in [p.pid] + _descendants(p.pid):  # the whole tree, then each one's group
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    p.wait()


def _launch(system: str, replica: int, workdir: str, coord: _Coordinator,
            max_restarts: int = 1, worker_args: tuple[str, ...] = ()) -> subprocess.Popen:
    argv = [PY, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", "1", "--max-restarts", str(max_restarts),
            "--monitor-interval", "0.1",
            os.path.abspath(__file__), "--worker", system, "--replica", str(replica),
            "--workdir", workdir, "--coordinator", coord.address, *worker_args]
    env = {**os.environ, **coord.env, "XVENDOR_REPLICA_ID": str(replica),
           "OMP_NUM_THREADS": "1", "LOGLEVEL": "WARNING"}
    log = open(os.path.join(workdir, f"launcher{replica}.log"), "w")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _commits(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r.get("event") == "attempt" and r["committed"]]


def drill(system: str, a) -> dict:
    R = a.replicas
    workdir = tempfile.mkdtemp(prefix=f"elastic_{system}_")
    coord = _Coordinator(system, R, a)
    procs = [_launch(system, i, workdir, coord) for i in range(R)]
    try:
        warm = lambda: all(len([c for c in _commits(_read(workdir, i)) if c["n"] == R]) >= a.warm
                           for i in range(R))
        _wait(warm, 180, f"{system}: {R} replicas warming up", procs)
        victim = 1
        pid = _read(workdir, victim)[-1]["pid"]
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        survivors = [i for i in range(R) if i != victim]

        def after(i):  # committed steps that began after the kill (none was in flight at it)
            return [c for c in _commits(_read(workdir, i)) if c["t0"] > t_kill]

        _wait(lambda: all(after(i) for i in survivors), 120, f"{system}: survivors commit", procs)
        first = max(after(i)[0]["t"] for i in survivors) - t_kill
        back = lambda: [c for c in after(victim) if c["restart"] >= 1 and c["n"] == R]
        _wait(back, 180, f"{system}: restarted replica rejoins", procs)
        rejoin = back()[0]["t"] - t_kill
        up = next(r for r in _read(workdir, victim) if r.get("event") == "up" and r["restart"] >= 1)
        admit = back()[0]["t"] - up["t"]
        top = max(c["step"] for i in range(R) for c in _commits(_read(workdir, i)))
        with open(os.path.join(workdir, "stop"), "w") as f:
            f.write(str(top + 5))
        done = lambda: all(any(r.get("event") == "done" for r in _read(workdir, i))
                           for i in range(R))
        _wait(done, 120, f"{system}: every replica reaches the stop step", procs)
        return {**_summarize(system, workdir, survivors, t_kill, first, rejoin),
                "admit_s": round(admit, 3)}
    finally:
        for p in procs:
            _kill_group(p)
        coord.close()


def _summarize(system, workdir, survivors, t_kill, first, rejoin) -> dict:
    lost, discarded = 0, 0
    for i in survivors:
        recs = [r for r in _read(workdir, i) if r.get("event") == "attempt"]
        steps = [c["step"] for c in _commits(recs)]
        # committed steps count up by exactly one; a skip or a step back is a lost step
        lost += sum(abs(b - a - 1) for a, b in zip(steps, steps[1:]))
        discarded += sum(1 for r in recs if r["t"] > t_kill and not r["committed"])
    dones = [next(r for r in _read(workdir, i) if r.get("event") == "done")
             for i in range(len(survivors) + 1)]
    hashes = {d["hash"] for d in dones}
    if len(hashes) != 1 or len({d["step"] for d in dones}) != 1:
        raise AssertionError(f"{system}: replicas disagree at the end: {dones}")
    return {"system": system, "first_commit_s": round(first, 3), "rejoin_s": round(rejoin, 3),
            "committed_steps_lost": lost, "attempts_discarded": discarded,
            "final_step": dones[0]["step"], "param_hash": dones[0]["hash"], "workdir": workdir}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3, help="drills per system (medians reported)")
    p.add_argument("--warm", type=int, default=15,
                   help="steps every replica commits before the kill")
    p.add_argument("--systems", default="xvendor,torchft")
    p.add_argument("--tf-heartbeat-ms", type=int, default=1000)
    p.add_argument("--tf-join-ms", type=int, default=1000)
    p.add_argument("--json")
    # worker side (run by torchrun)
    p.add_argument("--worker", choices=("torchft", "xvendor"))
    p.add_argument("--replica", type=int)
    p.add_argument("--workdir")
    p.add_argument("--coordinator")
    p.add_argument("--width", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--tf-min-replicas", type=int, default=2, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        (torchft_worker if a.worker == "torchft" else xvendor_worker)(a)
        return 0
    systems = a.systems.split(",")
    results: dict = {"load_average_1min_before": os.getloadavg()[0], "rounds": a.rounds,
                     "runs": {s: [] for s in systems}}
    print(f"load average (1 min) before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for rnd in range(a.rounds):          # systems interleaved: both see the same load drift
        for system in systems:
            r = drill(system, a)
            results["runs"][system].append(r)
            print(f"round {rnd + 1} {system:8s} first commit after kill {r['first_commit_s']:.3f} s"
                  f" | rejoin {r['rejoin_s']:.3f} s (after up {r['admit_s']:.3f} s) | lost "
                  f"{r['committed_steps_lost']} | attempts discarded {r['attempts_discarded']} | "
                  f"final step {r['final_step']}, identical parameters", flush=True)
    summary = results["summary"] = {}
    for system, runs in results["runs"].items():
        summary[system] = {k: statistics.median(r[k] for r in runs)
                           for k in ("first_commit_s", "rejoin_s", "admit_s")}
        summary[system]["committed_steps_lost_max"] = max(r["committed_steps_lost"] for r in runs)
        print(f"median {system:8s} first commit {summary[system]['first_commit_s']:.3f} s | "
              f"rejoin {summary[system]['rejoin_s']:.3f} s (after up "
              f"{summary[system]['admit_s']:.3f} s) | committed steps lost (max) "
              f"{summary[system]['committed_steps_lost_max']}")
    if {"torchft", "xvendor"} <= summary.keys():
        ratio = summary["torchft"]["first_commit_s"] / summary["xvendor"]["first_commit_s"]
        summary["ratio_first_commit"] = round(ratio, 2)
        print(f"first commit after kill (medians): xvendor is {ratio:.1f}x sooner than torchft "
              f"(target >= 3x)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
