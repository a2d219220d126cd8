"""torchtitan's own fault-tolerant trainer (``FaultTolerantTrainer``, ``--module torchft.llama3
--config llama3_torchft_debugmodel``) on ``xvendor.ft`` (l1): 2 replica groups, each its own
``torchrun --max-restarts 1`` on 127.0.0.1 (gloo), xvendor's coordinator outside them, the
CPU launcher with ``--xvendor-ft`` (``import torchft`` resolves to ``xvendor.ft``).

One drill, every assertion on it: after 3 steps committed by both, one worker is killed with
SIGKILL; the survivor keeps committing alone and redoes no step (every attempt it began
commits: the step in flight at the kill is kept); torchrun restarts the group, it is
admitted at a commit with the survivor's state (model, optimizer, LR scheduler, train state) and both
commit together to the stop step. Then: identical parameters (hash of every parameter's
bytes), the same committed step and trainer step on both, AdamW's step count = committed
steps + 1 on both (+ 1: the zero-lr step torchtitan's FT optimizer container takes at
build), so no committed step was lost or applied twice; the survivor's committed steps
count up by exactly one; the newcomer's first commit is the step after the one it was
admitted at. With ``--override.imports ...xvendor_ops`` (which the FT trainer ignores on its
own): xvendor's rms_norm ran in both replicas. ~60-120 s here (three cold torchtitan interpreters: two founders and the
restart; the machine has 2 cores).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torchtitan")
from xvendor.integrations.torchtitan import assets, ft  # noqa: E402

pytestmark = [pytest.mark.l1, pytest.mark.timeout(420)]
ROOT = Path(__file__).resolve().parents[2]
OPS = ["--override.imports", "xvendor.integrations.torchtitan.overrides.xvendor_ops"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _records(d: Path, replica: int) -> list[dict]:
    p = d / f"r{replica}.jsonl"
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.endswith("}")]


def _commits(recs):
    return [r for r in recs if r.get("event") == "attempt" and r["committed"]]


def _wait(cond, timeout_s, what, procs, logs):
    end = time.monotonic() + timeout_s
    while not cond():
        for p, log in zip(procs, logs):
            if p.poll() not in (None, 0):
                raise AssertionError(f"{what}: a launcher failed:\n{log.read_text()[-3000:]}")
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout_s} s:\n" +
                                 "\n".join(log.read_text()[-1500:] for log in logs))
        time.sleep(0.05)


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


@pytest.fixture(scope="module")
def drill(tmp_path_factory):
    work = Path(tmp_path_factory.mktemp("titan_ft"))
    root = assets.make_assets(work / "assets")
    token, port = os.urandom(16).hex(), _port()
    env = {**os.environ, "XVENDOR_COORDINATOR": f"127.0.0.1:{port}", "XVENDOR_TOKEN": token,
           "XVENDOR_TITAN_FT_LOG": str(work), "OMP_NUM_THREADS": "1", "LOGLEVEL": "WARNING",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    coord = subprocess.Popen([sys.executable, "-m", "xvendor.cli", "coordinator", "--host",
                              "127.0.0.1", "--port", str(port), "--store-port", str(_port()),
                              "--min-replicas", "2", "--join-timeout", "120"], env=env,
                             stdout=open(work / "coordinator.log", "w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
    procs, logs = [], []
    try:
        for r in range(2):
            logs.append(work / f"launcher{r}.log")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                 "--nproc-per-node", "1", "--max-restarts", "1", "--monitor-interval", "0.1",
                 "-m", "xvendor.integrations.torchtitan.run",
                 *ft.drill_argv("xvendor", r, 2, str(work / f"out{r}"), extra=OPS)],
                cwd=root, env={**env, "XVENDOR_REPLICA_ID": str(r),
                               "XVENDOR_TITAN_COUNTS": str(work / f"counts{r}")},
                stdout=open(logs[-1], "w"), stderr=subprocess.STDOUT, start_new_session=True))
        both = lambda r: [c for c in _commits(_records(work, r)) if c["n"] == 2]
        _wait(lambda: all(len(both(r)) >= 3 for r in range(2)), 240, "warm-up", procs, logs)
        t_kill = time.time()
        os.kill(_records(work, 1)[-1]["pid"], signal.SIGKILL)
        alone = lambda: [c for c in _commits(_records(work, 0)) if c["t0"] > t_kill]
        _wait(lambda: alone(), 60, "survivor commits after the kill", procs, logs)
        back = lambda: [c for c in _commits(_records(work, 1)) if c["restart"] >= 1
                        and c["n"] == 2]
        _wait(back, 240, "restarted replica commits with the survivor", procs, logs)
        top = max(c["step"] for r in range(2) for c in _commits(_records(work, r)))
        (work / "stop").write_text(str(top + 2))
        for p in procs:
            p.wait(timeout=120)
        for p, log in zip(procs, logs):
            assert p.returncode == 0, log.read_text()[-3000:]
        yield {"work": work, "calls": [json.loads((work / f"counts{r}" / "rank0.json")
                                                  .read_text())["calls"] for r in range(2)], "t_kill": t_kill, "logs": [log.read_text() for log in logs],
               "recs": [_records(work, r) for r in range(2)]}
    finally:
        for p in procs:
            _kill(p)
        _kill(coord)


def _done(recs):
    return next(r for r in recs if r.get("event") == "done")


def test_replicas_end_identical(drill):
    d0, d1 = (_done(r) for r in drill["recs"])
    assert d0["hash"] == d1["hash"]
    assert d0["step"] == d1["step"] and d0["trainer_step"] == d1["trainer_step"]
    for d in (d0, d1):  # every committed step applied once (+ torchtitan's zero-lr step)
        assert d["optimizer_steps"] == d["step"] + 1, (d0, d1)
    assert d1["restart"] >= 1  # the finisher of replica 1 is the restarted worker


def test_survivor_commits_through_the_kill(drill):
    steps = [c["step"] for c in _commits(drill["recs"][0])]
    assert steps == list(range(steps[0], steps[0] + len(steps)))  # none lost, none twice
    alone = [c for c in _commits(drill["recs"][0]) if c["t0"] > drill["t_kill"] and c["n"] == 1]
    assert alone, "the survivor never committed alone"


def test_survivor_redoes_no_step(drill):
    # xvendor.ft keeps the step in flight at the kill: its all-reduces run again on the
    # shrunk epoch from kept copies, so every attempt the survivor began was committed
    attempts = [r for r in drill["recs"][0] if r.get("event") == "attempt"]
    assert attempts and all(a["committed"] for a in attempts), \
        [(a["step"], a["n"]) for a in attempts if not a["committed"]]


def test_restarted_replica_catches_up_by_state_transfer(drill):
    log = drill["logs"][1]
    assert "[xvendor ft] admitted at the commit of step" in log
    admitted = int(log.split("admitted at the commit of step ")[1].split(":")[0])
    new = [c for c in _commits(drill["recs"][1]) if c["restart"] >= 1]
    assert new[0]["step"] == admitted + 1 and new[0]["n"] == 2
    assert [c["step"] for c in new] == list(range(admitted + 1, admitted + 1 + len(new)))
    # the survivor committed that same step with it
    assert any(c["step"] == admitted + 1 and c["n"] == 2 for c in _commits(drill["recs"][0]))


def test_overrides_reach_the_ft_trainer(drill):
    # FaultTolerantTrainer never applies --override.imports itself: the integration does
    for log, calls in zip(drill["logs"], drill["calls"]):
        assert "FaultTolerantTrainer ignores --override.imports: applied here" in log
        assert "[xvendor] Llama3Model.Config has no MoE layers" in log
        assert calls["rms_norm"] > 0  # xvendor.rms_norm ran in every replica's model
