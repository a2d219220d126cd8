"""FlyDSL MX (BlockWise1x32) scaled GEMM for gfx950 (MI355X): ``v_mfma_scale_f32_16x16x128_f8f6f4``.

Math (torch's ``F.scaled_mm`` with ``ScalingType.BlockWise1x32`` on both sides, NO_SWIZZLE):
``C[m, n] = sum_k A[m, k] * 2^(SA[m, k // 32] - 127) * B[n, k] * 2^(SB[n, k // 32] - 127)``
with fp32 accumulation and one rounding to bf16. A is (M, K), B is (N, K) (the column-major
``mat_b`` of torch's contract, seen K-major), both e4m3fn, or both e2m1 packed two per byte
along K (lower K index in the low nibble; passed as uint8, recast in the kernel). SA (M, K/32)
and SB (N, K/32) are E8M0 scales passed as uint8.

Code paths (fixed on the host at build time):
- mainloop: ``stages`` LDS buffers of (block_m + block_n) x block_k operand bytes; the global
  loads of K tile ``k + stages - 1`` are issued before the MFMAs of tile ``k`` and written to
  LDS after them; one barrier per K tile (the bf16 template's pipeline, ``gemm_gfx950``).
  Operand tiles move as 16-byte ``buffer_load_dwordx4`` into an XOR-swizzled K-major LDS tile
  and reach the MFMA as 32 contiguous K bytes per lane (fp8; 16 for fp4).
- scales: each MFMA atom (16 x 16 x 128) takes one i32 per lane and operand, whose low byte
  is the E8M0 scale of that lane's own 32 K values (NOTE [MX lane scales]); the lane loads it
  from SA/SB in global memory (one byte per atom, per K tile), no LDS.
- bounds: every global access goes through a buffer descriptor that ends where the operand
  ends (M and N tails read 0; C stores past M are dropped); the K tail (K % block_k, with K a
  multiple of 32 by the MX rule) is zeroed in registers before it reaches LDS, and its
  scales are replaced by 2^0 (a scale past K is the next row's and could be NaN, and
  NaN * 0 is NaN); C's N and M tails by one predicate per C store (``store_c_t``).
- orientation: the atoms compute C^T = B A^T (our B is the MMA's A operand, its scales the
  instruction's ``scale_a``), as the bf16 templates do (NOTE [C transposed] in
  ``gemm_gfx950``): each lane's accumulator then holds runs of consecutive N at one M,
  contiguous in row-major C. ``mma_config`` is the MMA's view of a config (M and N
  swapped); ``lane_scale_coords`` is asked in that view.
- epilogue: fp32 accumulator -> bf16 -> buffer stores of up to ``C_RUN`` elements, as
  wide as N allows (the launch passes ``n_align``; ``gemm_gfx950.store_width``): 8 bytes,
  ``buffer_store_dwordx2``, on gfx950; 16 bytes, ``buffer_store_b128``, on gfx1250.
- rowwise recipe (``recipe="rowwise"``: TensorWise / RowWise, e4m3): the same kernel with
  every block scale 2^0 (the scaled instruction then computes the plain fp8 product), and
  the fp32 accumulator multiplied by scale_a[row] * scale_b[col] before rounding (fp32
  (M,) and (N,) vectors read through stride-0 views with C's partition).

NOTE [MX lane scales]: FlyDSL's A/B fragment of the 16x16x128 atom gives lane ``l`` row
(or column) ``l % 16`` and the 32 contiguous K values ``32 * (l // 16) ..`` of the atom's K
range; tests/rocm/test_scaled_compile.py proves that on the layout algebra, and proves that
the scale row/K-block this module computes for each lane is that lane's fragment row and
K block. What cannot be checked without the hardware is the other half: that
``v_mfma_scale`` applies lane ``l``'s scale byte (opsel 0: bits 0-7) to exactly those 32
values, and that the hardware's A/B register layout is the one FlyDSL's atom describes.
Both are assumptions. A reason for doubt: a hand-written upstream FlyDSL kernel for this
instruction fills each lane's fp8 operand from two 16-byte pieces 64 K apart, not from 32
contiguous K. If the hardware reads a lane's bytes that way, the products still pair (A
and B get the same K order) but each scale lands on values of two different MX blocks:
wrong results whenever a row's blocks have different scales. The correctness gate must
catch it (its inputs need varied scales per block) on the
first run on a gfx950 device (``xvendor.gate``), before the template is ever chosen.

NOTE [unverified numerics]: compiled to real gfx950 code objects on a CPU and inspected
(instruction, spills, LDS); never run. Numerics are unverified until a gfx950 device runs
them against the reference; the correctness gate does that on first use.
"""

