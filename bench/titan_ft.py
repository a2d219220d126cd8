"""torchtitan's own fault-tolerant trainer, the FT drill on xvendor.ft and on torchft 0.2.0, in
one run (gloo, 127.0.0.1).

Each replica group is torchtitan 0.3.0's ``FaultTolerantTrainer`` (``--module torchft.llama3
--config llama3_torchft_debugmodel``: torchtitan's FT debug config, with the sizes of a CPU
run: seq_len 128, local batch 2, synchronous FT (``--fault-tolerance.semi-sync-method
None``, FSDP2's all-reduce hook on torchft's ``ManagedProcessGroup``), gloo, in-memory state
transfer through ``--checkpoint.enable``), one process under its own ``torchrun
--max-restarts 1``, started by the CPU launcher ``python -m xvendor.integrations.torchtitan.run``
with ``--xvendor-ft`` (``import torchft`` resolves to ``xvendor.ft``, found by xvendor's
coordinator) or ``--torchft`` (torchft itself, its Rust lighthouse). Nothing else differs.

The drill is ``bench/elastic_ddp.py``'s, reused as is, with 2 replica groups by default and
torchft's lighthouse at ``--min_replicas`` R - 1 (elastic_ddp's 2 would make the survivor of
2 wait for the restarted group). With 3 replica groups torchft 0.2.0 never had all 3
participating here (bench/RESULTS.md) (see its docstring for "first commit",
"lost", "rejoin"): once every replica committed ``--warm`` steps with all R present, one worker
is killed with SIGKILL; survivors go on, its torchrun restarts it, it rejoins (state transfer:
model, optimizer, LR scheduler, train state). The per-attempt records come from
``xvendor.integrations.torchtitan.ft``'s probe (``XVENDOR_TITAN_FT_LOG``), the same for both
systems; at the stop step every replica reports a hash of its parameters (must be
identical), its optimizer's step count and its trainer step, checked here: the optimizer's
step count equals the committed step + 1 on every replica (+ 1: the zero-lr step torchtitan's
FT optimizer container takes at build; so no committed step lost, none applied twice) and
the trainer steps agree.

    python bench/titan_ft.py [--replicas 2] [--rounds 3] [--warm 5] [--systems xvendor,torchft]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import elastic_ddp as drill_lib  # noqa: E402  (the drill, its coordinators and its logs)

_assets: dict = {}
_replicas = 2


def _launch(system, replica, workdir, coord):
    from xvendor.integrations.torchtitan import assets, ft
    if "root" not in _assets:
        _assets["root"] = str(assets.make_assets(tempfile.mkdtemp(prefix="titan_assets_")))
    argv = [drill_lib.PY, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", "1", "--max-restarts", "1", "--monitor-interval", "0.1",
            "-m", "xvendor.integrations.torchtitan.run",
            *ft.drill_argv(system, replica, _replicas, os.path.join(workdir, f"out{replica}"))]
    env = {**os.environ, **coord.env, "XVENDOR_REPLICA_ID": str(replica),
           "XVENDOR_TITAN_FT_LOG": workdir, "OMP_NUM_THREADS": "1", "LOGLEVEL": "WARNING",
           "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE),
                                          os.environ.get("PYTHONPATH", "")])}
    log = open(os.path.join(workdir, f"launcher{replica}.log"), "w")
    return subprocess.Popen(argv, env=env, cwd=_assets["root"], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _abort_s(workdir, survivors, t_kill) -> float | None:
    """kill -> the end of the survivors' last step attempt that the failure dropped (the
    slowest survivor): how long the failure took to be noticed and the step given up, before
    the next step's compute (a torchtitan step is ~1-2 s here) and commit."""
    ends = []
    for i in survivors:
        dropped = [r for r in drill_lib._read(workdir, i) if r.get("event") == "attempt"
                   and r["t"] > t_kill and not r["committed"]]
        if dropped:
            ends.append(dropped[0]["t"] - t_kill)
    return round(max(ends), 3) if ends else None


