"""xvendor.Event: error paths and the IPC gate (l0); the IPC round trip on a GPU (l2)."""

import pickle

import pytest
import torch
import torch.multiprocessing as mp

import xvendor
from xvendor import events
from xvendor.testing.ipc_workers import wait_then_sum

ACCEL = [d for d in xvendor.devices.present_devices() if d.type != "cpu"]


@pytest.mark.l0
def test_cpu_has_no_events():
    with pytest.raises(ValueError, match="device must be an accelerator"):
        xvendor.Event("cpu")


@pytest.mark.l0
def test_timing_and_interprocess_exclude_each_other():
    with pytest.raises(ValueError, match="timing events cannot be shared"):
        xvendor.Event("cuda", interprocess=True, enable_timing=True)


@pytest.mark.l0
def test_unsupported_device_type():
    with pytest.raises(ValueError, match="device type 'meta' is not supported"):
        xvendor.Event("meta")


@pytest.mark.l0
@pytest.mark.parametrize("kw,match", [
    (dict(device_type="xpu", xpu_version="20250100", has_xpu_ipc=True), "oneAPI 2026.2 or newer"),
    (dict(device_type="xpu", xpu_version=None, has_xpu_ipc=False), "needs torch 2.15 or newer"),
    (dict(device_type="xpu", xpu_version="", has_xpu_ipc=True), "no XPU support"),
    (dict(device_type="cuda", platform="win32"), "need Linux"),
    (dict(device_type="mps"), "no interprocess events for device type 'mps'"),
])
def test_ipc_gate_reasons(kw, match):
    assert match in events.ipc_problem(**kw)


@pytest.mark.l0
def test_ipc_gate_accepts_new_enough_runtimes():
    assert events.ipc_problem("xpu", xpu_version="20260200", has_xpu_ipc=True, platform="linux") is None
    assert events.ipc_problem("cuda", platform="linux") is None


@pytest.mark.l0
def test_plain_pickle_is_refused_but_forking_pickler_has_a_reduction():
    ev = object.__new__(xvendor.Event)  # no device here: test the pickling rules only
    ev.interprocess, ev.device = False, torch.device("cuda", 0)
    with pytest.raises(TypeError, match="cannot be pickled with plain pickle"):
        pickle.dumps(ev)
    from multiprocessing.reduction import ForkingPickler
    assert ForkingPickler._extra_reducers[xvendor.Event] is events._reduce_event
    with pytest.raises(TypeError, match="only events created with interprocess=True"):
        events._reduce_event(ev)


@pytest.mark.l2
@pytest.mark.skipif(not ACCEL, reason="no CUDA, ROCm or XPU device: event IPC needs one")
def test_event_travels_through_a_queue_and_orders_the_consumer():
    dev = ACCEL[0]
    if events.ipc_problem(dev.type):
        pytest.skip(events.ipc_problem(dev.type))
    ctx = mp.get_context("spawn")
    ev = xvendor.Event(dev, interprocess=True)
    buf = torch.zeros(1 << 20, device=dev)
    results = ctx.Queue()
    p = ctx.Process(target=wait_then_sum, args=(ev, buf, results))
    buf.fill_(1.0)
    ev.record()
    p.start()
    assert results.get(timeout=120) == float(1 << 20)
    p.join(timeout=60)