from dataclasses import replace

from . import gemm_gfx950
from .gemm_gfx950 import store_c_t, store_width, tile_coords, zero_k_tail
from .tiling import columns_left, k_left, rows_left

ARCH = "gfx950"
WAVE = 64
ATOM_M = 16  # the MFMA atom: 16 x 16 x 128, one E8M0 scale per lane and operand
ATOM_K = 128
MX_BLOCK = 32
LANE_K = 32  # K values per lane and atom: one MX block
ONE_E8M0 = 127  # 2^0: the scale of values that are zero anyway (NOTE [K tail] here)
ELEM_BITS = {"e4m3": 8, "e2m1": 4}


def elem_type(fx, fmt: str):
    return {"e4m3": fx.Float8E4M3FN, "e2m1": fx.Float4E2M1FN}[fmt]


def lds_bytes(cfg, fmt: str) -> int:
    """LDS the launch requests: A and B tiles of every stage, in operand bytes."""
    return (cfg.block_m + cfg.block_n) * cfg.block_k * cfg.stages * ELEM_BITS[fmt] // 8


def lane_scale_coords(cfg, tid: int, i: int, kk: int, *, operand: str = "a"):
    """(row in the tile, (K block in the tile,)) whose scale lane ``tid`` passes to atom
    (``i``, ``kk``): atom row/column ``i`` of its wave's fragment, atom K step ``kk``; the
    K blocks' scales go to bytes 0, 1, .. of the lane's i32 (here one: byte 0).

    Plain arithmetic, shared by the kernel (on FlyDSL values) and the layout proof (ints).
    ``cfg`` is the MMA's view (``mma_config``: operand "a" is our B, "b" our A). The waves
    are laid out (warps_m, warps_n) with M fastest; fragment atom ``i`` of wave
    (wm, wn) covers tile rows ``(i * warps_m + wm) * 16 ..`` (A) or columns
    ``(i * warps_n + wn) * 16 ..`` (B).
    """
    wave = tid // WAVE
    lane = tid % WAVE
    if operand == "a":
        w, n_w = wave % cfg.warps_m, cfg.warps_m
    else:
        w, n_w = wave // cfg.warps_m, cfg.warps_n
    row = (i * n_w + w) * ATOM_M + lane % ATOM_M
    kb = kk * (ATOM_K // MX_BLOCK) + lane // ATOM_M
    return row, (kb,)


def k_major_copy(fx, block_k_bytes: int, threads: int):
    """G2S copy of a (rows, block_k_bytes) K-major byte tile: thread t takes 16 contiguous
    bytes of one row."""
    tc = block_k_bytes // 16
    tr = threads // tc
    return fx.make_tiled_copy(fx.make_copy_atom(fx.rocdl.BufferCopy128b(), fx.Uint8),
                              fx.make_layout(((tc, tr), (1, 16)), ((tr * 16, 1), (1, tr))),
                              fx.make_tile(tr, block_k_bytes))


def k_major_lds(fx, base, rows: int, block_k: int, stages: int, bits: int):
    """(rows, block_k, stages) K-major LDS view, 16-byte chunks XOR-swizzled by the row.

    The 16-byte chunk index of a row (bits 4.. of the byte offset) is XORed with the low
    bits of the row index (3 bits for rows of 128 bytes or more, 2 for 64-byte fp4 rows),
    so the 16 lanes of one fragment read (16 rows, same K chunk) spread over the banks
    instead of hitting one group. The same swizzle in element units (fp4: 32 per chunk)
    gives the element view the fragments read; tests/rocm/test_scaled_compile.py checks
    that the byte and element views put every value at the same byte.
    """
    per_chunk = 128 // bits  # elements per 16 bytes
    chunk_bits = per_chunk.bit_length() - 1
    row_bits = block_k.bit_length() - 1  # log2 of the elements in a row
    xor_bits = min(3, row_bits - chunk_bits)
    layout = fx.make_composed_layout(
        fx.static(fx.SwizzleType.get(xor_bits, chunk_bits, row_bits - chunk_bits)),
        fx.make_ordered_layout((rows, block_k, stages), (1, 0, 2)))
    return fx.make_view(base, layout)


C_VALS = 4  # accumulator values per lane and atom
C_RUN = gemm_gfx950.C_RUN[ATOM_M]  # consecutive accumulator M (our N) a lane holds


def mma_config(cfg):
    """The config as the MMA sees it: it tiles C^T (NOTE [C transposed] in ``gemm_gfx950``),
    so its M block and waves are our N's, and the other way round."""
    return replace(cfg, block_m=cfg.block_n, block_n=cfg.block_m,
                   warps_m=cfg.warps_n, warps_n=cfg.warps_m)


def lane_copy_bits(bits: int) -> int:
    """Bits of one LDS -> register copy: a lane's whole share of an atom (32 K values)."""
    return LANE_K * bits


def scaled_atom(fx, T):
    return fx.rocdl.cdna4.MFMA_Scale(ATOM_M, ATOM_M, ATOM_K, T)


def tiled_mma(fx, cfg, T, machine=None):
    """(atom, tiled MMA): warps_m x warps_n waves along the MMA's M and N (the kernel passes
    ``mma_config(cfg)``: it tiles C^T); the kernel issues the atom itself, one fragment at
    a time, since each carries its own lane scales."""
    atom = fx.make_mma_atom((machine or _this()).scaled_atom(fx, T))
    return atom, fx.make_tiled_mma(atom, fx.make_layout((cfg.warps_m, cfg.warps_n, 1),
                                                        (1, cfg.warps_m, 0)))


def _this():
    import sys
    return sys.modules[__name__]


def scale_views(fx, bounded, SA, SB, M, N, kb_total, ldsa, ldsb, mx: bool):
    """Bounded (rows, K/32) views of the E8M0 scales (MX), or (None, None) (rowwise)."""
    if not mx:
        return None, None
    return bounded(SA, M, kb_total, ldsa), bounded(SB, N, kb_total, ldsb)


def mx_scale_word(fx, g, row0, kb0, coords, kb_total):
    """A lane's i32 of E8M0 scales for one atom: K block ``kbs[b]`` of row ``row0 + r`` in
    byte b; blocks at or past K/32 get 2^0 (their values are zeroed: NOTE [K tail] above)."""
    r, kbs = coords
    word = None
    for b, kb in enumerate(kbs):
        byte = fx.Int32(g[(row0 + r, kb0 + kb)]) & 255  # a uint8 load sign-extends
        byte = (kb0 + kb < kb_total).select(byte, fx.Int32(ONE_E8M0))
        word = byte if word is None else word | (byte << (8 * b))
    return word


def unit_scale_word(fx, g, row0, kb0, coords, kb_total):
    """Rowwise recipe: every block scale 2^0 (the row scales come in the epilogue)."""
    return fx.Int32(sum(ONE_E8M0 << (8 * b) for b in range(len(coords[1]))))


def rowwise_scale(fx, mma, tid, fC, S, rows, cols, along_rows: bool, BM, BN, pid_m, pid_n):
    """fp32 fragment like ``fC`` holding S[row] (``along_rows``) or S[col] of each value:
    a stride-0 view of the (rows,) / (cols,) vector, read through C's own partition."""
    n = rows if along_rows else cols
    view = fx.make_view(fx.get_iter(S), fx.make_layout((rows, cols),
                                                       (1, 0) if along_rows else (0, 1)))
    view = fx.rocdl.make_buffer_tensor(view, num_records_bytes=fx.Int64(n) * 4)
    view = fx.flat_divide(view, fx.make_tile(BM, BN))[None, None, pid_m, pid_n]
    atom = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Float32)
    tc = fx.make_tiled_copy_C(atom, mma).get_slice(tid)
    frag = fx.make_fragment_like(fC)
    fx.copy(atom, tc.partition_S(view), tc.retile(frag))
    return frag