def _without_victim_s(workdir, survivors, t_kill) -> float | None:
    """kill -> the slowest survivor's first committed step without the victim (``n`` =
    R - 1), begun before the kill or after it: when the survivors made progress again.
    elastic_ddp's "first commit" counts only steps begun after the kill (a step in flight
    may commit with the victim's gradient); a step in flight that commits with R - 1
    participants is one the failure did not cost, and this counts it, for both systems."""
    firsts = []
    for i in survivors:
        c = [r for r in drill_lib._commits(drill_lib._read(workdir, i))
             if r["t"] > t_kill and r["n"] == _replicas - 1]
        if not c:
            return None
        firsts.append(c[0]["t"] - t_kill)
    return round(max(firsts), 3)


def _phases(workdir, survivors, t_kill) -> str:
    """xvendor.ft's timeline of the survivors' first attempt that ended after the kill:
    each event's time after the kill (where the time went)."""
    out = []
    for i in survivors:
        recs = [r for r in drill_lib._read(workdir, i) if r.get("event") == "attempt"
                and r["t"] > t_kill and r.get("timeline")]
        if recs:
            ev = " ".join(f"{name}@{t - t_kill:+.2f}" for name, t in recs[0]["timeline"])
            ep = recs[0].get("epochs") or [{}]
            out.append(f"r{i}: {ev} (last epoch formed: ready {ep[-1].get('ready_s')} s, "
                       f"build {ep[-1].get('build_s')} s, state {ep[-1].get('sync_s')} s to "
                       f"{ep[-1].get('state_to')})")
    return "; ".join(out)


def _summarize(system, workdir, survivors, t_kill, first, rejoin) -> dict:
    """elastic_ddp's summary, with disagreeing replicas recorded (``identical``) instead of
    raised: torchft's replicas end this drill with different parameters (bench/RESULTS.md),
    and its timings are still worth printing beside it."""
    abort = {"abort_s": _abort_s(workdir, survivors, t_kill),
             "without_victim_s": _without_victim_s(workdir, survivors, t_kill),
             "phases": _phases(workdir, survivors, t_kill)}
    try:
        return {**_summarize_strict(system, workdir, survivors, t_kill, first, rejoin),
                "identical": True, **abort}
    except AssertionError as e:
        print(f"  {system}: {e}", flush=True)
        dones = [next(r for r in drill_lib._read(workdir, i) if r.get("event") == "done")
                 for i in range(len(survivors) + 1)]
        recs = [r for r in drill_lib._read(workdir, survivors[0]) if r.get("event") == "attempt"]
        steps = [c["step"] for c in drill_lib._commits(recs)]
        return {"system": system, "first_commit_s": round(first, 3),
                "rejoin_s": round(rejoin, 3),
                "committed_steps_lost": sum(abs(b - a - 1) for a, b in zip(steps, steps[1:])),
                "attempts_discarded": sum(1 for r in recs if r["t"] > t_kill
                                          and not r["committed"]),
                "final_step": dones[0]["step"], "identical": False,
                "param_hashes": [d["hash"] for d in dones], "workdir": workdir, **abort}


_summarize_strict = drill_lib._summarize


