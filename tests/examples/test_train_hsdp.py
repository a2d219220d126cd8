"""The HSDP recipe (examples/elastic/train_hsdp.py) run for real: a coordinator and two
replica groups of 2 processes, each group under its own ``torchrun --max-restarts 1``, on
127.0.0.1 over gloo (l1); the same on 4 GPUs over NCCL/RCCL (l2, skipped without them).
Faults: kill -9 of one worker (also at the lanes' worst moment), of a whole replica group,
SIGSTOP, a straggler, the coordinator killed and restarted. Every drill compares each rank's
final shard (parameters + AdamW state) with one failure-free run's at the same step (a
module fixture: the recipe logs a hash before every step), checks that no committed step
is lost or doubled, and that a restarted replica group is admitted as one unit. Timings
are printed, asserted only loosely (the machine is shared). Each launcher starts in a new
session; the drill's ``finally`` SIGKILLs each session whole, workers included."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xvendor.distributed import Timing

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


class Drill:
    """A coordinator and two torchruns (2 workers each) on 127.0.0.1, and the means to hurt
    them: ``worker(g, r)`` (a pid), ``restart_coordinator()`` (kill -9, then a new one on the
    same ports). Progress is read from the recipe's per-rank JSON lines."""

    def __init__(self, out: Path, steps: int, step_sleep: float, device: str,
                 extra: tuple[str, ...], coordinator_args: tuple[str, ...]):
        out.mkdir(parents=True, exist_ok=True)
        self.out, self.port, self.store_port = out, _free_port(), _free_port()
        self.env = {**os.environ, "XVENDOR_TOKEN": "drill-" + os.urandom(8).hex(),
                    "OMP_NUM_THREADS": "1", "XVENDOR_COORDINATOR": f"127.0.0.1:{self.port}"}
        self.coordinator_args, self.coordinators, self.groups = coordinator_args, [], []
        self.start_coordinator()
        for g in range(2):
            self.groups.append(subprocess.Popen(
                [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                 "--max-restarts", "1", "--monitor-interval", "0.1", "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", f"127.0.0.1:{_free_port()}", str(HSDP), "--steps", str(steps),
                 "--step-sleep", str(step_sleep), "--hash-every-step", "--device", device,
                 "--out", str(out), *extra],
                env={**self.env, "XVENDOR_REPLICA_ID": str(g),
                     **({"CUDA_VISIBLE_DEVICES": f"{2 * g},{2 * g + 1}"} if device == "cuda"
                        else {})}, cwd=ROOT,
                stdout=open(out / f"group{g}.log", "w"), stderr=subprocess.STDOUT,
                start_new_session=True))

    def start_coordinator(self) -> None:
        n = len(self.coordinators)
        self.coordinators.append(subprocess.Popen(
            [sys.executable, "-m", "xvendor.cli", "coordinator", "--host", "127.0.0.1", "--port",
             str(self.port), "--store-port", str(self.store_port), "--min-replicas", "2",
             *self.coordinator_args], env=self.env, start_new_session=True,
            stdout=open(self.out / f"coordinator{n or ''}.log", "w"), stderr=subprocess.STDOUT))

    def restart_coordinator(self) -> None:
        os.killpg(self.coordinators[-1].pid, signal.SIGKILL)
        self.coordinators[-1].wait()
        self.start_coordinator()

    def coordinator_log(self) -> str:
        return "".join(p.read_text() for p in sorted(self.out.glob("coordinator*.log")))

    def lines(self, name: str | None = None):
        got = _lines(self.out)
        return got if name is None else [l for l in got.get(name, []) if "step" in l]

    def committed(self, name: str) -> int:
        return sum(1 for l in self.lines(name) if l.get("committed"))

    def worker(self, group: int, rank: int) -> int:
        (pid,) = [p for p in _worker_pids(self.groups[group].pid)
                  if _env_of(p).get("RANK") == str(rank)]
        return pid

    def close(self) -> None:
        for p in self.groups + self.coordinators:
            try:
                os.killpg(p.pid, signal.SIGKILL)   # SIGKILL ends a stopped process too
            except ProcessLookupError:
                pass
            p.wait()


