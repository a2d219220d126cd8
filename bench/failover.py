"""A coordinator failure mid-training: replicated on etcd vs the embedded one restarted.

Two replica groups (one process each) train under the step guard (gloo, 127.0.0.1,
``drills.ddp_drill``). In one run:

  replicated  ``xvendor coordinator --store etcd://`` x 2 replicas on one etcd member
              (Debian's etcd-server, loopback, ``--lease-ttl 1``). Each trial: kill -9 of
              the leading replica, then measure
                kill -> standby leads    (the standby's "leading at" log line)
                kill -> next commit      (every worker committed 2 steps past the one it
                                          was in at the kill: the first of them may have
                                          been decided before the kill)
              and restart the killed replica as the new standby.
  restarted   the embedded coordinator (``--store embedded``), killed -9 and started again
              at once on the same ports (a launcher with no restart delay): workers are
              re-admitted, form a fresh epoch 0 and re-sync state (``env.reconnect``).
              kill -> next commit.

Prints each trial, the medians and the ratio restarted / replicated (kill -> next commit).

    python bench/failover.py [--trials 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from xvendor.distributed.etcdstore import LocalEtcd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

TOKEN = "bench-failover-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Coordinator:
    def __init__(self, out: str, name: str, port: int, store_port: int, store: str):
        self.log = os.path.join(out, f"{name}.log")
        self.port = port
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xvendor.cli", "coordinator", "--host", "127.0.0.1",
             "--port", str(port), "--store-port", str(store_port), "--store", store,
             "--lease-ttl", "1", "--name", name, "--min-replicas", "2",
             "--straggler-factor", "0"],
            env=dict(os.environ, XVENDOR_TOKEN=TOKEN), stdout=subprocess.DEVNULL,
            stderr=open(self.log, "a"), start_new_session=True)

    def text(self) -> str:
        return open(self.log).read()

    def wait(self, what: str, count: int = 1, timeout_s: float = 60) -> None:
        end = time.monotonic() + timeout_s
        while self.text().count(what) < count:
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"{self.log}: no {what!r}:\n{self.text()[-2000:]}")
            time.sleep(0.005)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def progress(out: str) -> int:
    vals = []
    for p in glob.glob(os.path.join(out, "progress_*")):
        for _ in range(100):  # the worker rewrites it: an empty read is a torn one
            try:
                text = open(p).read()
            except OSError:
                text = ""
            if text.strip().isdigit():
                vals.append(int(text))
                break
        else:
            vals.append(0)
    return min(vals) if len(vals) == 2 else 0


def wait_progress(out: str, above: int, timeout_s: float = 120) -> float:
    end = time.monotonic() + timeout_s
    while progress(out) <= above:
        if time.monotonic() > end:
            raise TimeoutError(f"no committed step past {above} within {timeout_s} s")
        time.sleep(0.002)
    return time.time()


def workers(out: str, addrs: str) -> list[subprocess.Popen]:
    spec = {"steps": 100000, "max_steps": 100000, "progress": True, "step_sleep": 0.02,
            "out_dir": out, "stack_dump_s": 3600}
    return [subprocess.Popen(
        [sys.executable, "-m", "drills.ddp_drill"],
        env=dict(os.environ, XVENDOR_COORDINATOR=addrs, XVENDOR_TOKEN=TOKEN,
                 XVENDOR_REPLICA_ID=f"r{i}", XV_DRILL=json.dumps(spec), OMP_NUM_THREADS="1"),
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(out, f"w{i}.err"), "w"),
        start_new_session=True) for i in range(2)]


def replicated(trials: int, etcd: LocalEtcd) -> list[dict]:
    out = tempfile.mkdtemp(prefix="xv-failover-etcd-")
    ports = [(free_port(), free_port()) for _ in range(2)]
    reps = [Coordinator(out, f"rep{i}", *ports[i], etcd.url) for i in range(2)]
    reps[0].wait("listening on")
    leader = 0
    reps[1].wait("standby, campaigning")
    procs = workers(out, ",".join(f"127.0.0.1:{p}" for p, _ in ports))
    rows = []
    try:
        wait_progress(out, 20)
        for t in range(trials):
            time.sleep(1.0)
            at = progress(out)
            standby = 1 - leader
            led = reps[standby].text().count(" leading at ")
            t_kill = time.time()
            reps[leader].kill()
            t_commit = wait_progress(out, at + 1)
            reps[standby].wait(" leading at ", led + 1)
            t_lead = float(reps[standby].text().split(" leading at ")[led + 1].split()[0])
            rows.append({"trial": t, "lead_s": t_lead - t_kill, "commit_s": t_commit - t_kill,
                         "step_at_kill": at})
            print(f"  replicated trial {t}: kill -> standby leads {t_lead - t_kill:.3f} s, "
                  f"-> next commit {t_commit - t_kill:.3f} s (step {at})", flush=True)
            n = reps[leader].text().count("standby, campaigning")  # the log is appended
            reps[leader] = Coordinator(out, f"rep{leader}", *ports[leader], etcd.url)
            reps[leader].wait("standby, campaigning", n + 1)
            leader = standby
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
        for r in reps:
            if r.proc.poll() is None:
                r.kill()
    return rows


def restarted(trials: int) -> list[dict]:
    out = tempfile.mkdtemp(prefix="xv-failover-embedded-")
    port, store_port = free_port(), free_port()
    c = Coordinator(out, "embedded", port, store_port, "embedded")
    c.wait("listening on")
    procs = workers(out, f"127.0.0.1:{port}")
    rows = []
    try:
        wait_progress(out, 20)
        for t in range(trials):
            time.sleep(1.0)
            at = progress(out)
            n = c.text().count("listening on")  # the log is appended
            t_kill = time.time()
            c.kill()
            c = Coordinator(out, "embedded", port, store_port, "embedded")
            c.wait("listening on", n + 1)
            t_up = time.time()
            t_commit = wait_progress(out, at + 1)
            rows.append({"trial": t, "commit_s": t_commit - t_kill, "up_s": t_up - t_kill,
                         "step_at_kill": at})
            print(f"  restarted trial {t}: kill -> new coordinator listening "
                  f"{t_up - t_kill:.3f} s, -> next commit {t_commit - t_kill:.3f} s "
                  f"(step {at})", flush=True)
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
        if c.proc.poll() is None:
            c.kill()
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1/5 min)", flush=True)
    with LocalEtcd() as etcd:
        rep = replicated(args.trials, etcd)
    emb = restarted(args.trials)
    med = {k: statistics.median(r[k] for r in rows) for k, rows in
           (("lead_s", rep), ("commit_s", rep))}
    emb_commit = statistics.median(r["commit_s"] for r in emb)
    print(f"replicated (etcd, 2 replicas): kill -> standby leads median {med['lead_s']:.3f} s "
          f"(max {max(r['lead_s'] for r in rep):.3f}); kill -> next commit median "
          f"{med['commit_s']:.3f} s (max {max(r['commit_s'] for r in rep):.3f})")
    print(f"embedded, restarted at once: kill -> next commit median {emb_commit:.3f} s "
          f"(max {max(r['commit_s'] for r in emb):.3f})")
    print(f"ratio restarted / replicated (kill -> next commit): "
          f"{emb_commit / med['commit_s']:.2f}x")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1/5 min)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"replicated": rep, "restarted": emb}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
