"""A real, tunable CPU GEMM backend for testing the tuning loop without a GPU.

``gemm`` computes C block by block (BM rows x BN columns per torch.mm call), so its config
really changes its speed: tiny blocks pay Python and dispatch overhead per block. The
``scale`` field exists to make a deliberately wrong candidate (scale != 1) that the
correctness gate must reject before it is ever timed.
"""

from __future__ import annotations

import torch

from ..tuning.tuner import Candidate


def blocked_gemm(a, b, bias=None, out_dtype=None, *, block_m=64, block_n=64, scale=1.0):
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32)
    af, bf = a.float(), b.float()
    for i in range(0, a.shape[0], block_m):
        for j in range(0, b.shape[1], block_n):
            out[i:i + block_m, j:j + block_n] = af[i:i + block_m] @ bf[:, j:j + block_n]
    if bias is not None:
        out += bias.float()
    return (out * scale).to(out_dtype or a.dtype)


class _Tunable:
    SPACE = [(16, 16), (32, 32), (64, 64), (128, 128), (256, 256), (64, 256), (256, 64)]

    def candidates(self, op, info, key):
        cands = [Candidate(f"{m}x{n}", {"block_m": m, "block_n": n, "block_k": 32})
                 for m, n in self.SPACE]
        cands.append(Candidate("128x128_wrong", {"block_m": 128, "block_n": 128, "block_k": 32,
                                                 "scale": 1.5}))
        return cands

    def run(self, op, config, args):
        a, b, bias, out_dtype = args
        return blocked_gemm(a, b, bias, out_dtype, block_m=config["block_m"],
                            block_n=config["block_n"], scale=config.get("scale", 1.0))


TUNABLE = _Tunable()
KERNELS = {"gemm": lambda a, b, bias=None, out_dtype=None: blocked_gemm(a, b, bias, out_dtype)}


def backend_record():
    """This module as a CPU backend (``xvendor.register(backend_record())``), tunable."""
    from ..registry import Backend
    return Backend(name="cpublocked", module=__name__, ops={"gemm"}, device_types={"cpu"},
                   tunable=f"{__name__}:TUNABLE")