def run_hsdp_drill(out: Path, kill_after: int | None = None, steps: int = HSDP_STEPS,
                   step_sleep: float = 0.0, timeout_s: float = 240, device: str = "cpu",
                   extra: tuple[str, ...] = (), fault=None,
                   coordinator_args: tuple[str, ...] = ("--straggler-factor", "0")) -> dict:
    """Run the drill until all four ranks finished and both torchruns exited. With
    ``kill_after``, SIGKILL rank 1 of replica group 1 once it committed that many steps; its
    torchrun restarts the group. ``fault(drill)``: a generator stepped once per poll (it
    waits by yielding), for any other fault. Returns the per-file progress lines, each
    launcher's output and what the fault recorded."""
    if kill_after is not None:
        def fault(d, rec):
            while d.committed("rank1_1_0.jsonl") < kill_after:
                yield
            rec["killed"] = (d.worker(1, 1), time.time())
            os.kill(rec["killed"][0], signal.SIGKILL)
    d, rec = Drill(out, steps, step_sleep, device, extra, coordinator_args), {"killed": None}
    try:
        acting = fault(d, rec) if fault is not None else iter(())
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            done = [l["done"] for ls in d.lines().values() for l in ls if "done" in l]
            if len(done) >= 4 and all(p.poll() is not None for p in d.groups):
                break
            if acting is not None and next(acting, StopIteration) is StopIteration:
                acting = None
            bad = [p.args for p in d.groups if p.poll() not in (None, 0)]
            assert not bad, f"a replica group's torchrun failed: see {out}/group*.log"
            time.sleep(0.05)
        else:
            raise AssertionError(f"HSDP drill did not finish in {timeout_s} s: see {out}")
        return {**rec, "lines": d.lines(), "done": done, "coordinator": d.coordinator_log()}
    finally:
        d.close()


def _committed(lines: list[dict]) -> list[int]:
    return [l["step"] for l in lines if l.get("committed")]


def _failure_free(out: Path, device: str, exact: bool) -> dict[int, dict[int, str]]:
    """Rank r's shard hash after n committed steps, ``want[r][n]`` for n = 0..HSDP_STEPS, in a
    run without failures (every group's rank r alike). A drill of n < HSDP_STEPS steps ends
    comparable to ``want[r][n]``: the recipe logs the hash before each step."""
    ref = run_hsdp_drill(out, device=device)
    want: dict[int, dict[int, str]] = {0: {}, 1: {}}
    for d in ref["done"]:
        assert d["step"] == HSDP_STEPS and d["restart"] == 0
        if exact:
            assert want[d["rank"]].setdefault(HSDP_STEPS, d["hash"]) == d["hash"], ref["done"]
    for name, lines in ref["lines"].items():
        for l in lines:
            if "step" in l and exact:
                h = want[int(name[4])].setdefault(l["step"], l["before"])
                assert h == l["before"], (name, l)
    return want


@pytest.fixture(scope="module")
def failure_free_cpu(tmp_path_factory) -> dict[int, dict[int, str]]:
    return _failure_free(tmp_path_factory.mktemp("hsdp_ref"), "cpu", exact=True)


def _steps(run: dict) -> dict[str, list[dict]]:
    return {k: [l for l in v if "step" in l] for k, v in run["lines"].items()}


def _check_group1_came_back(run: dict, want, steps: int, exact: bool = True) -> dict:
    """Replica group 0 trained through every step; group 1 was restarted by its torchrun and
    admitted again whole (both lanes at one step, each with its lane's state); every rank
    ended as the failure-free run's same rank after ``steps`` steps."""
    ranks = sorted((d["rank"], d["restart"]) for d in run["done"])
    assert ranks == [(0, 0), (0, 1), (1, 0), (1, 1)], run["done"]
    for d in run["done"]:
        assert d["step"] == steps
        if exact:
            assert d["hash"] == want[d["rank"]][steps], \
                f"rank {d['rank']} (restart {d['restart']}) diverged from the failure-free run"
    lines = _steps(run)
    first = {r: lines[f"rank{r}_1_1.jsonl"][0]["step"] for r in (0, 1)}
    assert first[0] == first[1], first                              # admitted as one unit
    for rank in (0, 1):
        survivor, newcomer = lines[f"rank{rank}_0_0.jsonl"], lines[f"rank{rank}_1_1.jsonl"]
        assert _committed(survivor) == list(range(steps))           # none lost, none doubled
        assert any(l["members"] == 1 for l in survivor)             # trained on, shrunk
        assert survivor[-1]["members"] == 2                         # the group came back
        same = next(l for l in survivor if l["step"] == first[rank])
        assert newcomer[0]["before"] == same["before"]              # state transfer exact
        assert _committed(newcomer) == list(range(first[rank], steps))
    return lines


