"""Recovery times of resilient process groups (gloo, 127.0.0.1), at 4, 8, 16 and 32 ranks.

For each size, in one run:
  shrink   SIGKILL one worker -> every survivor has completed its first all_reduce on the
           shrunk group (the slowest survivor counts);
  grow     start a newcomer -> every member has completed its first all_reduce on the grown
           group; also from the newcomer's process up (its first line of Python);
  restart  SIGKILL every worker -> fresh interpreters (python + torch import), a fresh store,
           group init, checkpoint load -> all have completed a first all_reduce.
and prints the ratios shrink/restart and grow/restart. Workers run ``drill.pulse``; state is
a 1 MiB tensor (synced to every member on each change, as in training).

    python bench/recovery.py [--sizes 4,8,16,32] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the drills (outside the package), here and in started processes
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
from drills import drill  # noqa: E402  (the repository's drills: outside the package)
from xvendor.distributed import Agent, Timing  # noqa: E402

TIMING = Timing(hb_timeout_s=3.0)


def _wait_keys(agent: Agent, keys: list[str], timeout_s: float) -> list[float]:
    end = time.monotonic() + timeout_s
    while not agent.store.check(keys):
        if time.monotonic() > end:
            missing = [k for k in keys if not agent.store.check([k])]
            raise TimeoutError(f"no {missing} within {timeout_s} s")
        time.sleep(0.002)
    return [float(agent.store.get(k)) for k in keys]


def measure(n: int, workdir: str) -> dict:
    out: dict = {"ranks": n}
    with Agent(TIMING, preload=(drill.__name__,)) as agent:
        ids = agent.found(n, drill.pulse)
        _wait_keys(agent, [f"xv/bench/ok/0/{m}" for m in ids], 120)
        time.sleep(0.5)
        victim = ids[n // 2]
        t_kill = time.time()
        os.kill(agent.pid(victim), signal.SIGKILL)
        survivors = [m for m in ids if m != victim]
        ok = _wait_keys(agent, [f"xv/bench/ok/1/{m}" for m in survivors], 60)
        out["shrink_s"] = max(ok) - t_kill
        out["shrink_epoch"] = agent.record(1)["why"]
        time.sleep(0.5)
        t_start = time.time()
        new = agent.newcomer(drill.pulse)
        members = survivors + [new]
        ok = _wait_keys(agent, [f"xv/bench/ok/2/{m}" for m in members], 60)
        (t_up,) = _wait_keys(agent, [f"xv/bench/up/{new}"], 10)
        out["grow_from_start_s"] = max(ok) - t_start
        out["grow_from_up_s"] = max(ok) - t_up
        out["epochs"] = agent.latest_epoch()
        ckpt = os.path.join(workdir, f"ckpt{n}.pt")
        torch.save({"w": torch.zeros(1 << 18)}, ckpt)
        t_all = time.time()
        for m in members:
            os.kill(agent.pid(m), signal.SIGKILL)
    # Full restart: fresh interpreters under a fresh agent and store, then init + state load.
    with Agent(TIMING) as agent:
        env = {"XV_BENCH": json.dumps({"ckpt": ckpt})}
        ids = agent.found_commands(n, [sys.executable, "-m", "drills.drill"], env)
        ok = _wait_keys(agent, [f"xv/bench/ok/0/{m}" for m in ids], 600)
        out["restart_s"] = max(ok) - t_all
        agent.store.set("xv/bench/stop", "1")
        agent.wait(30)
    out["shrink_vs_restart"] = out["shrink_s"] / out["restart_s"]
    out["grow_vs_restart"] = out["grow_from_start_s"] / out["restart_s"]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4,8,16,32")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in (int(s) for s in args.sizes.split(",")):
            rows.append(measure(n, d))
            r = rows[-1]
            print(f"{n:3d} ranks: shrink {r['shrink_s']:.3f} s | grow {r['grow_from_start_s']:.3f} s "
                  f"from start, {r['grow_from_up_s']:.3f} s from process up | full restart "
                  f"{r['restart_s']:.2f} s | shrink/restart {r['shrink_vs_restart']:.2%}, "
                  f"grow/restart {r['grow_vs_restart']:.2%}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"timing": TIMING.as_dict(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