class _Coordinator(drill_lib._Coordinator):
    """elastic_ddp's coordinators; torchft's lighthouse with ``--min_replicas`` from
    ``--tf-min-replicas`` (elastic_ddp fixes 2: with 2 replica groups the survivor of a kill
    could then only commit again once the restarted group is back)."""

    def __init__(self, system, replicas, a):
        if system != "torchft":
            return super().__init__(system, replicas, a)
        port = drill_lib._free_port()
        argv = [os.path.join(os.path.dirname(drill_lib.PY), "torchft_lighthouse"),
                "--bind", f"127.0.0.1:{port}", "--min_replicas", str(a.tf_min_replicas),
                "--join_timeout_ms", str(a.tf_join_ms),
                "--heartbeat_timeout_ms", str(a.tf_heartbeat_ms), "--quorum_tick_ms", "20"]
        self.address = f"http://127.0.0.1:{port}"
        self.env = {"TORCHFT_LIGHTHOUSE": self.address}
        self.proc = subprocess.Popen(argv, env={**os.environ, **self.env},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        drill_lib._wait_port("127.0.0.1", port, 60)


def _check_counters(system: str, workdir: str, replicas: int) -> dict:
    dones = [next(r for r in drill_lib._read(workdir, i) if r.get("event") == "done")
             for i in range(replicas)]
    for d in dones:  # + 1: torchtitan's FT optimizer container materializes the optimizer
        # state with one zero-lr step at build (init_optim_state), counted by AdamW
        if d["optimizer_steps"] != d["step"] + 1:
            raise AssertionError(f"{system}: optimizer stepped {d['optimizer_steps']} times for "
                                 f"{d['step']} committed steps: {dones}")
    if len({d["trainer_step"] for d in dones}) != 1:
        raise AssertionError(f"{system}: trainer steps differ at the end: {dones}")
    return {"optimizer_steps": dones[0]["optimizer_steps"],
            "trainer_step": dones[0]["trainer_step"]}


def main(argv=None) -> int:
    global _replicas
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="drills per system (medians reported)")
    p.add_argument("--warm", type=int, default=5,
                   help="steps every replica commits with all present before the kill")
    p.add_argument("--systems", default="xvendor,torchft")
    p.add_argument("--tf-heartbeat-ms", type=int, default=1000)
    p.add_argument("--tf-join-ms", type=int, default=1000)
    p.add_argument("--tf-min-replicas", type=int, default=None,
                   help="torchft lighthouse --min_replicas (default: replicas - 1, >= 1)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    _replicas = a.replicas
    if a.tf_min_replicas is None:
        a.tf_min_replicas = max(1, a.replicas - 1)
    drill_lib._launch = _launch  # the same drill, torchtitan's trainer as the workers
    drill_lib._summarize, drill_lib._Coordinator = _summarize, _Coordinator
    systems = a.systems.split(",")
    runs: dict = {s: [] for s in systems}
    print(f"load average (1 min) before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
          flush=True)
    for rnd in range(a.rounds):  # systems interleaved: both see the same load drift
        for system in systems:
            r = drill_lib.drill(system, a)
            r.update(_check_counters(system, r["workdir"], a.replicas))
            runs[system].append(r)
            print(f"round {rnd + 1} {system:8s} first commit without the victim "
                  f"{r['without_victim_s']} s | first commit of a step begun after the kill "
                  f"{r['first_commit_s']:.3f} s (dropped step given up {r['abort_s']} s) | rejoin {r['rejoin_s']:.3f} s (after up {r['admit_s']:.3f} s) | lost "
                  f"{r['committed_steps_lost']} | attempts discarded {r['attempts_discarded']} |"
                  f" final step {r['final_step']} (optimizer steps {r['optimizer_steps']}, "
                  f"trainer step {r['trainer_step']}), "
                  f"{'identical parameters' if r['identical'] else 'PARAMETERS DIFFER'}",
                  flush=True)
            if r.get("phases"):
                print(f"  {system} timeline after the kill: {r['phases']}", flush=True)
    med = {}
    for s, rs in runs.items():
        med[s] = {k: statistics.median(r[k] for r in rs)
                  for k in ("first_commit_s", "rejoin_s", "admit_s")}
        wv = [r["without_victim_s"] for r in rs if r["without_victim_s"] is not None]
        med[s]["without_victim_s"] = statistics.median(wv) if wv else None
        print(f"median {s:8s} first commit without the victim {med[s]['without_victim_s']} s"
              f" | of a step begun after the kill {med[s]['first_commit_s']:.3f} s | rejoin "
              f"{med[s]['rejoin_s']:.3f} s (after up {med[s]['admit_s']:.3f} s) | committed "
              f"steps lost (max) {max(r['committed_steps_lost'] for r in rs)} | identical "
              f"parameters in {sum(r['identical'] for r in rs)}/{len(rs)} rounds")
    if {"torchft", "xvendor"} <= med.keys():
        ratio = med["torchft"]["first_commit_s"] / med["xvendor"]["first_commit_s"]
        print(f"first commit of a step begun after the kill (medians): xvendor.ft is "
              f"{ratio:.2f}x sooner than torchft (target >= 3x)")
        a_, b_ = med["torchft"]["without_victim_s"], med["xvendor"]["without_victim_s"]
        if a_ and b_:
            print(f"first commit without the victim (medians): xvendor.ft is {a_ / b_:.2f}x "
                  f"sooner than torchft")
    print(f"load average (1 min) after: {os.getloadavg()[0]:.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "medians": med}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