def _hsdp_kill_drill(tmp_path: Path, device: str, exact: bool, want=None) -> None:
    if want is None:
        want = _failure_free(tmp_path / "ref", device, exact)
    run = run_hsdp_drill(tmp_path / "kill", kill_after=8, step_sleep=0.3, device=device)
    assert run["killed"] is not None
    _check_group1_came_back(run, want, HSDP_STEPS, exact)


@pytest.mark.l1
@pytest.mark.timeout(600)
@pytest.mark.heavy
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
@pytest.mark.heavy
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
        assert d["hash"] == failure_free_cpu[d["rank"]][HSDP_STEPS], \
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


@pytest.mark.l1
@pytest.mark.timeout(300)
def test_hsdp_replicas_stay_identical_on_different_data(tmp_path, failure_free_cpu):
    """Each replica group on its own data (``--data-by-group``), no failure: rank r of both
    groups must hold the same shard (parameters + AdamW state) before every step, which
    holds only if every parameter's gradient is averaged across replica groups. The drills
    cannot see a gradient left out of that average (their data is the same in every group):
    before NOTE [a hook per FSDP module] in the recipe, the blocks' gradients were (checked:
    with the hook on the root module alone the recipe stops at step 0 on its aliasing check,
    and with that check removed too the groups' hashes part from step 1). The shards differ
    from the same-data run's from step 1 on: the data did differ."""
    steps = 6
    run = run_hsdp_drill(tmp_path, steps=steps, extra=("--data-by-group",))
    lines = _steps(run)
    for r in (0, 1):
        a, b = lines[f"rank{r}_0_0.jsonl"], lines[f"rank{r}_1_0.jsonl"]
        assert _committed(a) == _committed(b) == list(range(steps))
        assert [l["before"] for l in a] == [l["before"] for l in b], r
        assert a[0]["before"] == failure_free_cpu[r][0]            # the same initial model
        assert all(l["before"] != failure_free_cpu[r][l["step"]] for l in a[1:]), r
    assert len({(d["rank"], d["hash"]) for d in run["done"]}) == 2, run["done"]


# -- the other faults, on shorter runs compared with the same failure-free reference -------------
DRILL_STEPS, DRILL_SLEEP, FAULT_AT = 40, 0.4, 4
HB_TIMEOUT = 2.0
CALL_BOUND = Timing(hb_timeout_s=HB_TIMEOUT).call_bound_s    # 3.58 s


def _members(log: str) -> dict[tuple[int, int], tuple[str, int]]:
    """(lane, member) -> (replica, restart), from the coordinator's admission lines."""
    found = re.findall(r"lane (\d+): member (\d+) = replica '(\w+)' .*\(restart (\d+)\)", log)
    return {(int(l), int(m)): (g, int(k)) for l, m, g, k in found}


def _deaths(log: str) -> dict[tuple[int, int], str]:
    """(lane, member) -> why, from the coordinator's verdict lines."""
    return {(int(l), int(m)): why for l, m, why in
            re.findall(r"lane (\d+): member (\d+) \(.*?\) declared dead: (.*)", log)}


def _first_shrunk_commit(lines: list[dict], after: float) -> float:
    return min(l["t"] for l in lines if l["committed"] and l["members"] == 1 and l["t"] > after)


