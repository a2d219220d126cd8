"""xvendor.MemPool: presets and errors (l0); policies and stats on a GPU (l2)."""

import pytest
import torch

import xvendor
from xvendor import mempool

ACCEL = [d for d in xvendor.devices.present_devices() if d.type != "cpu"]


@pytest.mark.l0
def test_presets_are_data():
    assert mempool.PRESETS["symmetric"].no_split and not mempool.PRESETS["symmetric"].use_on_oom
    assert mempool.PRESETS["oom_reserve"].use_on_oom and not mempool.PRESETS["oom_reserve"].no_split
    assert not any((mempool.PRESETS["default"].no_split, mempool.PRESETS["default"].use_on_oom))


@pytest.mark.l0
def test_errors_name_the_rule():
    with pytest.raises(ValueError, match="device must be cuda or xpu, got 'cpu'"):
        xvendor.MemPool("cpu")
    with pytest.raises(ValueError, match="unknown preset 'huge'.*oom_reserve"):
        xvendor.MemPool.preset("huge", "cuda")
    with pytest.raises(TypeError, match="no_split must be a bool"):
        xvendor.MemPool("cuda", no_split="yes")
    with pytest.raises(TypeError, match="pool must be an xvendor.MemPool"):
        with xvendor.use_mem_pool(object()):
            pass


@pytest.mark.l0
@pytest.mark.skipif(bool(ACCEL), reason="this machine has an accelerator")
def test_no_device_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no cuda device is available"):
        xvendor.MemPool("cuda")


@pytest.mark.l2
@pytest.mark.skipif(not ACCEL, reason="no CUDA, ROCm or XPU device: allocator pools need one")
@pytest.mark.parametrize("preset", sorted(mempool.PRESETS))
def test_pool_allocations_show_in_its_stats(preset):
    pool = xvendor.MemPool.preset(preset, ACCEL[0])
    assert pool.stats()["reserved_bytes"] == 0
    with xvendor.use_mem_pool(pool):
        x = torch.empty(8 << 20, dtype=torch.uint8, device=ACCEL[0])
    stats = pool.stats()
    assert stats["reserved_bytes"] >= 8 << 20 and stats["allocated_bytes"] >= 8 << 20
    assert stats["policy"] == preset
    del x
