"""FlyDSL GEMM and ragged grouped GEMM for gfx950 (MI355X): MFMA, multi-stage LDS pipeline.

Math: ``C[g] = A[g] @ B[g] (+ bias[g])`` with fp32 accumulation and one rounding to the
output dtype, per tile of ``block_m x block_n``; what a "group" is depends on the template
(``xvendor.rocm.tiling`` maps a workgroup to its group and tile):

- ``gemm``: one group; A (M, K), B (N, K) view of b, C (M, N).
- ``grouped_mm`` 2Dx3D: ragged rows; group g is rows ``offs[g-1]:offs[g]`` of A and C,
  with B[g]. 3Dx3D: A[g], B[g], C[g]. 2Dx2D: ragged K; out[g] = A[:, Kg] @ B[Kg, :].

Code paths (all chosen on the host, at build time, so each compiles to straight code):
- operand majors: A and B are each K-major (K contiguous: 16-byte ``buffer_load_dwordx4``
  into a swizzled K-major LDS tile, ``ds_read_b128`` into MFMA fragments) or MN-major
  (M/N contiguous: 16-byte loads along M/N into an MN-major LDS tile swizzled by 16-element
  groups, transposing 8-byte reads ``ds_read_b64_tr_b16`` into fragments: 4 K values of one
  M/N per instruction, where element-wise reads took one ``ds_read_u16`` each). ``gemm`` NT
  = both K-major; NN = B MN-major (so is the MoE forward 2Dx3D with b (G, K, N)); 2Dx2D =
  both MN-major.
- pipeline: ``stages`` LDS buffers; the global loads of tile ``k + stages - 1`` are issued
  before the MFMAs of tile ``k`` and written to LDS after them; one barrier per K tile.
- bounds, all in the kernel (the host never pads, ``xvendor.rocm.launch``): every global
  access goes through a buffer descriptor whose size ends where the workgroup's group
  ends, so loads past it read 0 and stores past it are dropped. That masks M tails, ragged
  group ends and an MN-major operand's K tail in hardware. A K-major operand's K tail is
  inside its rows, so the loads of a K tile that reaches past K are zeroed past K in
  registers (NOTE [K tail]; only on that tile: a uniform branch), and C's N tail by
  predicated stores (NOTE [N tail]). Values past M or N in an operand (garbage from the
  next row, never used by an in-range output) only reach outputs that are dropped.
- orientation: the MFMAs compute C^T = B A^T (our B is the MMA's A operand), so each lane
  holds runs of 4 consecutive N of C at one M (NOTE [C transposed] at ``store_c_t``).
- epilogue: fp32 accumulator (+ bias, broadcast along M through a stride-0 view) ->
  out dtype (bf16, fp16 or fp32) -> vector buffer stores along N (bf16: 4 elements, 8
  bytes, ``buffer_store_dwordx2``, where each element took a ``buffer_store_short``), as
  wide as N's divisibility allows (``store_width``; the launch passes ``n_align``), one
  predicate per store for the N tail.

NOTE [unverified numerics]: these kernels compile to real gfx950 code objects on a CPU
(``xvendor compile --backend flydsl``), but nothing here can run them. Their numerics are
unverified until they run on a gfx950 device; the dispatch layer's correctness gate
(``xvendor.registry``) checks each (kernel, config, arch, FlyDSL version) against the
reference on first use and never chooses a failing one again.
"""

from .tiling import columns_left, k_left, operand_views, rows_left, tile_of, traced

ARCH = "gfx950"
WAVE = 64


def _k_major_copy(fx, dtype, rows, block_k, threads):
    """G2S copy of a (rows, block_k) K-major tile: thread t takes 8 contiguous K of one row."""
    tc = block_k // 8
    tr = threads // tc
    return fx.make_tiled_copy(fx.make_copy_atom(fx.rocdl.BufferCopy128b(), dtype),
                              fx.make_layout(((tc, tr), (1, 8)), ((tr * 8, 1), (1, tr))),
                              fx.make_tile(tr, block_k))


