"""The porter's reference for tests/port/cuda/reductions.cu (used by `--check` in
test_cli.py): float64 torch, fresh random inputs, sizes off the block multiples."""

import torch

from xvendor.port.verify import Case

ROWS, COLS = 11, 777

REFERENCE = {
    "row_sum_shfl": lambda x, out, cols: x.double().sum(1),
    "softmax_dyn_smem": lambda x, y, cols: torch.softmax(x.double(), 1),
}

CASES = [
    Case("row_sum_shfl", make=lambda: (torch.randn(ROWS, COLS), torch.empty(ROWS), COLS),
         outputs=(1,), grid=lambda block: ROWS, blocks=(32, 96, 256, 1024), atol=1e-3),
    Case("softmax_dyn_smem", make=lambda: (torch.randn(ROWS, COLS), torch.empty(ROWS, COLS), COLS),
         outputs=(1,), grid=lambda block: ROWS, shared_bytes=lambda block: COLS * 4,
         blocks=(32, 64, 128), atol=1e-6),
]
