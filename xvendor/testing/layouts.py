"""Evaluating FlyDSL layouts on the CPU, for layout proofs (tests/rocm).

A proof counts which tile coordinates a partition holds, for every thread of a workgroup;
asking FlyDSL for each value is ~100x slower than reading the partition's static layout
once and expanding it in Python, which ``partition_coords`` does (cross-checking a few values with
FlyDSL). Offsets of a plain layout: ``xvendor.rocm.tiling.layout_offsets``.
"""

from __future__ import annotations

from xvendor.rocm.tiling import flat_modes


def partition_coords(t, rank: int = 2) -> list[tuple]:
    """The coordinates an identity-tensor partition ``t`` holds, in its value order.

    Its first value is evaluated by FlyDSL; the others come from its layout (shape and
    basis strides ``vE<mode>``, as FlyDSL returns them); the second and the last are
    checked against FlyDSL's own evaluation.
    """
    import flydsl.expr as fx
    layout = fx.get_layout(t)
    base = tuple(t[0].to_py_value())
    steps = [[0] * rank]
    for size, stride in flat_modes(layout.shape.to_py_value(), layout.stride.to_py_value()):
        d = [0] * rank
        if not isinstance(stride, int):
            d[stride.modes[0]] = stride.value
        else:
            assert stride == 0
        steps = [[o[j] + i * d[j] for j in range(rank)] for i in range(size) for o in steps]
    out = [tuple(b + o for b, o in zip(base, off)) for off in steps]
    for i in (1, len(out) - 1):
        assert tuple(t[i].to_py_value()) == out[i]
    return out



def store_coverage(tiled, threads: int, rows: int, cols: int, vec: int):
    """A Counter of how often each (row, col) of a (rows, cols) tile is written by the store
    copy ``tiled`` over ``threads`` threads, asserting that every store (``vec`` values) is
    ``vec`` consecutive rows at one col, starting at a multiple of ``vec``: what an aligned
    vector access, guarded by one predicate on its first value, needs."""
    from collections import Counter

    import flydsl.expr as fx

    from xvendor.rocm.gemm_gfx950 import tile_coords  # the coordinates the kernels mask by
    seen = Counter()
    for tid in range(threads):
        coords = partition_coords(tile_coords(fx, tiled.get_slice(tid), rows, cols))
        for i in range(0, len(coords), vec):
            r0, c0 = coords[i]
            assert r0 % vec == 0 and coords[i:i + vec] == [(r0 + j, c0) for j in range(vec)], \
                (tid, coords[i:i + vec])
        seen.update(coords)
    return seen