def apply_row_scales(fx, mma, tid, fC, SA, SB, M, N, BM, BN, pid_m, pid_n, mx: bool):
    """Rowwise recipe: fC *= SA[row] * SB[col] of the (M, N) matrix ``fC`` tiles, in fp32
    (MX: nothing). The kernel tiles C^T: it passes (scale_b, scale_a, N, M, ...)."""
    if mx:
        return
    fa = rowwise_scale(fx, mma, tid, fC, SA, M, N, True, BM, BN, pid_m, pid_n)
    fb = rowwise_scale(fx, mma, tid, fC, SB, M, N, False, BM, BN, pid_m, pid_n)
    fC.store(fC.load() * fa.load() * fb.load())


def build(cfg, *, fmt: str = "e4m3", out_dtype: str = "bf16", recipe: str = "mx",
          n_align: int = 1, machine=None):
    """The ``@flyc.jit`` launcher of one specialization (see ``xvendor.rocm.scaled_launch``):
    (launcher, LDS bytes, threads). ``recipe``: "mx" (E8M0 block scales, uint8 SA (M, K/32)
    and SB (N, K/32)) or "rowwise" (fp32 SA (M,) and SB (N,), applied to the fp32
    accumulator in the epilogue; the atoms run with unit block scales, 2^0; TensorWise is
    rowwise with the scalar broadcast on the host). ``machine``: the module naming the
    arch's wave, atom, lane copy width and lane scales (this one; ``scaled_gfx1250`` reuses
    the kernel). ``n_align``: the widest C store N allows (``launch.n_align``)."""
    mc = machine or _this()
    if recipe not in ("mx", "rowwise"):
        raise ValueError(f"recipe must be 'mx' or 'rowwise', got {recipe!r}")
    if recipe == "rowwise" and fmt != "e4m3":
        raise ValueError("the rowwise recipe takes e4m3 operands (fp4 is MX only)")
    mx = recipe == "mx"
    word = mx_scale_word if mx else unit_scale_word  # chosen here: no branch in the kernel
    import flydsl.compiler as flyc
    import flydsl.expr as fx

    if out_dtype != "bf16":
        raise ValueError(f"the MX templates write bf16 (torch's scaled_mm default), not {out_dtype}")
    BM, BN, BK, S = cfg.block_m, cfg.block_n, cfg.block_k, cfg.stages
    WM, WN = cfg.warps_m, cfg.warps_n
    threads = WM * WN * mc.WAVE
    smem_bytes = lds_bytes(cfg, fmt)
    bits = ELEM_BITS[fmt]
    BKB = BK * bits // 8  # bytes of a tile row
    rep_m, rep_n, rep_k = BM // (ATOM_M * WM), BN // (ATOM_M * WN), BK // ATOM_K
    lsc = mc.lane_scale_coords
    mcfg = mma_config(cfg)  # the MMA tiles C^T: its M is our N (NOTE [C transposed])
    vec = store_width(mc.C_RUN, n_align, 16)  # bf16 C

    @flyc.kernel
    def kernel(A: fx.Tensor, B: fx.Tensor, C: fx.Tensor, SA: fx.Tensor, SB: fx.Tensor,
               M: fx.Int32, N: fx.Int32, K: fx.Int32,
               lda: fx.Int32, ldb: fx.Int32, ldc: fx.Int32, ldsa: fx.Int32, ldsb: fx.Int32,
               tiles_m: fx.Int32, tiles_n: fx.Int32):
        T = elem_type(fx, fmt)  # atom and element types are built inside the kernel body
        U8 = fx.Uint8
        tid = fx.thread_idx.x
        bid = fx.block_idx.x
        if bid < tiles_m * tiles_n:
            pid_n = bid % tiles_n
            pid_m = bid // tiles_n
            kb_total = K // MX_BLOCK

            def bounded(t, rows, cols, ld, transposed=False):
                """(rows, cols) row-major view, or its (cols, rows) transpose; either way
                bounded at ``rows`` rows of ``ld`` elements."""
                shape, stride = ((cols, rows), (1, ld)) if transposed else ((rows, cols), (ld, 1))
                view = fx.make_view(fx.get_iter(t), fx.make_layout(shape, stride))
                nbytes = fx.Int64(rows) * fx.Int64(ld) * (t.element_type.width // 8)
                return fx.rocdl.make_buffer_tensor(view, num_records_bytes=nbytes)

            # Operands move as bytes (the K tail is zeroed on bytes: LLVM cannot select on
            # fp8 vectors) and are read from LDS as elements (fp4: two per byte).
            kbytes = K * bits // 8
            gA = bounded(A, M, kbytes, lda)
            gB = bounded(B, N, kbytes, ldb)
            gC = bounded(C, M, ldc, ldc, transposed=True)  # C^T (ldc, M), N contiguous
            gSA, gSB = scale_views(fx, bounded, SA, SB, M, N, kb_total, ldsa, ldsb, mx)
            gA = fx.flat_divide(gA, fx.make_tile(BM, BKB))[None, None, pid_m, None]
            gB = fx.flat_divide(gB, fx.make_tile(BN, BKB))[None, None, pid_n, None]
            gC = fx.flat_divide(gC, fx.make_tile(BN, BM))[None, None, pid_n, pid_m]
            atom, mma = tiled_mma(fx, mcfg, T, mc)
            thr_mma = mma.thr_slice(tid)

            def lds(dtype):
                return fx.recast_iter(fx.PointerType.get(dtype.ir_type, fx.AddressSpace.Shared,
                                                         512), fx.get_dyn_shared())
            sA8 = k_major_lds(fx, lds(U8), BM, BKB, S, 8)
            sB8 = k_major_lds(fx, fx.add_offset(lds(U8), BM * BKB * S), BN, BKB, S, 8)
            sA = k_major_lds(fx, lds(T), BM, BK, S, bits)
            sB = k_major_lds(fx, fx.add_offset(lds(T), BM * BK * S), BN, BK, S, bits)
            g2s = k_major_copy(fx, BKB, threads).get_slice(tid)
            tgA, tsA = g2s.partition_S(gA), g2s.partition_D(sA8)
            tgB, tsB = g2s.partition_S(gB), g2s.partition_D(sB8)
            regA = fx.make_fragment_like(tsA[None, None, None, 0])
            regB = fx.make_fragment_like(tsB[None, None, None, 0])
            cA = tile_coords(fx, g2s, BM, BKB)  # (row, byte) of each loaded value
            cB = tile_coords(fx, g2s, BN, BKB)
            s2r_atom = fx.make_copy_atom(fx.UniversalCopy(mc.lane_copy_bits(bits)), T)
            # C^T = B A^T: our A is the MMA's B operand, our B its A (NOTE [C transposed])
            s2rA = fx.make_tiled_copy_B(s2r_atom, mma).get_slice(tid)
            s2rB = fx.make_tiled_copy_A(s2r_atom, mma).get_slice(tid)
            ssA, ssB = s2rA.partition_S(sA), s2rB.partition_S(sB)
            fA = thr_mma.make_fragment_B(sA[None, None, 0])
            fB = thr_mma.make_fragment_A(sB[None, None, 0])
            fC = thr_mma.make_fragment_C(gC)
            rA, rB = s2rA.retile(fA), s2rB.retile(fB)
            fC.fill(0.0)
            g2r = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), U8)
            r2s = fx.make_copy_atom(fx.UniversalCopy128b(), U8)
            row_a0 = pid_m * BM
            row_b0 = pid_n * BN
            k_tiles = (K + (BK - 1)) // BK

            # NOTE [atom fragments]: each atom has its own lane scales, so the kernel issues
            # the atom per (i, j, kk), on rank-1 register tensors made in the loop body and
            # copied from/to the tiled fragments: FlyDSL 0.3.4.1 leaves an atom gemm on
            # slices of the tiled fragments (or on accumulators made outside the runtime
            # loop) unlowered ("register operand remain after rmem SSA promotion"). The
            # copies are register moves (the compile reports show no spills).

            def mma_step(fA, fB, fC, kb0, kk):
                a = []
                for i in fx.range_constexpr(rep_m):
                    a.append(fx.make_rmem_tensor(fx.size(fA[None, i, kk]).to_py_value(), T))
                    a[i].store(fA[None, i, kk].load())
                b = []
                for j in fx.range_constexpr(rep_n):
                    b.append(fx.make_rmem_tensor(fx.size(fB[None, j, kk]).to_py_value(), T))
                    b[j].store(fB[None, j, kk].load())
                # lane scales in the MMA's view: our A rows are its B operand's
                sa = [word(fx, gSA, row_a0, kb0, lsc(mcfg, tid, i, kk, operand="b"), kb_total)
                      for i in range(rep_m)]
                sb = [word(fx, gSB, row_b0, kb0, lsc(mcfg, tid, j, kk, operand="a"), kb_total)
                      for j in range(rep_n)]
                for j in fx.range_constexpr(rep_n):
                    for i in fx.range_constexpr(rep_m):
                        c = fx.make_rmem_tensor(mc.C_VALS, fx.Float32)  # NOTE [atom fragments]
                        c.store(fC[None, j, i].load())
                        fx.gemm(atom, c, b[j], a[i], c, scale_a=sb[j], scale_b=sa[i])
                        fC[None, j, i].store(c.load())

            for s in fx.range_constexpr(S - 1):  # prologue (tiles past K read 0: unused)
                fx.copy(g2r, tgA[None, None, None, s], regA)
                fx.copy(g2r, tgB[None, None, None, s], regB)
                if k_left(kbytes, s, BKB) < BKB:  # the K tail (or past it): NOTE [K tail]
                    zero_k_tail(fx, regA, cA, BM, k_left(kbytes, s, BKB))
                    zero_k_tail(fx, regB, cB, BN, k_left(kbytes, s, BKB))
                fx.copy(r2s, regA, tsA[None, None, None, s])
                fx.copy(r2s, regB, tsB[None, None, None, s])
            fx.gpu.barrier()
            for k in range(k_tiles):
                nxt = k + (S - 1)
                fx.copy(g2r, tgA[None, None, None, nxt], regA)  # in flight during the MFMAs
                fx.copy(g2r, tgB[None, None, None, nxt], regB)
                st = k % S
                fx.copy(s2r_atom, ssA[None, None, None, st], rA)
                fx.copy(s2r_atom, ssB[None, None, None, st], rB)
                for kk in fx.range_constexpr(rep_k):
                    mma_step(fA, fB, fC, k * (BK // MX_BLOCK), kk)
                if k_left(kbytes, nxt, BKB) < BKB:
                    zero_k_tail(fx, regA, cA, BM, k_left(kbytes, nxt, BKB))
                    zero_k_tail(fx, regB, cB, BN, k_left(kbytes, nxt, BKB))
                wt = nxt % S
                fx.copy(r2s, regA, tsA[None, None, None, wt])
                fx.copy(r2s, regB, tsB[None, None, None, wt])
                fx.gpu.barrier()
            apply_row_scales(fx, mma, tid, fC, SB, SA, N, M, BN, BM, pid_n, pid_m, mx)
            store_c_t(fx, mma, tid, fC, gC, None, pid_m, pid_n, fx.BFloat16, False, BM, BN,
                      columns_left(N, pid_n, BN), rows_left(M, pid_m, BM), vec)

    @flyc.jit
    def launch(A: fx.Tensor, B: fx.Tensor, C: fx.Tensor, SA: fx.Tensor, SB: fx.Tensor,
               M: fx.Int32, N: fx.Int32, K: fx.Int32,
               lda: fx.Int32, ldb: fx.Int32, ldc: fx.Int32, ldsa: fx.Int32, ldsb: fx.Int32,
               tiles_m: fx.Int32, tiles_n: fx.Int32, grid: fx.Int32,
               stream: fx.Stream = fx.Stream(None)):
        kernel(A, B, C, SA, SB, M, N, K, lda, ldb, ldc, ldsa, ldsb, tiles_m, tiles_n).launch(
            grid=(grid, 1, 1), block=(threads, 1, 1), smem=smem_bytes, stream=stream)

    return launch, smem_bytes, threads
