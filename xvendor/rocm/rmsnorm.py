"""FlyDSL RMSNorm for gfx950 (MI355X, wave64) and gfx1250 (MI450, wave32): forward, the
fused residual forward, and backward (dx and dweight).

Math (``xvendor.rms_norm`` over the last dim): ``y = x * rsqrt(mean(x^2) + eps) * weight``,
fp32 accumulation, one rounding to x's dtype; weight has x's dtype or fp32, or is absent.
Forward x is bf16/fp16; backward also takes fp32 (NOTE [rms_norm backward] below).

NOTE [fused residual]: with ``residual`` the forward computes ``h = x + residual`` (rounded
to x's dtype once, as torch's ``x + residual``), writes h, and normalises h: one pass
returns both, as inference and training stacks fuse the residual add. The second pass
reads h back from the lane's own stores (program order on the same addresses).

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

``RowKernel`` holds the trace-time pieces the forward, the backward and the topk kernels
(``xvendor.rocm.topk``) share: bounded row views, vector loads/stores in 16-byte pieces,
the row reduction.

NOTE [unverified numerics]: compiled to real gfx950/gfx1250 code objects on a CPU
(tests/rocm/test_rmsnorm.py); never run. Numerics are unverified until they run on the
hardware; the correctness gate checks each specialization there on first use.
"""

from __future__ import annotations

import torch

from ..numerics import rms_norm_eps
from . import launch as _launch
from .configs import WAVE
_DT = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
_BITS = {"bf16": 16, "fp16": 16, "fp32": 32}
_MAX_ELEMS = 2**31 // 4  # row offsets are int32 element counts, descriptors 32-bit bytes
# The launcher's positional parameters, in order.
ARGS = ("X", "R", "W", "Y", "H", "rows", "hidden", "eps", "grid")


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


