"""DDP under the step guard, for real (l1): a coordinator on 127.0.0.1 (in this process, or
``xvendor coordinator`` in its own), 3 replica groups as separate interpreters (plain, or each
under its own ``torchrun --max-restarts 1``) running ``drills.ddp_drill``.
Faults: kill -9 inside backward (plain, and under torchrun, which restarts the worker: it
rejoins), SIGSTOP (heartbeat), a straggler (evicted), the coordinator itself killed and
restarted. Every collective of ``ResilientProcessGroup`` is checked once on its own.

Each asserts: DDP's averaged gradient exact every committed step, no step lost or applied
twice (``applied == [1] * n``), the closed-form parameters, identical parameter hashes on
every finisher, the coordinator's verdict naming the dead member. Timings are not asserted
(the machine is shared): generous timeouts only.
"""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from xvendor.distributed import StragglerPolicy, Timing, analyze
from xvendor.distributed.recorder import groups_in

pytestmark = [pytest.mark.timeout(240)]  # tiers per test: l1 here, one l2 at the end

TOKEN = "test-token-13"


@pytest.fixture
def coordinator(coord):
    """conftest's ``coord`` with this file's defaults."""
    def make(min_replicas=3, straggler=StragglerPolicy(0, 0), hb_timeout_s=3.0, fr_dir=None):
        return coord(min_replicas=min_replicas, timing=Timing(hb_timeout_s=hb_timeout_s),
                     straggler=straggler, fr_dir=fr_dir)
    return make


class CoordinatorProcess:
    """``xvendor coordinator`` in its own process, as a launcher would start it."""

    def __init__(self, tmp_path, *args, port=0, name="coordinator"):
        self.log = tmp_path / f"{name}.log"
        env = dict(os.environ, XVENDOR_TOKEN=TOKEN)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xvendor.cli", "coordinator", "--host", "127.0.0.1",
             "--port", str(port), *args], env=env, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"),
            start_new_session=True)
        end = time.monotonic() + 60
        while "listening on" not in self.text():
            assert self.proc.poll() is None and time.monotonic() < end, self.text()
            time.sleep(0.05)
        self.port = int(self.text().split("listening on 127.0.0.1:")[1].split()[0])

    def text(self) -> str:
        return self.log.read_text()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(c, tmp_path, spec: dict, n=3, torchrun=False) -> list[subprocess.Popen]:
    spec = dict(spec, out_dir=str(tmp_path))
    procs = []
    for i in range(n):
        env = dict(os.environ, XVENDOR_COORDINATOR=f"127.0.0.1:{c.port}", XVENDOR_TOKEN=TOKEN,
                   XVENDOR_REPLICA_ID=f"r{i}", XV_DRILL=json.dumps(spec), OMP_NUM_THREADS="1",
                   XVENDOR_FR_DIR=str(tmp_path / "fr"))
        if torchrun:  # one torchrun per replica group: a failure restarts only its own workers
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", "1", "--max-restarts", "1", "--monitor-interval", "0.1",
                   "-m", "drills.ddp_drill"]
        else:
            cmd = [sys.executable, "-m", "drills.ddp_drill"]
        procs.append(subprocess.Popen(cmd, env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL,
                                      stderr=open(tmp_path / f"stderr_{i}.txt", "w")))
    return procs


