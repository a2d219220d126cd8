"""tests/port/cuda/macro_tables.cu: file-scope tables spelled through a macro that has a
device-code definition and a host one (the host one last) are device code: kept in the
SYCL source, and the kernel reads their values."""

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA


@pytest.mark.l0
def test_macro_tables_are_kept():
    t = build.translate_file(CUDA / "macro_tables.cu")
    assert t.report("table_lookup").status == "ok"
    assert "TABLE_BEGIN(uint32_t, grid, 4)" in t.source and "TABLE_BEGIN(int8_t, kvalues, 4)" in t.source


@pytest.mark.l1
def test_macro_tables_read(cuda_module):
    m = cuda_module("macro_tables")
    idx = torch.tensor([3, 0, 2, 1, 1], dtype=torch.int32)
    y = torch.full((5,), -1, dtype=torch.int64)
    m.table_lookup[1, 32](idx, y, 5)
    grid = torch.tensor([0x01010101, 0x02020202, 0x03030303, 0x04040404])
    kv = torch.tensor([-127, -10, 1, 13])
    assert torch.equal(y, grid[idx.long()] + kv[idx.long()])
