"""Which group and tile a workgroup computes, and the bounded operand views it reads.

Shared by the gfx950 and gfx1250 templates. ``tile_of`` and ``view_bounds`` are plain
Python with one source and two interpretations: the kernels call them at trace time on
FlyDSL values (``traced(tile_of)``: FlyDSL rewrites their ``for``/``if`` on runtime values
into scf.for/scf.if), and tests/rocm/test_layout_proofs.py runs the very same functions on
Python ints with the launch arguments ``xvendor.rocm.launch`` computes. So the proof there
(every output tile written exactly once, no tile across a group boundary, nothing past
``offs[-1]``, idle programs past the last tile, stores masked to C's N columns) is about the
code the kernels execute, not about a twin of it. ``columns_left`` and ``k_left`` are the
tail bounds the kernels mask with (plain arithmetic, shared the same way). They must stay
inside what both interpretations accept: ``+ - * // %``, comparisons, ``&``, ``for`` over
``range``, ``if``/``else`` and conditional expressions; no break, continue or return inside
a loop or branch (FlyDSL turns their bodies into functions), and a variable assigned under
any ``if`` (one on a Python constant too) or ``for`` and used after it must be bound before
it, with the type it will have.

NOTE [group views]: a workgroup sees its group through views whose base is the group's
first element and whose buffer size ends where the group ends. Loads past the end read 0
and stores past it are dropped, so a tile never reads or writes across a group boundary.

Templates (``mode``): ``gemm``; ``2Dx3D`` (ragged M: rows offs[g-1]:offs[g] use B[g]);
``2Dx2D`` (ragged K: out[g] = A[:, Kg] @ B[Kg, :]); ``3Dx3D`` (batched).
"""

from __future__ import annotations

import functools
import types


def tile_of(mode, bid, M, K, G, Offs, tiles_m, tiles_n, block_m):
    """(valid, g, pid_m, pid_n, row0, rows, k0, kn) of workgroup ``bid``.

    The workgroup computes C tile (pid_m, pid_n) of group g's view: rows row0 .. row0+rows
    of the group's C (and A), K range k0 .. k0+kn. ``valid`` is false for programs with no
    tile; everything else is meaningless then. gemm runs as one group (G = 1).
    Ragged M (2Dx3D): group g has ceil(rows_g / block_m) row tiles; row tile t belongs to
    the group whose cumulative tile range holds it, and the launch has room for one partial
    tile per group on top of ceil(M / block_m).
    """
    g = 0
    pid_m = 0
    pid_n = 0
    row0 = 0
    rows = M
    k0 = 0
    kn = K
    valid = bid < ((tiles_m + G) * tiles_n if mode == "2Dx3D" else G * tiles_m * tiles_n)
    if valid:  # every division below is by a count the check above proved non-zero
        pid_n = bid % tiles_n
        t = bid // tiles_n
        if mode == "2Dx3D":
            g = -1
            start = 0
            before = 0
            for gi in range(G):
                end = Offs[gi]
                n_t = (end - start + (block_m - 1)) // block_m
                if (t >= before) & (t < before + n_t):
                    g = gi
                    row0 = start + (t - before) * block_m
                    rows = end - row0
                before = before + n_t
                start = end
            valid = g >= 0
        else:
            g = t // tiles_m
            pid_m = t % tiles_m
            if mode == "2Dx2D":  # no load under a branch: that took gfx1250 from 185 to 247 VGPRs
                k0 = Offs[g - 1 if g > 0 else 0]
                if g == 0:
                    k0 = 0
                kn = Offs[g] - k0
    return valid, g, pid_m, pid_n, row0, rows, k0, kn


def view_bounds(g, row0, rows, k0, kn, N, lda, ldb, ldc, sag, sbg, scg, sbiasg,
                a_k_major: bool, b_k_major: bool, c_col_major: bool = False):
    """{operand: (offset, shape, stride, elements)} of group g's views (element units).

    ``elements`` is what the buffer descriptor holds: an access at or past it is dropped
    (store) or reads 0 (load); gfx1250's A and B go through the Tensor Data Mover, which
    bounds by ``shape`` instead. A (rows, kn), B (N, kn), C (rows, ldc), bias (rows, ldc)
    broadcast along rows; the operand's base is at ``offset`` from its tensor's start.
    ``c_col_major`` (3Dx2D, which writes the caller's output as the transpose of its own
    C): C (rows, N) with rows contiguous, columns ``ldc`` apart. Its descriptor ends after
    the last column, so rows past the group's end are not dropped by it there: the
    epilogue predicates rows too (``rows_left``), for both C majors.
    """
    if a_k_major:
        a = (g * sag + row0 * lda + k0, (rows, kn), (lda, 1), rows * lda)
    else:
        a = (g * sag + k0 * lda + row0, (rows, kn), (1, lda), kn * lda)
    if b_k_major:
        b = (g * sbg + k0, (N, kn), (ldb, 1), N * ldb)
    else:
        b = (g * sbg + k0 * ldb, (N, kn), (1, ldb), kn * ldb)
    if c_col_major:
        c = (g * scg + row0, (rows, N), (1, ldc), (N - 1) * ldc + rows)  # N > 0: tiles exist
    else:
        c = (g * scg + row0 * ldc, (rows, ldc), (ldc, 1), rows * ldc)
    bias = (g * sbiasg, (rows, ldc), (0, 1), N)
    return {"A": a, "B": b, "C": c, "Bias": bias}