def specialization(args: tuple, cfg, residual=None) -> tuple[str, dict]:
    """(template, build() keywords) of a call ``(x, weight, eps)`` (with ``residual``: the
    fused ``rms_norm(x + residual)``, NOTE [fused residual]): dtypes, has-weight and
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
    if residual is not None and (residual.dtype != x.dtype or residual.shape != x.shape):
        raise ValueError(f"xvendor flydsl rms_norm: residual {tuple(residual.shape)} "
                         f"{residual.dtype} must have x's shape and dtype "
                         f"({tuple(x.shape)} {x.dtype})")
    return "rms_norm", {"dtype": _DT[x.dtype], "w_dtype": wd, "has_weight": weight is not None,
                        "has_residual": residual is not None,
                        "ragged": x.shape[-1] % cfg.vec != 0}


def plan(x, weight, eps, cfg, residual=None) -> _launch.Launch:
    """The launch of one call: x viewed as (rows, hidden) with rows = x.numel() / hidden.
    ``result()`` is y, or (y, x + residual) with a residual."""
    template, spec = specialization((x, weight), cfg, residual)
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
    eps = float(rms_norm_eps(x.dtype, eps))
    grid = -(-rows // cfg.rows)
    r2 = _rows(residual, rows, hidden) if residual is not None else x2  # never read without
    h = torch.empty_like(y) if residual is not None else y  # never written without
    args = (x2, r2, w, y, h, rows, hidden, eps, max(grid, 1))

    def result():
        return (y.view(x.shape), h.view(x.shape)) if residual is not None else y.view(x.shape)
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


class RowKernel:
    """Trace-time pieces shared by the forward and backward kernels.

    Plain Python (FlyDSL rewrites only a kernel's own body): their ``if``s on build-time
    constants choose code, never a runtime branch. An access of ``vec`` elements wider
    than 16 bytes (fp32 activations, fp32 weights, the fp32 dweight partials) is issued as
    16-byte pieces: the widest buffer access a lane has on both archs."""

    def __init__(self, fx, cfg, arch, dtype, w_dtype, has_weight, lanes, smem):
        from flydsl.expr import gpu, range_constexpr
        types = {"bf16": fx.BFloat16, "fp16": fx.Float16, "fp32": fx.Float32}
        if arch not in WAVE:
            raise KeyError(f"FlyDSL rms_norm targets {sorted(WAVE)}, not {arch!r}")
        self.fx, self.gpu, self.rc, self.cfg = fx, gpu, range_constexpr, cfg
        self.T, self.TW, self.has_weight = types[dtype], types[w_dtype], has_weight
        self.wave, self.lanes, self.smem = WAVE[arch], lanes, smem
        self.threads = cfg.waves * self.wave
        self.x_bits, self.w_bits = _BITS[dtype], _BITS[w_dtype]
        self.x_piece, self.w_piece, self.f_piece = (piece(cfg.vec, b) for b in
                                                    (self.x_bits, self.w_bits, 32))
        self.idx = tuple(traced_fn(f) for f in (row_of, chunk_index, tail_index, bounds,
                                                n_chunks))

    def atoms(self):
        """(x/y, weight, fp32) copy atoms (built while tracing: they need the MLIR context)."""
        fx = self.fx
        return (fx.make_copy_atom(fx.rocdl.BufferCopy(self.x_piece * self.x_bits), self.T),
                fx.make_copy_atom(fx.rocdl.BufferCopy(self.w_piece * self.w_bits), self.TW),
                fx.make_copy_atom(fx.rocdl.BufferCopy(self.f_piece * 32), fx.Float32))

    def row_views(self, t, row, hidden, nvec, n, dt, piece_, chunks):
        """(vector view (piece, ·), scalar view) of one row, bounded per NOTE [row masking]."""
        fx = self.fx
        base = fx.add_offset(fx.get_iter(t), row * hidden)
        nbytes = dt.width // 8
        n_pieces = chunks * self.lanes * (self.cfg.vec // piece_)
        vview = fx.make_view(base, vector_layout(fx, n_pieces, piece_))
        sview = fx.make_view(base, fx.make_layout(hidden + 1, 1))
        return (fx.rocdl.make_buffer_tensor(vview, num_records_bytes=fx.Int64(nvec) * nbytes),
                fx.rocdl.make_buffer_tensor(sview, num_records_bytes=fx.Int64(n) * nbytes))

    def _pieces(self, r, piece_):
        return self.fx.logical_divide(r, self.fx.make_layout(piece_, 1))

    def load(self, atom, view, idx, dt, piece_):
        """Vector ``idx`` of a row (``vec`` elements, in pieces of ``piece_``) as fp32."""
        fx, vec = self.fx, self.cfg.vec
        r = fx.make_rmem_tensor(vec, dt)
        if piece_ == vec:
            fx.copy_atom_call(atom, view[None, idx], r)
        else:
            parts = self._pieces(r, piece_)
            for p in self.rc(vec // piece_):
                fx.copy_atom_call(atom, view[None, idx * (vec // piece_) + p], parts[None, p])
        return r.load().to(fx.Float32)

    def store(self, atom, y, view, idx, dt, piece_):
        fx, vec = self.fx, self.cfg.vec
        r = fx.make_rmem_tensor(vec, dt)
        r.store(y.to(dt))
        if piece_ == vec:
            fx.copy_atom_call(atom, r, view[None, idx])
        else:
            parts = self._pieces(r, piece_)
            for p in self.rc(vec // piece_):
                fx.copy_atom_call(atom, parts[None, p], view[None, idx * (vec // piece_) + p])

    def row_sum(self, acc, tid, slot):
        """Sum of ``acc`` over the lanes of a row: shuffles, then LDS across waves (LDS
        ``slot``: one per reduction, so no reduction waits for the readers of another)."""
        fx, wave, nw = self.fx, self.wave, self.cfg.waves
        for i in self.rc(wave.bit_length() - 1):
            acc = acc + self.gpu.shuffle_xor(acc, wave >> (i + 1), wave)
        if not self.smem:
            return acc
        sbase = fx.recast_iter(fx.PointerType.get(fx.Float32.ir_type, fx.AddressSpace.Shared, 16),
                               fx.get_dyn_shared())
        red = fx.make_view(sbase, fx.make_layout(self.smem // 4, 1))
        # every lane holds its wave's sum: all store the same value (no branch needed)
        red[slot * nw + tid // wave] = acc
        self.gpu.barrier()
        total = red[slot * nw]
        for i in self.rc(1, nw):
            total = total + red[slot * nw + i]
        return total

    def weight_views(self, w, hidden, chunks):
        if not self.has_weight:
            return None, None
        return self.row_views(w, 0, hidden, hidden // self.cfg.vec * self.cfg.vec, hidden,
                              self.TW, self.w_piece, chunks)

    def weight(self, w_atom, wv, idx):
        return self.load(w_atom, wv, idx, self.TW, self.w_piece) if self.has_weight else None

    def scale_vec(self, y, w_atom, wv, idx):
        return y * self.weight(w_atom, wv, idx) if self.has_weight else y

    def scale_tail(self, y, ws, tail):
        return y * ws[tail].to(self.fx.Float32) if self.has_weight else y


def piece(vec: int, bits: int) -> int:
    """Elements per buffer access of a ``vec``-element vector: at most 16 bytes."""
    return min(vec, 128 // bits)


def build(cfg, *, arch: str, dtype: str, w_dtype: str, has_weight: bool,
          has_residual: bool = False, ragged: bool = False):
    """The ``@flyc.jit`` launcher of one specialization: (launch, LDS bytes, threads).

    ``ragged`` is part of the key only (see ``specialization``): the code is the same."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import math as fmath, range_constexpr

    k = RowKernel(fx, cfg, arch, dtype, w_dtype, has_weight, lanes_per_row(arch, cfg),
                lds_bytes(cfg))
    VEC, R, lanes, threads, smem, T = cfg.vec, cfg.rows, k.lanes, k.threads, k.smem, k.T
    idx_row, idx_chunk, idx_tail, idx_bounds, idx_chunks = k.idx

    @flyc.kernel
    def kernel(X: fx.Tensor, Rs: fx.Tensor, W: fx.Tensor, Y: fx.Tensor, H: fx.Tensor,
               rows: fx.Int32, hidden: fx.Int32, eps: fx.Float32):
        tid = fx.thread_idx.x
        bid = fx.block_idx.x
        x_atom, w_atom, _ = k.atoms()
        row, lane = idx_row(bid, tid, R, lanes)
        nvec, n = idx_bounds(row, rows, hidden, VEC)
        chunks = idx_chunks(hidden, VEC, lanes)
        xv, xs = k.row_views(X, row, hidden, nvec, n, T, k.x_piece, chunks)
        yv, ys = k.row_views(Y, row, hidden, nvec, n, T, k.x_piece, chunks)
        rv, rs = k.row_views(Rs, row, hidden, nvec, n, T, k.x_piece, chunks)
        hv, hs = k.row_views(H, row, hidden, nvec, n, T, k.x_piece, chunks)
        tail = idx_tail(hidden, lane, VEC)

        acc = fx.Float32(0.0)
        for c in range(chunks):
            idx = idx_chunk(c, lane, lanes)
            x = k.load(x_atom, xv, idx, T, k.x_piece)
            if has_residual:  # build-time: h = x + residual, rounded to x's dtype, kept
                x = (x + k.load(x_atom, rv, idx, T, k.x_piece)).to(T).to(fx.Float32)
                k.store(x_atom, x, hv, idx, T, k.x_piece)
            for i in range_constexpr(VEC):
                acc = acc + x[i] * x[i]
        tx = xs[tail].to(fx.Float32)  # 0 unless lane < hidden % VEC
        if has_residual:
            tx = (tx + rs[tail].to(fx.Float32)).to(T).to(fx.Float32)
            hs[tail] = tx.to(T)
        acc = acc + tx * tx

        total = k.row_sum(acc, tid, 0)
        rinv = fmath.rsqrt(total / fx.Float32(hidden) + eps, fastmath="fast")

        wv, ws = k.weight_views(W, hidden, chunks)
        src = hv if has_residual else xv  # h: this lane's own stores, read back in order
        for c in range(chunks):
            idx = idx_chunk(c, lane, lanes)
            y = k.load(x_atom, src, idx, T, k.x_piece) * rinv
            k.store(x_atom, k.scale_vec(y, w_atom, wv, idx), yv, idx, T, k.x_piece)
        ys[tail] = k.scale_tail(tx * rinv, ws, tail).to(T)  # dropped unless lane < hidden % VEC

    @flyc.jit
    def launch(X: fx.Tensor, Rs: fx.Tensor, W: fx.Tensor, Y: fx.Tensor, H: fx.Tensor,
               rows: fx.Int32, hidden: fx.Int32, eps: fx.Float32, grid: fx.Int32,
               stream: fx.Stream = fx.Stream(None)):
        kernel(X, Rs, W, Y, H, rows, hidden, eps).launch(
            grid=(grid, 1, 1), block=(threads, 1, 1), smem=smem, stream=stream)

    return launch, smem, threads


# -- backward ------------------------------------------------------------------------
# NOTE [rms_norm backward]: with r = rsqrt(mean(x^2) + eps), gw = g * w (g alone without
# a weight), per row: dx = r * gw - x * (r^3 * sum(gw * x) / hidden), and
# dweight = sum over rows of g * x * r. A workgroup walks ``cfg.rows`` consecutive rows
# with all its waves on each row (``lanes = threads``): pass 1 reduces sum(x^2) and
# sum(gw * x) per row (shuffles, then one LDS slot per reduction), pass 2 walks the
# chunks, writes dx of its rows and keeps their dweight contribution in registers, then
# writes one fp32 partial row per workgroup (``DW``, (grid, hidden)). The host sums the
# partials (torch.sum over grid rows, in fp32): a deterministic reduction, where fp32
# atomics into one row would make dweight depend on the workgroups' order. Pass 2 re-reads
# the rows of pass 1 (``rows`` x hidden x 2 tensors, 256 KiB at 8 x 8192 bf16): cache
# hits, like the forward's second pass. Rows past ``rows`` read zeros, write nothing and
# add nothing (their r is forced to 0, so eps = 0 cannot make 0 * inf).
BWD_ARGS = ("G", "X", "W", "DX", "DW", "rows", "hidden", "eps", "per_wg", "grid")


def bwd_lds_bytes(cfg) -> int:
    """Two fp32 partial sums per wave (sum(x^2), sum(gw * x)), reused row after row."""
    return 8 * cfg.waves if cfg.waves > 1 else 0


def specialization_backward(args: tuple, cfg) -> tuple[str, dict]:
    """(template, build_backward() keywords) of a backward call ``(grad, x, weight)``."""
    grad, x, weight = (tuple(args) + (None, None, None))[:3]
    if x.dtype not in _DT or grad.dtype != x.dtype:
        raise ValueError(f"xvendor flydsl rms_norm backward: x {x.dtype} and grad "
                         f"{grad.dtype} must be one of bf16, fp16, fp32, the same for both")
    if weight is not None and (weight.dim() != 1 or weight.dtype not in (x.dtype, torch.float32)):
        raise ValueError("xvendor flydsl rms_norm backward: weight must be 1-D over x's last "
                         f"dim, with x's dtype or fp32 (got {weight.dim()}-D {weight.dtype})")
    wd = _DT[x.dtype] if weight is None else _DT[weight.dtype]
    spec = {"dtype": _DT[x.dtype], "w_dtype": wd, "has_weight": weight is not None,
            "ragged": x.shape[-1] % cfg.vec != 0}
    return "rms_norm_bwd", spec


def _rows(t, rows, hidden):
    t2 = t.reshape(rows, hidden)
    return t2 if t2.is_contiguous() and t2.data_ptr() % 16 == 0 else t2.contiguous()


def plan_backward(grad, x, weight, eps, cfg) -> _launch.Launch:
    """The launch of one backward call; ``result()`` is (dx, dweight or None)."""
    template, spec = specialization_backward((grad, x, weight), cfg)
    hidden = x.shape[-1]
    rows = x.numel() // hidden if hidden else 0
    if x.numel() >= _MAX_ELEMS:
        raise ValueError(f"xvendor flydsl rms_norm backward: x has {x.numel()} elements; "
                         f"the kernel indexes rows with 32-bit offsets (under {_MAX_ELEMS})")
    grid = max(-(-rows // cfg.rows), 1)
    dx = torch.empty((rows, hidden), dtype=x.dtype, device=x.device)
    # zeros: the kernel adds each row's term to its workgroup's partial row
    dw = torch.zeros((grid, hidden) if weight is not None else (8,), dtype=torch.float32,
                     device=x.device)
    w = weight.contiguous() if weight is not None else dw  # never read without a weight
    if w.data_ptr() % 16:
        w = w.clone()
    eps = float(rms_norm_eps(x.dtype, eps))
    args = (_rows(grad, rows, hidden), _rows(x, rows, hidden), w, dx, dw, rows, hidden, eps,
            cfg.rows, grid)

    def result():
        dweight = dw.sum(0).to(weight.dtype) if weight is not None else None
        return dx.view(x.shape), dweight
    return _launch.Launch(template, spec, args, result)


def build_backward(cfg, *, arch: str, dtype: str, w_dtype: str, has_weight: bool,
                   ragged: bool = False):
    """The backward launcher of one specialization: (launch, LDS bytes, threads)."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr import math as fmath, range_constexpr

    threads = cfg.waves * WAVE[arch]
    k = RowKernel(fx, cfg, arch, dtype, w_dtype, has_weight, threads, bwd_lds_bytes(cfg))
    VEC, lanes, smem, T, F32 = cfg.vec, threads, k.smem, k.T, fx.Float32
    _, idx_chunk, idx_tail, idx_bounds, idx_chunks = k.idx

    def row_stats(xs, gs, ss, dot, row, rows, hidden, eps, tid, tail, ws):
        """(r, r^3 * sum(gw * x) / hidden) of one row from its lanes' partial sums (the
        tail element added here); r = 0 for a row past ``rows``."""
        tx = xs[tail].to(F32)  # 0 unless tid < hidden % VEC
        ss = k.row_sum(ss + tx * tx, tid, 0)
        dot = k.row_sum(dot + k.scale_tail(gs[tail].to(F32), ws, tail) * tx, tid, 1)
        k.gpu.barrier()  # every wave has read both slots: the next row may write them
        r = fmath.rsqrt(ss / F32(hidden) + eps, fastmath="fast")
        r = (row < rows).select(r, F32(0.0))
        return r, r * r * r * dot / F32(hidden)

    @flyc.kernel
    def kernel(G: fx.Tensor, X: fx.Tensor, W: fx.Tensor, DX: fx.Tensor, DW: fx.Tensor,
               rows: fx.Int32, hidden: fx.Int32, eps: fx.Float32, per_wg: fx.Int32):
        tid = fx.thread_idx.x
        bid = fx.block_idx.x
        x_atom, w_atom, f_atom = k.atoms()
        chunks = idx_chunks(hidden, VEC, lanes)
        tail = idx_tail(hidden, tid, VEC)
        wv, ws = k.weight_views(W, hidden, chunks)
        pv, ps = idx_bounds(bid, bid + 1, hidden, VEC)  # this workgroup's partial row
        dwv, dws = k.row_views(DW, bid, hidden, pv, ps, F32, k.f_piece, chunks)
        for j in range(per_wg):
            row = bid * per_wg + j
            nvec, n = idx_bounds(row, rows, hidden, VEC)
            xv, xs = k.row_views(X, row, hidden, nvec, n, T, k.x_piece, chunks)
            gv, gs = k.row_views(G, row, hidden, nvec, n, T, k.x_piece, chunks)
            dv, ds = k.row_views(DX, row, hidden, nvec, n, T, k.x_piece, chunks)
            ss = F32(0.0)  # pass 1: the row's two sums
            dot = F32(0.0)
            for c in range(chunks):
                idx = idx_chunk(c, tid, lanes)
                x = k.load(x_atom, xv, idx, T, k.x_piece)
                gw = k.scale_vec(k.load(x_atom, gv, idx, T, k.x_piece), w_atom, wv, idx)
                for i in range_constexpr(VEC):
                    ss = ss + x[i] * x[i]
                    dot = dot + gw[i] * x[i]
            r, coef = row_stats(xs, gs, ss, dot, row, rows, hidden, eps, tid, tail, ws)
            for c in range(chunks):  # pass 2: dx, and the row's dweight term
                idx = idx_chunk(c, tid, lanes)
                x = k.load(x_atom, xv, idx, T, k.x_piece)
                g = k.load(x_atom, gv, idx, T, k.x_piece)
                k.store(x_atom, k.scale_vec(g, w_atom, wv, idx) * r - x * coef, dv, idx, T,
                        k.x_piece)
                if has_weight:  # build-time: the partial row is this workgroup's own
                    part = k.load(f_atom, dwv, idx, F32, k.f_piece) + g * x * r
                    k.store(f_atom, part, dwv, idx, F32, k.f_piece)
            tx = xs[tail].to(F32)  # the tail: element hidden // VEC * VEC + tid
            tg = gs[tail].to(F32)
            ds[tail] = (k.scale_tail(tg, ws, tail) * r - tx * coef).to(T)
            if has_weight:
                dws[tail] = dws[tail] + tg * tx * r

    @flyc.jit
    def launch(G: fx.Tensor, X: fx.Tensor, W: fx.Tensor, DX: fx.Tensor, DW: fx.Tensor,
               rows: fx.Int32, hidden: fx.Int32, eps: fx.Float32, per_wg: fx.Int32,
               grid: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        kernel(G, X, W, DX, DW, rows, hidden, eps, per_wg).launch(
            grid=(grid, 1, 1), block=(threads, 1, 1), smem=smem, stream=stream)

    return launch, smem, threads


def traced_fn(fn):
    from .tiling import traced
    return traced(fn)