@pytest.mark.l1
@pytest.mark.timeout(300)
@pytest.mark.heavy
def test_hsdp_whole_replica_group_killed(tmp_path, failure_free_cpu):
    """Both processes of replica group 1 SIGKILLed at once (a node lost). Group 0 never
    stops: both its lanes shrink (at most the interrupted step redone) and train on; group
    1's torchrun restarts both, and they are admitted back as one unit, each with its lane's
    shard state. Exact: the data does not depend on the replica group, so the average over
    any membership is every group's own gradient and a lost, doubled or mis-transferred step
    would change the final parameters + AdamW state (compared with the failure-free run's)."""
    def fault(d, rec):
        while d.committed("rank1_1_0.jsonl") < FAULT_AT:
            yield
        pids = [d.worker(1, 0), d.worker(1, 1)]
        rec["t_fault"] = time.time()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
    run = run_hsdp_drill(tmp_path, steps=DRILL_STEPS, step_sleep=DRILL_SLEEP, fault=fault)
    lines = _check_group1_came_back(run, failure_free_cpu, DRILL_STEPS)
    who, deaths = _members(run["coordinator"]), _deaths(run["coordinator"])
    assert sorted(who[k] for k in deaths) == [("1", 0), ("1", 0)], (deaths, who)  # one a lane
    for r in (0, 1):
        assert len([l for l in lines[f"rank{r}_0_0.jsonl"] if not l["committed"]]) <= 1
    t = _first_shrunk_commit(lines["rank0_0_0.jsonl"], run["t_fault"]) - run["t_fault"]
    print(f"\ngroup 0's first shrunk commit {t:.2f} s after the kill")


@pytest.mark.l1
@pytest.mark.timeout(300)
@pytest.mark.heavy
def test_hsdp_sigstopped_worker_evicts_its_replica_group(tmp_path, failure_free_cpu):
    """Rank 1 of replica group 1 SIGSTOPped (a hang). The coordinator's heartbeat verdict
    (``--hb-timeout 2``) evicts its whole replica group: the stopped rank in lane 1 and its
    live group mate in lane 0 (stuck in the group's own collectives with it), so group 0
    trains on in both lanes within the call bound (asserted at 3x, loose for this shared
    machine; measured 2.9 s, the bound 3.58 s; 61 s before the coordinator evicted the
    mate: the replica group's gloo timeout). After SIGCONT the stopped rank finds itself
    excluded and exits (one lane cannot rejoin alone); torchrun restarts the group, and it
    rejoins whole. Exact against the failure-free run, as for the kills: a hang loses no
    committed step and the redone one is applied once."""
    def fault(d, rec):
        while d.committed("rank1_1_0.jsonl") < FAULT_AT:
            yield
        rec["pid"], rec["t_fault"] = d.worker(1, 1), time.time()
        os.kill(rec["pid"], signal.SIGSTOP)
        while min(sum(1 for l in d.lines(f"rank{r}_0_0.jsonl") if l["committed"] and
                      l["members"] == 1) for r in (0, 1)) < 3:
            yield
        rec["t_cont"] = time.time()
        os.kill(rec["pid"], signal.SIGCONT)
    run = run_hsdp_drill(tmp_path, steps=DRILL_STEPS, step_sleep=DRILL_SLEEP, fault=fault,
                         coordinator_args=("--straggler-factor", "0",
                                           "--hb-timeout", str(HB_TIMEOUT)))
    lines = _check_group1_came_back(run, failure_free_cpu, DRILL_STEPS)
    who, deaths = _members(run["coordinator"]), _deaths(run["coordinator"])
    assert {who[k] for k in deaths} == {("1", 0)}, (deaths, who)
    assert sorted(k[0] for k in deaths) == [0, 1], deaths          # both lanes evicted it
    stopped = next(k for k in deaths if k[0] == 1)
    assert "heartbeat stale" in deaths[stopped], deaths
    mate = next(k for k in deaths if k[0] == 0)
    assert "lost its lane 1" in deaths[mate] and "heartbeat stale" in deaths[mate], deaths
    # after SIGCONT the stopped process found itself excluded and left (its mate too, or
    # it failed in the group's collectives first: either way torchrun restarted the group)
    assert any("excluded" in l for l in run["lines"]["rank1_1_0.jsonl"])
    resumed = [_first_shrunk_commit(lines[f"rank{r}_0_0.jsonl"], run["t_fault"]) - run["t_fault"]
               for r in (0, 1)]
    print(f"\ngroup 0 resumed {max(resumed):.2f} s after SIGSTOP (call bound {CALL_BOUND:.2f} s)")
    assert max(resumed) < 3 * CALL_BOUND, resumed