def _mn_major_copy(fx, dtype, rows, block_k, threads):
    """G2S copy of a (rows, block_k) MN-major tile: thread t takes 8 contiguous rows of one K."""
    tn = rows // 8
    tk = threads // tn
    return fx.make_tiled_copy(fx.make_copy_atom(fx.rocdl.BufferCopy128b(), dtype),
                              fx.make_layout(((tn, tk), 8), ((8, rows), 1)),
                              fx.make_tile(rows, tk))


def mn_major_swizzle(fx, rows: int):
    """XOR swizzle of an MN-major LDS tile: the row index's 16-element groups ^= low K bits.

    Each K row of the tile is ``rows`` elements, so without it the lanes of one transposing
    read (4 K rows at the same M/N) hit the same LDS banks. The XOR moves whole 16-element
    groups (bits 4.. of the M/N index), so the 8-element G2S writes and the 4-element
    ``ds_read_b64_tr_b16`` reads stay contiguous.
    """
    if rows < 32 or rows & (rows - 1):
        raise ValueError(f"an MN-major LDS tile needs a power-of-two row count >= 32 (block_m "
                         f"and block_n of the config), got {rows}")
    shift = rows.bit_length() - 1 - 4  # log2(rows) - 4: from the row bits to the K bits
    return fx.static(fx.SwizzleType.get(min(2, shift), 4, shift))


def smem_operand(fx, base, dtype, rows, cfg, k_major: bool, threads: int):
    """(LDS view (rows, BK, stages), G2S tiled copy, S2R copy atom) of one operand."""
    shape = (rows, cfg.block_k, cfg.stages)
    if k_major:  # XOR swizzle of 16-byte chunks: conflict-free ds_read_b128 along K
        layout = fx.make_composed_layout(fx.static(fx.SwizzleType.get(3, 3, 3)),
                                         fx.make_ordered_layout(shape, (1, 0, 2)))
        return (fx.make_view(base, layout), _k_major_copy(fx, dtype, rows, cfg.block_k, threads),
                fx.make_copy_atom(fx.UniversalCopy128b(), dtype))
    # MN-major: the MFMA fragment wants 8 consecutive K of one M/N per lane, which lie
    # ``rows`` apart here; gfx950's transposing LDS read (ds_read_b64_tr_b16) gathers them,
    # 4 per instruction, instead of one 16-bit read per element.
    layout = fx.make_composed_layout(mn_major_swizzle(fx, rows),
                                     fx.make_ordered_layout(shape, (0, 1, 2)))
    return (fx.make_view(base, layout), _mn_major_copy(fx, dtype, rows, cfg.block_k, threads),
            fx.make_copy_atom(fx.rocdl.cdna4.LDSReadTrans16_64b(), dtype))


def tile_coords(fx, thr_copy, rows: int, cols: int):
    """(row, col) of each value ``thr_copy`` moves in a (rows, cols) tile, in the order of
    its partitions: the coordinates the tail masks compare (tests/rocm/test_layout_proofs.py
    checks that they cover the tile once)."""
    return thr_copy.partition_S(fx.make_view((0, 0), fx.make_identity_layout((rows, cols))))


def store_copy(fx, mma, TO, vec: int = 1):
    """(atom, tiled copy) of the C stores: ``vec`` consecutive accumulator values (of one
    lane, contiguous in C) per buffer store."""
    store = fx.make_copy_atom(fx.rocdl.BufferCopy(TO.width * vec), TO)
    return store, fx.make_tiled_copy_C(store, mma)


# Consecutive accumulator values a lane holds along the atom's M (our N: NOTE [C
# transposed]), per matrix instruction M: MFMA 16x16 and 32x32 hand each lane runs of 4,
# WMMA 16x16 (gfx1250) runs of 8. tests/rocm/test_layout_proofs.py checks these on the
# partitions.
C_RUN = {16: 4, 32: 4}


