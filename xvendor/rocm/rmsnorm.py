"""FlyDSL RMSNorm forward for gfx950 (MI355X, wave64) and gfx1250 (MI450, wave32).

Math (``xvendor.rms_norm`` over the last dim): ``y = x * rsqrt(mean(x^2) + eps) * weight``,
fp32 accumulation, one rounding to x's dtype; weight has x's dtype or fp32, or is absent.

Work split (``NormConfig``: ``vec`` elements per load, ``rows`` per workgroup, ``waves``
per workgroup): with ``rows == 1`` all ``waves`` waves share one row and their partial
sums meet in LDS (one fp32 per wave); with ``rows == waves`` each wave owns one row and
reduces with lane shuffles only (no LDS, no barrier): the form for rows too short to feed
a whole workgroup. A row is walked in chunks of ``lanes * vec`` elements, two passes: the
sum of squares, then scale and store (the second read of x is the workgroup's own row,
a few KiB just read: it comes from cache, so HBM sees x once).

Shapes are runtime values (``rows``, ``hidden``): one code object serves every hidden
size. The arch differs only in the wave size (the same source compiles to
``buffer_load_dwordx4`` on gfx950 and ``buffer_load_b128`` on gfx1250 for 16-byte loads).

NOTE [row masking]: no branch and no host padding masks the tail. Each row is seen
through two buffer descriptors: the vector one ends at the row's last whole vector
(``hidden // vec * vec`` elements), the scalar one at the row's end. Vector accesses of a
chunk past the end are then wholly out of range (loads read 0, stores are dropped: the
hardware's bounds check, per access, in bytes), and the ``hidden % vec`` tail elements are
one scalar access per lane at ``hidden // vec * vec + lane`` through the scalar
descriptor, in range only for lanes below the tail length. A row past ``rows`` (the last
workgroup of the several-rows form) gets descriptors of 0 bytes: it reads zeros and
writes nothing. So no vector straddles a bound, where the hardware's partial-vector
behaviour would matter. When ``hidden % vec != 0`` the rows after the first start off the
16-byte alignment: the vector accesses then rely on ROCm's unaligned buffer access mode,
unverified here, which is why ``ragged`` is its own gate verdict (``specialization``).
Proven on the CPU in tests/rocm/test_rmsnorm.py with the same index functions (``row_of``,
``n_chunks``, ``chunk_index``, ``tail_index``, ``bounds``) and vector layout
(``vector_layout``, evaluated by FlyDSL) the kernel uses.

NOTE [unverified numerics]: compiled to real gfx950/gfx1250 code objects on a CPU
(tests/rocm/test_rmsnorm.py); never run. Numerics are unverified until they run on the
hardware; the correctness gate checks each specialization there on first use.
"""

from __future__ import annotations

import torch

from . import launch as _launch

WAVE = {"gfx950": 64, "gfx1250": 32}
_DT = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
_BITS = {"bf16": 16, "fp16": 16, "fp32": 32}
_MAX_ELEMS = 2**31 // 4  # row offsets are int32 element counts, descriptors 32-bit bytes
# The launcher's positional parameters, in order.
ARGS = ("X", "W", "Y", "rows", "hidden", "eps", "grid")


# -- index functions: the kernel calls them on FlyDSL values, the proofs on ints --------

def row_of(bid, tid, rows_per_wg, lanes):
    """(row, lane) of thread ``tid`` in workgroup ``bid``: ``lanes`` threads per row."""
    return bid * rows_per_wg + tid // lanes, tid % lanes


def chunk_index(c, lane, lanes):
    """The vector (in units of ``vec`` elements) lane ``lane`` accesses in chunk ``c``."""
    return c * lanes + lane


def tail_index(hidden, lane, vec):
    """The element lane ``lane`` accesses in the tail (in range iff lane < hidden % vec)."""
    return hidden // vec * vec + lane


def vector_layout(fx, n_vectors, piece):
    """(piece, n_vectors) layout of a row: ``view[None, i]`` is elements i*piece .. +piece.
    ``n_vectors`` covers every index the chunks reach (past the row: out of bounds)."""
    return fx.make_layout((piece, n_vectors), (1, piece))


