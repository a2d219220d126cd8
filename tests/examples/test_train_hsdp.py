"""The HSDP recipe (examples/elastic/train_hsdp.py) run for real: a coordinator and two
replica groups of 2 processes, each group under its own ``torchrun --max-restarts 1``, on
127.0.0.1 over gloo (l1); the same on 4 GPUs over NCCL/RCCL (l2, skipped without them).
Each launcher starts in a new session; the drill's ``finally`` SIGKILLs each session
whole, workers included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# -- the HSDP recipe, run for real: 2 replica groups x 2 processes under torchrun ----------------
HSDP = ROOT / "examples" / "elastic" / "train_hsdp.py"
HSDP_STEPS = 60


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lines(out: Path) -> dict[str, list[dict]]:
    return {p.name: [json.loads(l) for l in p.read_text().splitlines() if l.strip()]
            for p in sorted(out.glob("rank*.jsonl"))}


def _worker_pids(launcher_pid: int) -> list[int]:
    """The training processes under one torchrun (its children running python)."""
    kids = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
    return [int(k) for k in kids]


def _env_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode().split("=", 1) for kv in raw if b"=" in kv)


def run_hsdp_drill(out: Path, kill_after: int | None, steps: int = HSDP_STEPS,
                   step_sleep: float = 0.0, timeout_s: float = 240, device: str = "cpu",
                   extra: tuple[str, ...] = ()) -> dict:
    """Coordinator + two torchruns (2 workers each) on 127.0.0.1. With ``kill_after``, SIGKILL
    rank 1 of replica group 1 once it committed that many steps; its torchrun restarts the
    group. Returns the per-file progress lines and each launcher's output."""
    import os
    import signal
    import time
    out.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    env = {**os.environ, "XVENDOR_TOKEN": "drill-" + os.urandom(8).hex(), "OMP_NUM_THREADS": "1",
           "XVENDOR_COORDINATOR": f"127.0.0.1:{port}"}
    procs = [subprocess.Popen([sys.executable, "-m", "xvendor.cli", "coordinator",
                               "--host", "127.0.0.1", "--port", str(port), "--store-port",
                               str(_free_port()), "--min-replicas", "2"], env=env,
                              stdout=open(out / "coordinator.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)]
    try:
        for g in range(2):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                 "--max-restarts", "1", "--monitor-interval", "0.1", "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", str(HSDP), "--steps", str(steps),
                 "--step-sleep", str(step_sleep), "--hash-every-step", "--device", device,
                 "--out", str(out), *extra],
                env={**env, "XVENDOR_REPLICA_ID": str(g),
                     **({"CUDA_VISIBLE_DEVICES": f"{2 * g},{2 * g + 1}"} if device == "cuda"
                        else {})}, cwd=ROOT,
                stdout=open(out / f"group{g}.log", "w"), stderr=subprocess.STDOUT,
                start_new_session=True))
        end = time.monotonic() + timeout_s
        killed = None
        while time.monotonic() < end:
            lines = _lines(out)
            done = [l["done"] for ls in lines.values() for l in ls if "done" in l]
            if len(done) >= 4 and all(p.poll() is not None for p in procs[1:]):
                break
            victim_log = lines.get("rank1_1_0.jsonl", [])
            if kill_after is not None and killed is None and \
                    sum(1 for l in victim_log if l.get("committed")) >= kill_after:
                for pid in _worker_pids(procs[2].pid):
                    e = _env_of(pid)
                    if e.get("RANK") == "1":
                        killed = (pid, time.time())
                        os.kill(pid, signal.SIGKILL)
            bad = [p.args for p in procs[1:] if p.poll() not in (None, 0)]
            assert not bad, f"a replica group's torchrun failed: see {out}/group*.log"
            time.sleep(0.05)
        else:
            raise AssertionError(f"HSDP drill did not finish in {timeout_s} s: see {out}")
        return {"lines": _lines(out), "killed": killed, "done": done}
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def _committed(lines: list[dict]) -> list[int]:
    return [l["step"] for l in lines if l.get("committed")]


def _failure_free(out: Path, device: str, exact: bool) -> dict[int, str]:
    """Each rank's final shard hash in a run without failures (every group's rank r alike)."""
    ref = run_hsdp_drill(out, kill_after=None, device=device)
    want = {}
    for d in ref["done"]:
        assert d["step"] == HSDP_STEPS and d["restart"] == 0
        if exact:
            assert want.setdefault(d["rank"], d["hash"]) == d["hash"], ref["done"]
    return want


@pytest.fixture(scope="module")
def failure_free_cpu(tmp_path_factory) -> dict[int, str]:
    return _failure_free(tmp_path_factory.mktemp("hsdp_ref"), "cpu", exact=True)


def _hsdp_kill_drill(tmp_path: Path, device: str, exact: bool, want=None) -> None:
    if want is None:
        want = _failure_free(tmp_path / "ref", device, exact)

    run = run_hsdp_drill(tmp_path / "kill", kill_after=8, step_sleep=0.3, device=device)
    assert run["killed"] is not None
    ranks = sorted((d["rank"], d["restart"]) for d in run["done"])
    assert ranks == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for d in run["done"]:
        assert d["step"] == HSDP_STEPS
        if exact:
            assert d["hash"] == want[d["rank"]], \
                f"rank {d['rank']} (restart {d['restart']}) diverged from the failure-free run"
    lines = run["lines"]
    for rank in (0, 1):
        survivor = [l for l in lines[f"rank{rank}_0_0.jsonl"] if "step" in l]
        newcomer = [l for l in lines[f"rank{rank}_1_1.jsonl"] if "step" in l]
        assert _committed(survivor) == list(range(HSDP_STEPS))      # none lost, none doubled
        assert any(l["members"] == 1 for l in survivor)             # trained on, shrunk
        assert survivor[-1]["members"] == 2                         # the group came back
        first = newcomer[0]
        same = next(l for l in survivor if l["step"] == first["step"])
        assert first["before"] == same["before"]                    # state transfer exact
        assert _committed(newcomer) == list(range(first["step"], HSDP_STEPS))


