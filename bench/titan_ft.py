"""The torchft-API fault-tolerance drill on ``xvendor.ft`` and on torchft 0.2.0, in one run.

The worker is torchft's own usage pattern (``Manager``, ``DistributedDataParallel``,
``OptimizerWrapper``; ``opt.zero_grad()`` starts the quorum, ``opt.step()`` commits), written
once: the xvendor variant changes only the import (``import xvendor.ft as torchft``) and is
found by xvendor's coordinator instead of torchft's lighthouse. Everything else (R replica
groups each under its own ``torchrun --max-restarts 1``, the model, data, 20 ms of compute
per step, a SIGKILL of one worker after ``--warm`` steps, torchrun's restart and rejoin,
identical parameter hashes at the end, the measurements) is ``bench/elastic_ddp.py``'s
drill, reused as is: see its docstring for what "first commit", "lost" and "rejoin" mean.
torchft runs with that bench's one fix to its 0.2.0 DDP comm hook.

NOTE: this is the drill on torchft's API, not yet on torchtitan's fault-tolerant trainer
(docs/torchtitan.md says what that needs).

    python bench/titan_ft.py [--replicas 3] [--rounds 3] [--systems xvendor_ft,torchft]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import elastic_ddp as drill_lib  # noqa: E402  (the drill, its coordinators and its logs)


def torchft_api_worker(a, ft_module: str) -> None:
    import importlib

    import torch
    torchft = importlib.import_module(ft_module)
    if ft_module == "torchft":
        from torchft import ProcessGroupGloo
        from torchft.optim import OptimizerWrapper
        DDP = drill_lib._torchft_ddp_class()
    else:
        from xvendor.ft import ProcessGroupGloo
        from xvendor.ft.optim import OptimizerWrapper
        DDP = torchft.DistributedDataParallel
    log = drill_lib._Log(a.workdir, a.replica)
    log.write(event="up")
    model = drill_lib._model()
    inner = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    manager = torchft.Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=10)), min_replica_size=2,
        load_state_dict=lambda s: (model.load_state_dict(s["model"]),
                                   inner.load_state_dict(s["optim"])),
        state_dict=lambda: {"model": model.state_dict(), "optim": inner.state_dict()},
        replica_id=f"replica_{a.replica}", lighthouse_addr=a.coordinator,
        timeout=timedelta(seconds=10), quorum_timeout=timedelta(seconds=30))
    ddp = DDP(manager, model)
    opt = OptimizerWrapper(manager, inner)
    while True:
        stop = log.stop_at()
        if stop is not None and manager.current_step() >= stop:
            break
        before, t0 = manager.current_step(), time.time()
        opt.zero_grad()
        x, y = drill_lib._batch(a.replica, before)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        time.sleep(drill_lib.COMPUTE_S)
        opt.step()
        log.write(event="attempt", step=manager.current_step(),
                  committed=manager.current_step() > before, n=manager.num_participants(), t0=t0)
    log.write(event="done", step=manager.current_step(), hash=drill_lib._param_hash(model))
    manager.shutdown(wait=False)


def _launch(system, replica, workdir, coord):
    argv = [drill_lib.PY, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", "1", "--max-restarts", "1", "--monitor-interval", "0.1",
            os.path.abspath(__file__), "--worker", system, "--replica", str(replica),
            "--workdir", workdir, "--coordinator", coord.address]
    env = {**os.environ, **coord.env, "XVENDOR_REPLICA_ID": str(replica),
           "OMP_NUM_THREADS": "1", "LOGLEVEL": "WARNING"}
    log = open(os.path.join(workdir, f"launcher{replica}.log"), "w")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker" in argv:
        i = argv.index("--worker")
        system = argv[i + 1]
        args = dict(zip(argv[::2], argv[1::2]))
        a = type("A", (), {"workdir": args["--workdir"], "replica": int(args["--replica"]),
                           "coordinator": args["--coordinator"]})
        torchft_api_worker(a, "torchft" if system == "torchft" else "xvendor.ft")
        return 0
    drill_lib._launch = _launch  # the same drill, these workers
    if "--systems" not in argv:
        argv += ["--systems", "xvendor_ft,torchft"]
    return _report(argv)


def _report(argv) -> int:
    # elastic_ddp's main runs the rounds and prints per-round and median lines; its worker
    # choices do not include ours, so the parser only sees the parent-side options here.
    import json
    import statistics
    import argparse
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warm", type=int, default=15)
    p.add_argument("--systems", default="xvendor_ft,torchft")
    p.add_argument("--tf-heartbeat-ms", type=int, default=1000)
    p.add_argument("--tf-join-ms", type=int, default=1000)
    p.add_argument("--json")
    a = p.parse_args(argv)
    systems = a.systems.split(",")
    runs: dict = {s: [] for s in systems}
    print(f"load average (1 min) before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for rnd in range(a.rounds):
        for system in systems:
            r = drill_lib.drill(system, a)
            runs[system].append(r)
            print(f"round {rnd + 1} {system:10s} first commit after kill {r['first_commit_s']:.3f}"
                  f" s | rejoin {r['rejoin_s']:.3f} s | lost {r['committed_steps_lost']} | "
                  f"final step {r['final_step']}, identical parameters", flush=True)
    med = {s: statistics.median(r["first_commit_s"] for r in rs) for s, rs in runs.items()}
    for s, rs in runs.items():
        print(f"median {s:10s} first commit {med[s]:.3f} s | rejoin "
              f"{statistics.median(r['rejoin_s'] for r in rs):.3f} s | committed steps lost "
              f"(max) {max(r['committed_steps_lost'] for r in rs)}")
    if {"torchft", "xvendor_ft"} <= med.keys():
        print(f"first commit after kill (medians): xvendor.ft is "
              f"{med['torchft'] / med['xvendor_ft']:.1f}x sooner than torchft (target >= 3x)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "median_first_commit_s": med}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