def finish(procs, tmp_path, timeout_s=200) -> list[dict]:
    end = time.monotonic() + timeout_s
    try:
        for p in procs:
            p.wait(timeout=max(1.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        stacks = {os.path.basename(p): open(p).read()[-2500:]
                  for p in glob.glob(str(tmp_path / "stack_*"))}
        raise AssertionError(f"drill did not finish: results {results(tmp_path)}\n"
                             f"stacks {stacks}") from None
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return results(tmp_path)


def results(tmp_path) -> list[dict]:
    return [json.load(open(p)) for p in sorted(glob.glob(str(tmp_path / "result_*.json")))]


def check_finishers(rs: list[dict], *, n: int, size: int) -> list[dict]:
    fin = [r for r in rs if r.get("finished")]
    assert len(fin) == n, rs
    steps = fin[0]["step"]
    for r in fin:
        assert r["errors"] == [], r["errors"]             # averaged gradient exact each step
        assert r["step"] == steps and r["size"] == size, r
        assert r["applied_ok"] and r["w_ok"], r          # none lost, none twice; closed form
    assert len({r["digest"] for r in fin}) == 1, "finishers hold different parameters"
    return fin


@pytest.mark.l1
def test_kill9_survivors_continue_exactly(coordinator, tmp_path):
    c = coordinator()
    procs = launch(c, tmp_path, {"steps": 30, "die": {"replica": "r1", "step": 10},
                                 "check_collectives": True, "veto_at": 4})
    rs = finish(procs, tmp_path)
    fin = check_finishers(rs, n=2, size=2)
    for r in fin:  # every collective of ResilientProcessGroup, exact, into poisoned outputs
        assert r["collective_errors"] == [], r["collective_errors"]
    assert [p.returncode for p in procs] == [0, -signal.SIGKILL, 0]
    for r in fin:
        # step 4: a commit overruled by agree(); step 10: the one the kill interrupted
        assert r["redone"] == [4, 10], r
        assert r["recoveries"] == ["shrink", "shrink"] and r["updates"] == 2, r
        assert r["rebuilds"] == 1, r
    deaths = c.deaths()
    assert len(deaths) == 1 and "closed without a goodbye" in next(iter(deaths.values()))


@pytest.mark.l1
@pytest.mark.heavy
def test_torchrun_restarts_the_killed_replica_and_it_rejoins(tmp_path):
    c = CoordinatorProcess(tmp_path, "--min-replicas", "3", "--straggler-factor", "0")
    spec = {"steps": 30, "final_size": 3, "max_steps": 1500,
            "die": {"replica": "r1", "step": 10}}
    try:
        procs = launch(c, tmp_path, spec, torchrun=True)
        rs = finish(procs, tmp_path)
    finally:
        c.close()
    assert "epoch 0 = members [0, 1, 2]" in c.text() and "failed: connection closed" in c.text()
    assert "(restart 1)" in c.text(), c.text()  # the restarted worker was admitted again
    assert [p.returncode for p in procs] == [0, 0, 0]  # torchrun restarted r1, it finished
    fin = check_finishers(rs, n=3, size=3)
    newcomer = [r for r in fin if r["replica"] == "r1"]
    assert len(newcomer) == 1 and newcomer[0]["restart"] == 1, fin
    assert newcomer[0]["joined_at"] > 10  # admitted at a later step boundary, with the state
    for r in fin:
        if r["replica"] != "r1":
            assert r["recoveries"] == ["shrink", "grow"] and r["redone"] == [10], r
            assert r["rebuilds"] == 2  # DDP rebuilt on every member at the grow


@pytest.mark.l1
def test_sigstopped_worker_is_evicted_by_heartbeat(coordinator, tmp_path):
    c = coordinator(hb_timeout_s=2.0)
    procs = launch(c, tmp_path, {"steps": 25, "stop": {"replica": "r2", "step": 8}})
    try:
        rs = finish(procs[:2], tmp_path)
    finally:
        os.killpg(procs[2].pid, signal.SIGKILL)  # SIGKILL ends a stopped process too
    fin = check_finishers(rs, n=2, size=2)
    for r in fin:
        assert r["redone"] == [8] and r["recoveries"] == ["shrink"], r
    (why,) = c.deaths().values()
    assert "heartbeat stale" in why, why


@pytest.mark.l1
def test_straggler_is_evicted_and_the_rest_train_on(coordinator, tmp_path):
    c = coordinator(straggler=StragglerPolicy(factor=3.0, steps=3, min_s=0.2),
                    fr_dir=str(tmp_path / "fr"))
    procs = launch(c, tmp_path, {"steps": 25, "step_sleep": 0.05,
                                 "slow": {"replica": "r0", "from_step": 5, "s": 0.6}})
    rs = finish(procs, tmp_path)
    fin = check_finishers(rs, n=2, size=2)
    assert {r["replica"] for r in fin} == {"r1", "r2"}
    (slow,) = [r for r in rs if r["replica"] == "r0"]
    assert "declared dead" in slow["excluded"] and "straggler" in slow["excluded"], slow
    ((victim, why),) = c.deaths().items()
    assert "straggler" in why and "3 consecutive steps" in why, why
    # the flight recorder names it, and why; its dumps carry this coordinator's incarnation
    assert groups_in(str(tmp_path / "fr")) == [(c.incarnation, 0)]
    report = analyze(str(tmp_path / "fr"), 0, c.incarnation)
    named = {m: w for ep in report["epochs"] for m, w in ep["declared_dead"].items()}
    assert "straggler" in named.get(victim, ""), report


@pytest.mark.l1
def test_coordinator_killed_and_restarted_mid_run(tmp_path):
    """kill -9 of the coordinator (its store goes with it); a new one on the same ports; the
    workers are re-admitted, re-form epoch 0 there and finish exactly."""
    port, store = free_port(), free_port()
    args = ("--min-replicas", "3", "--straggler-factor", "0", "--store-port", str(store))
    first = CoordinatorProcess(tmp_path, *args, port=port, name="first")
    procs = launch(first, tmp_path, {"steps": 40, "progress": True})
    second = None
    try:
        def progress():
            return min((int(open(p).read() or 0) for p in glob.glob(str(tmp_path / "progress_*"))),
                       default=0)
        end = time.monotonic() + 120
        while len(glob.glob(str(tmp_path / "progress_*"))) < 3 or progress() < 10:
            assert time.monotonic() < end, "no progress"
            time.sleep(0.05)
        os.killpg(first.proc.pid, signal.SIGKILL)
        first.close()
        second = CoordinatorProcess(tmp_path, *args, port=port, name="second")
        rs = finish(procs, tmp_path)
    finally:
        for c in (first, second):
            if c is not None:
                c.close()
    fin = check_finishers(rs, n=3, size=3)
    assert all(r["reconnects"] == 1 for r in fin), fin
    assert "epoch 0 = members [0, 1, 2]" in second.text(), second.text()
    # NOTE [incarnations]: the restarted coordinator says it is another incarnation
    first_inc, second_inc = (int(c.text().split("[incarnation ")[1].split("]")[0])
                             for c in (first, second))
    assert first_inc < second_inc


N_GPU = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.l2
@pytest.mark.skipif(N_GPU < 2, reason=f"needs >= 2 CUDA/ROCm GPUs, found {N_GPU}")
def test_ddp_over_nccl_survives_kill9(coordinator, tmp_path):
    """The same drill with the epochs' groups on NCCL/RCCL (the strategy feature detection
    picks: nccl2 reconfigure, shrink_group, or a fresh group). Never run where this was
    written: no GPU."""
    n = min(N_GPU, 3)
    c = coordinator(min_replicas=n)
    procs = launch(c, tmp_path, {"steps": 30, "backend": "nccl",
                                 "die": {"replica": "r1", "step": 10}}, n=n)
    fin = check_finishers(finish(procs, tmp_path), n=n - 1, size=n - 1)
    assert all(r["redone"] == [10] for r in fin), fin
