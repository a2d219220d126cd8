"""WeightChannel: the seqlock protocol with real processes on the CPU (l1), errors (l0),
and the GPU path (l2, skipped without a device)."""

import pickle
import time

import pytest
import torch
import torch.multiprocessing as mp

import xvendor
from xvendor.testing.ipc_workers import consume_and_verify, consume_on_device

SHAPES = {"w_up": (512, 512), "w_down": (512, 512), "bias": (1000,)}  # ~2 MB per version


def _tensors(device="cpu"):
    return {k: torch.zeros(s, device=device) for k, s in SHAPES.items()}


@pytest.mark.l0
def test_errors_name_the_rule():
    with pytest.raises(ValueError, match="non-empty dict"):
        xvendor.WeightChannel({})
    with pytest.raises(TypeError, match="must map str -> Tensor"):
        xvendor.WeightChannel({"w": [1.0]})
    with pytest.raises(ValueError, match="all tensors must be on one device"):
        xvendor.WeightChannel({"a": torch.zeros(2), "b": torch.zeros(2, device="meta")})
    ch = xvendor.WeightChannel(_tensors())
    with pytest.raises(ValueError, match="missing \\['w_down'\\]"):
        ch.publish({"w_up": torch.ones(512, 512), "bias": torch.ones(1000)})
    with pytest.raises(TypeError, match="not plain pickle"):
        pickle.dumps(ch)
    with pytest.raises(TimeoutError, match="no version >= 1 within 0.05 s"):
        ch.read(min_version=1, timeout=0.05)


@pytest.mark.l0
def test_single_process_versions_and_failed_update():
    ch = xvendor.WeightChannel(_tensors())
    assert ch.version == 0
    assert ch.publish({k: torch.full(s, 1.0) for k, s in SHAPES.items()}) == 1
    v, out = ch.read(min_version=1)
    assert v == 1 and all(bool((t == 1).all()) for t in out.values())
    with pytest.raises(RuntimeError, match="boom"):
        with ch.update() as shared:
            shared["bias"].fill_(2.0)
            raise RuntimeError("boom")
    with pytest.raises(TimeoutError, match="producer writing"):  # half-written: refused
        ch.read(timeout=0.05)
    assert ch.publish({k: torch.full(s, 3.0) for k, s in SHAPES.items()}) == 2
    assert ch.read(min_version=2)[0] == 2


@pytest.mark.l1
def test_consumers_never_see_a_torn_version_and_a_dead_one_blocks_nothing():
    ctx = mp.get_context("spawn")
    ch = xvendor.WeightChannel(_tensors())
    progress = torch.zeros(3, dtype=torch.int64).share_memory_()
    stop = torch.zeros(1, dtype=torch.int64).share_memory_()
    results, ready = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=consume_and_verify,
                         args=(ch, i, progress, stop, results, f"c{i}", 0, ready)) for i in range(2)]
    doomed = ctx.Process(target=consume_and_verify,
                         args=(ch, 2, progress, stop, results, "doomed", 5, ready))
    for p in procs + [doomed]:
        p.start()
    for _ in range(3):  # every consumer attached (spawn + torch import takes seconds)
        ready.get(timeout=120)
    t0, worst_update = time.monotonic(), 0.0
    # The test's producer runs until both healthy consumers have read 30 versions and the
    # doomed one has died mid-run (the protocol never waits for consumers: this only sizes
    # the run on a loaded machine, where a consumer may be starved for a while).
    while (min(progress[:2].tolist()) < 30 or ch.version < 100 or doomed.is_alive()) \
            and time.monotonic() - t0 < 120:
        v = ch.version + 1
        tu = time.monotonic()
        with ch.update() as shared:  # in place: readers can overlap these writes
            for t in shared.values():
                t.fill_(float(v))
        worst_update = max(worst_update, time.monotonic() - tu)
        time.sleep(0.002)
    stop[0] = ch.version
    for p in procs:
        p.join(timeout=120)
    doomed.join(timeout=60)
    reports = {}
    while not {"c0", "c1"} <= set(reports):
        name, reads, versions, torn, retries, error = results.get(timeout=60)
        reports[name] = (reads, versions, torn, retries, error)
    for name in ("c0", "c1"):
        reads, versions, torn, retries, error = reports[name]
        assert error == "" and torn == 0, reports
        assert reads >= 30 and versions == reads  # each read a distinct, complete version
    assert doomed.exitcode == 17 and "doomed" not in reports  # it died after 5 reads
    assert worst_update < 5.0, f"an update took {worst_update:.2f} s: did a reader block it?"
    print(f"versions={ch.version} reports(reads, versions, torn, retries, error)={reports} "
          f"worst update {worst_update * 1e3:.1f} ms")


ACCEL = [d for d in xvendor.devices.present_devices() if d.type != "cpu"]


@pytest.mark.l2
@pytest.mark.skipif(not ACCEL, reason="no CUDA, ROCm or XPU device: the GPU channel needs one")
def test_gpu_channel_between_processes():
    dev = ACCEL[0]
    ctx = mp.get_context("spawn")
    ch = xvendor.WeightChannel(_tensors(dev))
    results = ctx.Queue()
    p = ctx.Process(target=consume_on_device, args=(ch, 3, results))
    p.start()
    for v in (1, 2, 3):
        ch.publish({k: torch.full(s, float(v), device=dev) for k, s in SHAPES.items()})
    version, means = results.get(timeout=120)
    p.join(timeout=60)
    assert version == 3 and all(m == 3.0 for m in means.values())