def n_chunks(hidden, vec, lanes):
    """Chunks of ``lanes`` vectors that cover a row's whole vectors."""
    return (hidden // vec + (lanes - 1)) // lanes


def bounds(row, rows, hidden, vec):
    """(vector descriptor, scalar descriptor) sizes of ``row``, in elements."""
    n = hidden if row < rows else 0
    return n // vec * vec, n


# -- host side -----------------------------------------------------------------------

def lanes_per_row(arch: str, cfg) -> int:
    threads = cfg.waves * WAVE[arch]
    return threads if cfg.rows == 1 else WAVE[arch]


def lds_bytes(cfg) -> int:
    """LDS the launch requests: one fp32 partial sum per wave when waves share a row."""
    return 4 * cfg.waves if cfg.rows == 1 and cfg.waves > 1 else 0


def specialization(args: tuple, cfg) -> tuple[str, dict]:
    """(template, build() keywords) of a call ``(x, weight, eps)``: dtypes, has-weight and
    whether rows are ragged (``hidden % vec``: the tail path runs and rows start off the
    vector alignment). ``ragged`` does not change the code; it splits the gate's verdicts,
    so a check on aligned rows never vouches for ragged ones.

    Raises ValueError (the registry falls back to aten) for what the kernel does not do."""
    x, weight = (tuple(args) + (None, None))[:2]
    if x.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"xvendor flydsl rms_norm: x dtype {x.dtype} is not bf16 or fp16 "
                         "(vec counts 16-bit elements: 16-byte loads at vec 8)")
    if weight is not None and weight.dim() != 1:
        raise ValueError("xvendor flydsl rms_norm: weight must be 1-D over x's last dim "
                         f"(normalising over {weight.dim()} dims is left to aten)")
    wd = _DT[x.dtype] if weight is None else _DT.get(weight.dtype)
    if wd is None:
        raise ValueError(f"xvendor flydsl rms_norm: weight dtype {weight.dtype} is not "
                         "x's dtype or fp32")
    return "rms_norm", {"dtype": _DT[x.dtype], "w_dtype": wd, "has_weight": weight is not None,
                        "ragged": x.shape[-1] % cfg.vec != 0}


