"""tests/port/cuda/shadowed_device_names.cu: an argument naming a local variable that shares
its name with a device function (``const int count = bins.count(b); atomicAdd(p, count)``)
is kept as the variable; only a real device function passed by name (``apply(twice, v)``)
becomes a forwarding lambda. Before, ``count`` was wrapped ('no matching function for call
to atomicAdd')."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_local_names_are_not_wrapped():
    src = build.translate_file(CUDA / "shadowed_device_names.cu").source
    assert "atomicAdd(next + b % 4, count)" in src
    assert "max(scale, 0)" in src
    assert "return twice(xv_a...)" in src


@pytest.mark.l1
def test_reserve_runs(cuda_module):
    m = cuda_module("shadowed_device_names")
    nb = 100
    counts = torch.randint(0, 50, (nb,), dtype=torch.int32)
    nxt = torch.zeros(4, dtype=torch.int32)
    start = torch.full((nb,), -1, dtype=torch.int32)
    scaled = torch.full((nb,), -1, dtype=torch.int32)
    m.reserve[1, 32](counts, nxt, start, scaled, nb)
    for q in range(4):
        assert nxt[q].item() == counts[q::4].sum().item()
    # per counter, the reserved ranges [start, start + count) tile [0, total) without overlap
    for q in range(4):
        s, c = start[q::4].tolist(), counts[q::4].tolist()
        spans = sorted(zip(s, c))
        pos = 0
        for a, n in spans:
            assert a == pos
            pos += n
    assert torch.equal(scaled, counts + 1 + 2 * counts)