def store_width(run: int, n_align: int, out_bits: int) -> int:
    """Elements per C store: the lane's run, at most 16 bytes, and a divisor of N (so a
    vector never straddles the N tail and every vector starts aligned to its size)."""
    return max(1, min(run, n_align, 128 // out_bits))


def zero_k_tail(fx, reg, coords, rows: int, k_left):
    """Set the values of a K-major register tile whose K index is ``k_left`` or more to 0.

    NOTE [K tail]: a K-major operand's view ends at the end of the group's rows, so a load
    past K inside a row reads the row's padding or the next row (never 0): those values are
    zeroed here, before they reach LDS. ``coords``: the (row, k) of each value, from the
    same G2S partition of an identity tile. ``k_left`` >= block_k for all but the last K
    tile (the select keeps every value then).
    """
    keep = [fx.elem_less(coords[i], (rows, k_left)) for i in range(fx.size(coords).to_py_value())]
    vals = reg.load()
    mask = fx.Vector.from_elements(keep, fx.Boolean).reshape(vals.shape)
    reg.store(mask.select(vals, fx.Vector.zeros_like(vals)))


def tiled_mma(fx, cfg, dtype):
    """The workgroup's MFMA tiling of C^T (NOTE [C transposed]): warps_n x warps_m waves of
    one MFMA atom each; the atom's M runs along our N, its N along our M."""
    k = 32 if cfg.mma == 16 else 16
    atom = fx.make_mma_atom(fx.rocdl.MFMA(cfg.mma, cfg.mma, k, dtype))
    return fx.make_tiled_mma(atom, fx.make_layout((cfg.warps_n, cfg.warps_m, 1),
                                                  (1, cfg.warps_n, 0)))


def build(template: str, cfg, *, dtype: str, out_dtype: str, has_bias: bool,
          a_k_major: bool, b_k_major: bool, n_align: int = 1, c_col_major: bool = False):
    """The ``@flyc.jit`` launcher of one specialization (see ``xvendor.rocm.launch``)."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx

    T = {"bf16": fx.BFloat16, "fp16": fx.Float16}[dtype]
    TO = {"bf16": fx.BFloat16, "fp16": fx.Float16, "fp32": fx.Float32}[out_dtype]
    BM, BN, BK, S = cfg.block_m, cfg.block_n, cfg.block_k, cfg.stages
    threads = cfg.warps_m * cfg.warps_n * WAVE
    smem_bytes = (BM + BN) * BK * S * 2
    mode = template
    tile = traced(tile_of)  # the group/tile mapping the layout proofs run on ints

    @flyc.kernel
    def kernel(A: fx.Tensor, B: fx.Tensor, C: fx.Tensor, Bias: fx.Tensor, Offs: fx.Tensor,
               M: fx.Int32, N: fx.Int32, K: fx.Int32, G: fx.Int32,
               lda: fx.Int32, ldb: fx.Int32, ldc: fx.Int32,
               sag: fx.Int32, sbg: fx.Int32, scg: fx.Int32, sbiasg: fx.Int32,
               tiles_m: fx.Int32, tiles_n: fx.Int32):
        tid = fx.thread_idx.x
        bid = fx.block_idx.x
        valid, g, pid_m, pid_n, row0, rows, k0, kn = tile(
            mode, bid, M, K, G, Offs, tiles_m, tiles_n, BM)
        if valid:
            gA, gB, gC, gBias = operand_views(
                fx, A, B, C, Bias, g, row0, rows, k0, kn, N, lda, ldb, ldc,
                sag, sbg, scg, sbiasg, a_k_major, b_k_major, has_bias,
                c_col_major=c_col_major)
            gA = fx.flat_divide(gA, fx.make_tile(BM, BK))[None, None, pid_m, None]
            gB = fx.flat_divide(gB, fx.make_tile(BN, BK))[None, None, pid_n, None]
            gC = fx.flat_divide(gC, fx.make_tile(BN, BM))[None, None, pid_n, pid_m]  # C^T
            mma = tiled_mma(fx, cfg, T)
            thr_mma = mma.thr_slice(tid)
            sbase = fx.recast_iter(fx.PointerType.get(T.ir_type, fx.AddressSpace.Shared, 512),
                                   fx.get_dyn_shared())
            sA, g2sA, s2rA_atom = smem_operand(fx, sbase, T, BM, cfg, a_k_major, threads)
            sB, g2sB, s2rB_atom = smem_operand(fx, fx.add_offset(sbase, BM * BK * S), T, BN,
                                               cfg, b_k_major, threads)
            g2sA = g2sA.get_slice(tid)
            g2sB = g2sB.get_slice(tid)
            tgA = g2sA.partition_S(gA)
            tsA = g2sA.partition_D(sA)
            tgB = g2sB.partition_S(gB)
            tsB = g2sB.partition_D(sB)
            regA = fx.make_fragment_like(tsA[None, None, None, 0])
            regB = fx.make_fragment_like(tsB[None, None, None, 0])
            # (row, k) of each loaded value: NOTE [K tail]
            cA = tile_coords(fx, g2sA, BM, BK)
            cB = tile_coords(fx, g2sB, BN, BK)
            # C^T = B A^T: our A is the MMA's B operand, our B its A (NOTE [C transposed])
            s2rA = fx.make_tiled_copy_B(s2rA_atom, mma).get_slice(tid)
            s2rB = fx.make_tiled_copy_A(s2rB_atom, mma).get_slice(tid)
            ssA = s2rA.partition_S(sA)
            ssB = s2rB.partition_S(sB)
            fA = thr_mma.make_fragment_B(sA[None, None, 0])
            fB = thr_mma.make_fragment_A(sB[None, None, 0])
            fC = thr_mma.make_fragment_C(gC)
            rA = s2rA.retile(fA)
            rB = s2rB.retile(fB)
            fC.fill(0.0)
            g2r = fx.make_copy_atom(fx.rocdl.BufferCopy128b(), T)
            r2s = fx.make_copy_atom(fx.UniversalCopy128b(), T)
            k_tiles = (kn + (BK - 1)) // BK
            # prologue: tiles 0 .. S-2 into stages 0 .. S-2 (reads past K give 0: unused)
            for s in fx.range_constexpr(S - 1):
                fx.copy(g2r, tgA[None, None, None, s], regA)
                fx.copy(g2r, tgB[None, None, None, s], regB)
                if k_left(kn, s, BK) < BK:  # the K tail (or past it): NOTE [K tail]
                    if a_k_major:
                        zero_k_tail(fx, regA, cA, BM, k_left(kn, s, BK))
                    if b_k_major:
                        zero_k_tail(fx, regB, cB, BN, k_left(kn, s, BK))
                fx.copy(r2s, regA, tsA[None, None, None, s])
                fx.copy(r2s, regB, tsB[None, None, None, s])
            fx.gpu.barrier()
            for k in range(k_tiles):
                nxt = k + (S - 1)
                fx.copy(g2r, tgA[None, None, None, nxt], regA)  # in flight during the MFMAs
                fx.copy(g2r, tgB[None, None, None, nxt], regB)
                st = k % S
                fx.copy(s2rA_atom, ssA[None, None, None, st], rA)
                fx.copy(s2rB_atom, ssB[None, None, None, st], rB)
                fx.gemm(mma, fC, fB, fA, fC)
                wt = nxt % S  # the stage read in iteration k-1: free since its barrier
                if k_left(kn, nxt, BK) < BK:
                    if a_k_major:
                        zero_k_tail(fx, regA, cA, BM, k_left(kn, nxt, BK))
                    if b_k_major:
                        zero_k_tail(fx, regB, cB, BN, k_left(kn, nxt, BK))
                fx.copy(r2s, regA, tsA[None, None, None, wt])
                fx.copy(r2s, regB, tsB[None, None, None, wt])
                fx.gpu.barrier()
            store_c_t(fx, mma, tid, fC, gC, gBias, pid_m, pid_n, TO, has_bias, BM, BN,
                      columns_left(N, pid_n, BN), rows_left(rows, pid_m, BM),
                      store_width(C_RUN[cfg.mma], n_align, TO.width))

    @flyc.jit
    def launch(A: fx.Tensor, B: fx.Tensor, C: fx.Tensor, Bias: fx.Tensor, Offs: fx.Tensor,
               M: fx.Int32, N: fx.Int32, K: fx.Int32, G: fx.Int32,
               lda: fx.Int32, ldb: fx.Int32, ldc: fx.Int32,
               sag: fx.Int32, sbg: fx.Int32, scg: fx.Int32, sbiasg: fx.Int32,
               tiles_m: fx.Int32, tiles_n: fx.Int32, grid: fx.Int32,
               stream: fx.Stream = fx.Stream(None)):
        kernel(A, B, C, Bias, Offs, M, N, K, G, lda, ldb, ldc, sag, sbg, scg, sbiasg,
               tiles_m, tiles_n).launch(grid=(grid, 1, 1), block=(threads, 1, 1),
                                        smem=smem_bytes, stream=stream)

    return launch, smem_bytes, threads


def store_c_t(fx, mma, tid, fC, gC, gBias, pid_m, pid_n, TO, has_bias, BM, BN, n_left,
              m_left, vec: int):
    """The GEMM templates' epilogue (bf16/fp16 and the scaled MX ones): fp32 C^T accumulator
    (+ bias) -> out dtype -> buffer stores of ``vec`` elements, masked to columns < ``n_left``.

    NOTE [C transposed]: the kernels compute C^T = B A^T (our B is the MMA's A operand), so
    each lane's accumulator holds runs of consecutive N at one M: ``C_RUN`` values,
    contiguous in row-major C, stored ``vec`` at a time (``store_width``) instead of one
    element per store. ``gC``: the workgroup's (BN, BM) tile of C^T (N contiguous).
    NOTE [N tail]: C's rows are N long (no padding), so a tile column past N would land in
    the next row: each store is predicated on its first column (``n_left`` = N - the tile's
    first column). ``vec`` divides N, so a vector's columns are all below ``n_left`` or all
    at or past it, and one predicate per vector is exact. Rows at or
    past ``m_left`` (the group's end) are predicated off as well: a row-major C's descriptor
    would drop them too, a column-major C's (3Dx2D) would not (``tiling.view_bounds``).
    """
    acc = fC.load()
    if has_bias:  # bias arrives as fp32 (host), broadcast along M by a stride-0 view
        gBias = fx.flat_divide(gBias, fx.make_tile(BN, BM))[None, None, pid_n, pid_m]
        bias_atom = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Float32)
        tb = fx.make_tiled_copy_C(bias_atom, mma).get_slice(tid)
        fbias = fx.make_fragment_like(fC)
        fx.copy(bias_atom, tb.partition_S(gBias), tb.retile(fbias))
        acc = acc + fbias.load()
    out = fx.make_fragment_like(fC, TO.ir_type)
    out.store(acc.to(TO))
    store, tc = store_copy(fx, mma, TO, vec)
    tc = tc.get_slice(tid)
    dst = tc.partition_S(gC)
    coords = tile_coords(fx, tc, BN, BM)  # (n, m) of each value, a vector's values first
    shape = fx.get_layout(dst).shape.to_py_value()  # ((vec, stores per run), rest...)
    first = shape[0] if isinstance(shape[0], tuple) else (shape[0],)
    # one predicate per store, in the stores' order: vector i is values i*vec ..
    keep = fx.make_rmem_tensor(((1,) + tuple(first[1:]),) + tuple(shape[1:]), fx.Boolean)
    for i in fx.range_constexpr(fx.size(coords).to_py_value() // vec):
        keep[i] = fx.elem_less(coords[i * vec], (n_left, m_left))
    fx.copy(store, tc.retile(out), dst, pred=keep)