@pytest.mark.l1
@pytest.mark.timeout(300)
@pytest.mark.heavy
def test_hsdp_straggler_evicts_its_replica_group(tmp_path, failure_free_cpu):
    """Rank 1 of replica group 1 sleeps 0.6 s at the start of every step. Its group mate
    waits for it in the group's own collectives, so both of group 1's lanes report ~0.6 s
    busy against group 0's ~0.03 s (the cross-replica all-reduces are launched without
    waiting, NOTE [why the hook does not wait] in the recipe, so group 0's busy time is its
    own). The coordinator (factor 3 over the median, 3 consecutive steps, 0.2 s floor)
    evicts group 1 in whichever lane judges first and its mate with it; every verdict it
    prints names the member, its replica group and why (the straggler's busy times). Group
    0 is never evicted and trains on; torchrun restarts group 1 (the new incarnation is not
    slow) and it rejoins. Exact against the failure-free run: an eviction loses no
    committed step."""
    run = run_hsdp_drill(tmp_path, steps=DRILL_STEPS, step_sleep=DRILL_SLEEP,
                         extra=("--slow", "1:1:0:0.6"),
                         coordinator_args=("--straggler-factor", "3", "--straggler-steps", "3",
                                           "--straggler-min-s", "0.2"))
    _check_group1_came_back(run, failure_free_cpu, DRILL_STEPS)
    who, deaths = _members(run["coordinator"]), _deaths(run["coordinator"])
    assert {who[k] for k in deaths} == {("1", 0)}, (deaths, who)   # group 0 never evicted
    assert sorted(k[0] for k in deaths) == [0, 1], deaths
    assert all("straggler: busy" in why and "3 consecutive steps" in why
               for why in deaths.values()), deaths


@pytest.mark.l1
@pytest.mark.timeout(300)
@pytest.mark.heavy
def test_hsdp_coordinator_killed_and_restarted(tmp_path, failure_free_cpu):
    """The coordinator SIGKILLed mid-run (its store with it) and a new one started on the
    same ports. Every worker sees its connection close, is admitted again, the new
    coordinator forms epoch 0 of both lanes from the two whole groups, state is re-synced
    from the most advanced member, and training finishes with no restart. Exact against
    the failure-free run: a step committed just before the loss is kept once. Each rank
    logs one step left unsettled by the loss (the guard reconnected): it is redone, or,
    if another member had committed it, taken with that member's state."""
    def fault(d, rec):
        while min(d.committed(f"rank{r}_{g}_0.jsonl") for r in (0, 1) for g in (0, 1)) < 8:
            yield
        rec["t_fault"] = time.time()
        d.restart_coordinator()
    run = run_hsdp_drill(tmp_path, steps=DRILL_STEPS, step_sleep=DRILL_SLEEP, fault=fault)
    ranks = sorted((d["rank"], d["restart"]) for d in run["done"])
    assert ranks == [(0, 0), (0, 0), (1, 0), (1, 0)], run["done"]    # nobody restarted
    for d in run["done"]:
        assert d["step"] == DRILL_STEPS and d["hash"] == failure_free_cpu[d["rank"]][DRILL_STEPS]
    second = run["coordinator"].split("listening on")[-1]
    assert "lane 0: epoch 0 = members" in second and "lane 1: epoch 0 = members" in second
    for name, ls in _steps(run).items():
        done = _committed(ls)
        assert len(done) == len(set(done)), (name, done)                # none doubled
        lost = [l["step"] for l in ls if l["committed"] is None]        # the reconnect
        assert len(lost) == 1, (name, lost)
        assert sorted(set(done) | set(lost)) == list(range(DRILL_STEPS)), (name, done)


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