@pytest.mark.l1
@pytest.mark.timeout(600)
def test_hsdp_recipe_survives_a_kill_and_ends_as_a_failure_free_run(tmp_path, failure_free_cpu):
    """2 replica groups x 2 processes, each group under its own torchrun. Rank 1 of group 1
    is SIGKILLed after 8 steps; group 0 shrinks and trains on, torchrun restarts group 1,
    which rejoins with its shards' parameters and AdamW state from group 0. Every rank must
    end bit-identical (parameters + optimizer state) to a failure-free run's same rank: the
    data does not depend on the replica group (NOTE [same data in every replica group] in
    the recipe), so a lost, doubled or mis-transferred step would change the hash (checked:
    leaving the optimizer state out of the transfer fails here)."""
    _hsdp_kill_drill(tmp_path, "cpu", exact=True, want=failure_free_cpu)


RACE_STEP = 6


@pytest.mark.l1
@pytest.mark.timeout(600)
def test_hsdp_lanes_settle_and_admit_as_one_unit(tmp_path, failure_free_cpu):
    """The two races between lanes, made certain. (b) Rank 1 of group 1 finishes step 6's
    backward, waits 1 s (lane 0 votes and reaches commit meanwhile) and SIGKILLs itself
    before lane 1 votes: lane 1's verdict is redo, lane 0's commit. Group 0 must redo step 6
    on both ranks (one verdict per replica group), not commit one shard and redo the other.
    (a) torchrun restarts group 1; its rank 1 queues for admission 3 s after its rank 0:
    both lanes must admit the restarted group at one step. Every rank ends bit-identical to
    the failure-free run. Before ``xvendor.distributed.lanes``, (b) split group 0's lanes
    (the recipe stopped with "replica group's lanes are at steps 6..7")."""
    run = run_hsdp_drill(tmp_path / "race", kill_after=None, step_sleep=0.3,
                         extra=("--die-before-vote", f"1:1:0:{RACE_STEP}",
                                "--delay-join", "1:1:1:3"))
    ranks = sorted((d["rank"], d["restart"]) for d in run["done"])
    assert ranks == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for d in run["done"]:
        assert d["step"] == HSDP_STEPS
        assert d["hash"] == failure_free_cpu[d["rank"]], \
            f"rank {d['rank']} (restart {d['restart']}) diverged from the failure-free run"
    lines = {k: [l for l in v if "step" in l] for k, v in run["lines"].items()}
    # every incarnation's two lanes settled every step the same way (commit or redo)
    for group, restart in ((0, 0), (1, 0), (1, 1)):
        lane0, lane1 = (lines[f"rank{r}_{group}_{restart}.jsonl"] for r in (0, 1))
        assert [(l["step"], l["committed"]) for l in lane0] == \
               [(l["step"], l["committed"]) for l in lane1], (group, restart)
    survivor = lines["rank0_0_0.jsonl"]
    assert _committed(survivor) == list(range(HSDP_STEPS))          # none lost, none doubled
    # the race happened: at step 6 lane 0 reached commit and lane 1 redo; both lanes redid it
    at = {r: next(l for l in lines[f"rank{r}_0_0.jsonl"] if l["step"] == RACE_STEP)
          for r in (0, 1)}
    assert (at[0]["lane_commit"], at[1]["lane_commit"]) == (True, False), at
    assert not at[0]["committed"] and not at[1]["committed"], at
    assert _committed(lines["rank0_1_0.jsonl"]) == list(range(RACE_STEP))
    first = lines["rank0_1_1.jsonl"][0]["step"]                      # admitted at one step
    assert lines["rank1_1_1.jsonl"][0]["step"] == first
    assert _committed(lines["rank0_1_1.jsonl"]) == list(range(first, HSDP_STEPS))
    assert any(l["members"] == 1 for l in survivor)                # it trained on alone
    for r in (0, 1):                                                # state transfer exact
        assert lines[f"rank{r}_1_1.jsonl"][0]["before"] == \
               next(l for l in lines[f"rank{r}_0_0.jsonl"] if l["step"] == first)["before"]


N_GPU = __import__("torch").cuda.device_count()


@pytest.mark.l2
@pytest.mark.timeout(600)
@pytest.mark.skipif(N_GPU < 4, reason=f"needs 4 CUDA/ROCm GPUs (2 replica groups x 2), "
                                       f"found {N_GPU}")
def test_hsdp_recipe_on_gpus(tmp_path):
    """The same drill with ``--device cuda``: NCCL/RCCL inside and across replica groups, each
    group on its own 2 GPUs. The state transfer is still checked exactly; the final hashes
    are not compared (GPU kernels with atomics are not bitwise reproducible)."""
    _hsdp_kill_drill(tmp_path, "cuda", exact=False)
