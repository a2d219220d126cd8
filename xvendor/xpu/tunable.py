"""xvendor.tuning's view of the ``sycl`` backend (``xvendor.xpu.backend``): the tile space
of its gemm and grouped GEMM, and the call that times a tile exactly as it is served."""

from __future__ import annotations

from typing import NamedTuple

from .backend import KERNELS


class _Candidate(NamedTuple):
    """What xvendor.tuning reads from a candidate (its ``Candidate`` by shape): defined here
    because this module sits below the tuner and must not import it."""

    name: str
    config: dict
    record: dict | None = None


class _Tunable:
    """xvendor.tuning's view of the SYCL gemm and grouped GEMM (both use gemm_tile.h): tile
    shapes around the swept default. ``run`` is the serving call itself (``config=``), so a
    tile is timed exactly as it will be served."""

    SPACE = [(16, 16, 4, 4, 64), (16, 16, 4, 4, 32), (16, 16, 2, 4, 64), (8, 16, 4, 4, 64),
             (16, 8, 4, 4, 64), (8, 8, 4, 4, 64), (16, 16, 4, 2, 64), (8, 16, 2, 4, 32)]
    default_name = "wg16x16_r4x4_k64"

    def candidates(self, op, info, key):
        return [_Candidate(f"wg{wm}x{wn}_r{rm}x{rn}_k{bk}",
                           {"WM": wm, "WN": wn, "RM": rm, "RN": rn, "BK": bk,
                            "block_m": wm * rm, "block_n": wn * rn, "block_k": bk})
                for wm, wn, rm, rn, bk in self.SPACE]

    def run(self, op, config, args):
        return KERNELS[op](*args, config=config)


TUNABLE = _Tunable()