def columns_left(N, pid_n, block_n):
    """Columns of tile column ``pid_n`` inside C: the epilogue stores tile column c only
    when c < this (NOTE [N tail] in ``xvendor.rocm.gemm_gfx950``). C rows are N long, with
    no padding, so a column past N would be the next row's."""
    return N - pid_n * block_n


def rows_left(rows, pid_m, block_m):
    """Rows of tile row ``pid_m`` inside the group's view: the epilogue stores tile row r
    only when r < this (both C majors; row-major C's descriptor drops them as well)."""
    return rows - pid_m * block_m


def k_left(kn, k_tile, block_k):
    """K indices of K tile ``k_tile`` inside the group's K range: a K-major operand's loaded
    values at tile K index >= this are zeroed (NOTE [K tail] in ``xvendor.rocm.gemm_gfx950``)."""
    return kn - k_tile * block_k


@functools.cache
def traced(fn):
    """``fn`` as the kernels call it: FlyDSL-rewritten (runtime ``for``/``if`` to scf).

    FlyDSL rewrites only a kernel's own body; a ``@flyc.jit`` function called while a
    kernel is being traced is inlined with the same rewriting. The rewrite replaces a
    function's code in place, so it gets a copy: ``fn`` itself stays plain Python for the
    host and the proofs (FlyDSL does add its dispatch helpers to this module's globals).
    """
    import flydsl.compiler as flyc
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    twin.__qualname__, twin.__module__ = fn.__qualname__, fn.__module__
    return flyc.jit(twin)


def operand_views(fx, A, B, C, Bias, g, row0, rows, k0, kn, N, lda, ldb, ldc,
                  sag, sbg, scg, sbiasg, a_k_major: bool, b_k_major: bool, has_bias: bool,
                  tdm: bool = False, c_col_major: bool = False):
    """Bounded views (A (rows, kn), B (N, kn), C^T (ldc, rows), bias^T) of one group.

    C and bias are viewed transposed, (N, rows) with N contiguous: the kernels compute C^T
    (NOTE [C transposed] in ``xvendor.rocm.gemm_gfx950``); the elements and the buffer
    bounds are ``view_bounds``' (the same memory, the modes swapped).
    ``tdm``: A and B are plain views (the Tensor Data Mover takes a raw address and bounds
    each tile by the view's shape); otherwise all four are buffer views bounded by size.
    """
    Int64 = fx.Int64
    bounds = view_bounds(g, row0, rows, k0, kn, N, lda, ldb, ldc, sag, sbg, scg, sbiasg,
                         a_k_major, b_k_major, c_col_major)

    def bounded(t, name, operand=False):
        offset, shape, stride, n_elems = bounds[name]
        if not operand:  # C and bias: transposed
            shape, stride = shape[::-1], stride[::-1]
        view = fx.make_view(fx.add_offset(fx.get_iter(t), offset), fx.make_layout(shape, stride))
        if tdm and operand:
            return view
        nbytes = Int64(n_elems) * (t.element_type.width // 8)
        return fx.rocdl.make_buffer_tensor(view, num_records_bytes=nbytes)

    gA, gB, gC = bounded(A, "A", True), bounded(B, "B", True), bounded(C, "C")
    return gA, gB, gC, bounded(Bias, "Bias") if has_bias else None


def flat_modes(shape, stride) -> list[tuple]:
    """The (size, stride) of every leaf mode of a static (nested) layout, in order."""
    if isinstance(shape, tuple):
        return [m for sh, st in zip(shape, stride) for m in flat_modes(sh, st)]
    return [(shape, stride)]


def layout_offsets(shape, stride) -> list[int]:
    """Offsets of every value of a static layout, in its value order (colexicographic).
    Used at trace time on a partition's static layout (``gemm_gfx1250`` transposing reads)
    and by the layout proofs on the templates' layouts."""
    offs = [0]
    for size, st in flat_modes(shape, stride):
        offs = [o + i * st for i in range(size) for o in offs]
    return offs