def plan(x, weight, eps, cfg) -> _launch.Launch:
    """The launch of one call: x viewed as (rows, hidden) with rows = x.numel() / hidden."""
    template, spec = specialization((x, weight), cfg)
    hidden = x.shape[-1]
    rows = x.numel() // hidden if hidden else 0
    if x.numel() >= _MAX_ELEMS:
        raise ValueError(f"xvendor flydsl rms_norm: x has {x.numel()} elements; the kernel "
                         f"indexes rows with 32-bit offsets (under {_MAX_ELEMS})")
    x2 = x.reshape(rows, hidden)
    if not x2.is_contiguous() or x2.data_ptr() % 16:
        x2 = x2.contiguous()  # vector loads need contiguous, 16-byte aligned rows
    y = torch.empty((rows, hidden), dtype=x.dtype, device=x.device)
    w = weight.contiguous() if weight is not None else \
        torch.zeros(8, dtype=x.dtype, device=x.device)  # never read: has_weight is False
    if w.data_ptr() % 16:
        w = w.clone()  # an offset view: its vector loads would start misaligned
    eps = float(torch.finfo(x.dtype).eps if eps is None else eps)
    grid = -(-rows // cfg.rows)
    args = (x2, w, y, rows, hidden, eps, max(grid, 1))

    def result():
        return y.view(x.shape)
    return _launch.Launch(template, spec, args, result)


# -- the kernel ------------------------------------------------------------------------

def vector_instrs(arch: str, nbytes: int) -> tuple[str, str]:
    """(load, store) instruction names of an ``nbytes`` buffer access (FlyDSL 0.3.4.1)."""
    if arch == "gfx950":
        return {16: ("buffer_load_dwordx4", "buffer_store_dwordx4"),
                8: ("buffer_load_dwordx2", "buffer_store_dwordx2"),
                4: ("buffer_load_dword", "buffer_store_dword"),
                2: ("buffer_load_ushort", "buffer_store_short")}[nbytes]
    return (f"buffer_load_{'u16' if nbytes == 2 else f'b{8 * nbytes}'}",
            f"buffer_store_b{8 * nbytes}")


def build(cfg, *, arch: str, dtype: str, w_dtype: str, has_weight: bool, ragged: bool = False):
    """The ``@flyc.jit`` launcher of one specialization: (launch, LDS bytes, threads).

    ``ragged`` is part of the key only (see ``specialization``): the code is the same."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import gpu, math as fmath, range_constexpr

    if arch not in WAVE:
        raise KeyError(f"FlyDSL rms_norm targets {sorted(WAVE)}, not {arch!r}")
    types = {"bf16": fx.BFloat16, "fp16": fx.Float16, "fp32": fx.Float32}
    T, TW = types[dtype], types[w_dtype]
    wave = WAVE[arch]
    VEC, R, NW = cfg.vec, cfg.rows, cfg.waves
    threads = NW * wave
    lanes = lanes_per_row(arch, cfg)
    smem = lds_bytes(cfg)
    xbits = _BITS[dtype]
    # an fp32 weight vector of VEC elements may exceed one 16-byte load: split it
    w_piece = min(VEC, 128 // _BITS[w_dtype])
    w_pieces = VEC // w_piece
    idx_row, idx_chunk, idx_tail, idx_bounds, idx_chunks = (
        traced_fn(f) for f in (row_of, chunk_index, tail_index, bounds, n_chunks))

    def row_views(t, row, hidden, nvec, n, dt, piece, chunks):
        """(vector view (piece, ·), scalar view) of one row, bounded per NOTE [row masking]."""
        base = fx.add_offset(fx.get_iter(t), row * hidden)
        nbytes = dt.width // 8
        vview = fx.make_view(base, vector_layout(fx, chunks * lanes * (VEC // piece), piece))
        sview = fx.make_view(base, fx.make_layout(hidden + 1, 1))
        return (fx.rocdl.make_buffer_tensor(vview, num_records_bytes=fx.Int64(nvec) * nbytes),
                fx.rocdl.make_buffer_tensor(sview, num_records_bytes=fx.Int64(n) * nbytes))

    # Plain helpers (FlyDSL rewrites only the kernel's own body): their Python ``if``s on
    # build-time constants choose code, never a runtime branch.
    def row_sum(acc, tid):
        """Sum of ``acc`` over the lanes of a row: shuffles, then LDS across waves."""
        for i in range_constexpr(wave.bit_length() - 1):
            acc = acc + gpu.shuffle_xor(acc, wave >> (i + 1), wave)
        if not smem:
            return acc
        sbase = fx.recast_iter(fx.PointerType.get(fx.Float32.ir_type, fx.AddressSpace.Shared, 16),
                               fx.get_dyn_shared())
        red = fx.make_view(sbase, fx.make_layout(NW, 1))
        # every lane holds its wave's sum: all store the same value (no branch needed)
        red[tid // wave] = acc
        gpu.barrier()
        total = red[0]
        for i in range_constexpr(1, NW):
            total = total + red[i]
        return total

    def load_vec(atom, view, idx, dt, n_elems):
        r = fx.make_rmem_tensor(n_elems, dt)
        fx.copy_atom_call(atom, view[None, idx], r)
        return r.load()

    def load_weight(w_atom, wv, idx):
        """The VEC weights of vector ``idx`` as fp32 (in 16-byte or smaller pieces)."""
        r = fx.make_rmem_tensor(VEC, TW)
        parts = fx.logical_divide(r, fx.make_layout(w_piece, 1))
        for p in range_constexpr(w_pieces):
            fx.copy_atom_call(w_atom, wv[None, idx * w_pieces + p], parts[None, p])
        return r.load().to(fx.Float32)

    def weight_views(w, hidden, chunks):
        if not has_weight:
            return None, None
        return row_views(w, 0, hidden, hidden // VEC * VEC, hidden, TW, w_piece, chunks)

    def scale_vec(y, w_atom, wv, idx):
        return y * load_weight(w_atom, wv, idx) if has_weight else y

    def scale_tail(y, ws, tail):
        return y * ws[tail].to(fx.Float32) if has_weight else y

    def atoms():
        """The copy atoms (built while tracing: they need the MLIR context)."""
        return (fx.make_copy_atom(fx.rocdl.BufferCopy(VEC * xbits), T),
                fx.make_copy_atom(fx.rocdl.BufferCopy(w_piece * _BITS[w_dtype]), TW))

    @flyc.kernel
    def kernel(X: fx.Tensor, W: fx.Tensor, Y: fx.Tensor, rows: fx.Int32, hidden: fx.Int32,
               eps: fx.Float32):
        tid = fx.thread_idx.x
        bid = fx.block_idx.x
        x_atom, w_atom = atoms()
        row, lane = idx_row(bid, tid, R, lanes)
        nvec, n = idx_bounds(row, rows, hidden, VEC)
        chunks = idx_chunks(hidden, VEC, lanes)
        xv, xs = row_views(X, row, hidden, nvec, n, T, VEC, chunks)
        yv, ys = row_views(Y, row, hidden, nvec, n, T, VEC, chunks)
        tail = idx_tail(hidden, lane, VEC)

        acc = fx.Float32(0.0)
        for c in range(chunks):
            x = load_vec(x_atom, xv, idx_chunk(c, lane, lanes), T, VEC).to(fx.Float32)
            for i in range_constexpr(VEC):
                acc = acc + x[i] * x[i]
        tx = xs[tail].to(fx.Float32)  # 0 unless lane < hidden % VEC
        acc = acc + tx * tx

        total = row_sum(acc, tid)
        rinv = fmath.rsqrt(total / fx.Float32(hidden) + eps, fastmath="fast")

        wv, ws = weight_views(W, hidden, chunks)
        for c in range(chunks):
            idx = idx_chunk(c, lane, lanes)
            y = scale_vec(load_vec(x_atom, xv, idx, T, VEC).to(fx.Float32) * rinv, w_atom, wv,
                          idx)
            r = fx.make_rmem_tensor(VEC, T)
            r.store(y.to(T))
            fx.copy_atom_call(x_atom, r, yv[None, idx])
        ys[tail] = scale_tail(tx * rinv, ws, tail).to(T)  # dropped unless lane < hidden % VEC

    @flyc.jit
    def launch(X: fx.Tensor, W: fx.Tensor, Y: fx.Tensor, rows: fx.Int32, hidden: fx.Int32,
               eps: fx.Float32, grid: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        kernel(X, W, Y, rows, hidden, eps).launch(grid=(grid, 1, 1), block=(threads, 1, 1),
                                                  smem=smem, stream=stream)

    return launch, smem, threads


def traced_fn(fn):
    from .tiling import traced
    return traced(fn)
