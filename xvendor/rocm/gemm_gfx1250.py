"""FlyDSL GEMM and ragged grouped GEMM for gfx1250 (MI450): WMMA (wave32) + Tensor Data Mover.

Same math, templates and group mapping as ``xvendor.rocm.gemm_gfx950`` (see there and
``xvendor.rocm.tiling``); what differs is the machine:

- matrix instruction: ``v_wmma_f32_16x16x32_{bf16,f16}`` on wave32 (gfx1250 has no MFMA:
  LLVM aborts with "Cannot select: intrinsic llvm.amdgcn.mfma");
- global -> LDS: the Tensor Data Mover (``tensor_load_to_lds``). Each wave issues its share
  of the A and B tiles of a K step as one descriptor-driven DMA straight into LDS, no VGPR
  staging; the descriptor carries the group's extents, so the hardware zero-fills loads
  past a group end or past K (no host padding of K) and the LDS rows are padded by 8
  elements against bank conflicts;
- pipeline: ``stages`` LDS buffers; tile ``k + stages - 1`` is issued right after the
  barrier that retires tile ``k - 1``; ``s_wait_tensorcnt`` + a barrier make tile ``k``
  visible to all waves before its WMMAs;
- epilogue: the WMMAs compute C^T, as on gfx950, so each lane holds runs of 8
  consecutive N at one M: fp32 accumulator (+ fp32 bias) -> out dtype -> bounded buffer
  stores of up to 16 bytes (bf16: 8 elements, ``buffer_store_b128``, where each element
  took a ``buffer_store_b16``), one predicate per store for C's N tail (``store_c_t`` in
  ``gemm_gfx950``; no host padding).
- fragments: K-major operands are read from LDS with 16-byte ``ds_load_b128``; MN-major
  ones (gemm NN's B, the MoE forward's B, both operands of 2Dx2D) with the transposing
  ``ds_load_tr16_b128``, 8 K values of one M/N per lane and instruction, where the
  element-wise path took one ``ds_load_u16`` each (NOTE [tr16 reads]). FlyDSL 0.3.4.1 has
  no copy atom for it (its transposing atom is gfx950's ``ds_read_b64_tr_b16``), so the
  kernel issues the raw instruction at per-lane addresses computed here.
  Verified here: tests/rocm/test_tr16_proofs.py runs a model of the instruction (from its
  published descriptions, cited there) on integer-labelled tiles at the kernel's own
  addresses and gets exactly the WMMA fragment, for every lane of every shipped config;
  the code objects contain the instruction. Not verified: the model itself against the
  hardware (no gfx1250 here; the correctness gate checks the kernels on first use).

NOTE [unverified numerics]: compiled to real gfx1250 code objects on a CPU; never run.
Numerics are unverified until they run on a gfx1250 device; the dispatch layer's
correctness gate checks each kernel there on first use (``xvendor.gate``).
"""

from .tiling import columns_left, layout_offsets, operand_views, rows_left, tile_of, traced

ARCH = "gfx1250"
WAVE = 32
_PAD = 8  # LDS row padding (elements) of the TDM tiles


def lds_layout(rows: int, cfg, k_major: bool):
    """(shape, stride) of an operand's LDS tiles, (rows, block_k, stages), in elements:
    the contiguous dimension's rows are padded by ``_PAD`` elements (16 bytes, so every
    row starts 16-byte aligned)."""
    bk, s = cfg.block_k, cfg.stages
    if k_major:
        return (rows, bk, s), (bk + _PAD, 1, rows * (bk + _PAD))
    return (rows, bk, s), (1, rows + _PAD, bk * (rows + _PAD))


def tdm_operand(fx, base, gX, rows, cfg, k_major: bool, tile_index, num_warps: int, warp):
    """(TDM atom, per-wave global tiles (…, k), per-wave LDS stages, LDS view (rows, BK, S))."""
    cdna5 = fx.rocdl.cdna5
    BK, S = cfg.block_k, cfg.stages
    shape, (s_row, s_k, stage_stride) = lds_layout(rows, cfg, k_major)
    tile = fx.make_layout((rows, BK), (s_row, s_k))
    view = fx.make_layout(shape, (s_row, s_k, stage_stride))
    atom, tiled = cdna5.make_tiled_tdm_atom(cdna5.TensorLoad(), gX, tile, (rows, BK),
                                            num_warps=num_warps)
    tiled = fx.zipped_divide(tiled, fx.make_tile(rows, BK))[None, (tile_index, None)]
    stages = fx.make_view(base, fx.make_layout(((rows, BK), S),
                                               (tuple(tile.stride.to_py_value()), stage_stride)))
    ts, tg = cdna5.tdm_partition(atom, warp, fx.make_layout(num_warps, 1), stages, tiled)
    return atom, tg, ts, fx.make_view(base, view), stage_stride * S


def tr16_lane_offset(lane, ld):
    """Where lane ``lane`` points ``ds_load_tr16_b128``, from its own first fragment element.

    NOTE [tr16 reads]: ``ld`` is the K stride of an MN-major LDS tile (M/N contiguous). A
    lane's WMMA fragment (16x16x32, wave32) holds runs of 8 consecutive K at one M/N; lanes
    8q .. 8q+7 hold 8 consecutive M/N of the same K run. The transposing read makes those 8
    lanes each supply one 16-byte row (8 contiguous M/N at one K) and hands lane 8q+i the
    i-th element of each of the 8 rows, in lane order. So lane 8q+j must point at the row of
    K run start + j, starting at the group's first M/N: ``j`` further along K and ``j`` back
    along M/N from its own first element. Plain arithmetic: the kernel calls it on FlyDSL
    values, tests/rocm/test_tr16_proofs.py on ints, with a model of the instruction.
    """
    j = lane % 8
    return j * ld - j


def tr16_groups(offsets, ld) -> list[tuple[int, int]]:
    """(first slot, LDS offset) of each transposing read filling a fragment of ``offsets``.

    Each read fills 8 consecutive fragment slots, which must be 8 consecutive K (``ld``
    apart) at one M/N: anything else is a layout this read cannot produce, refused here.
    """
    groups = []
    for s in range(0, len(offsets), 8):
        run = offsets[s:s + 8]
        if run != [run[0] + j * ld for j in range(8)]:
            raise ValueError(f"fragment slots {s}..{s + 7} are not 8 consecutive K values "
                             f"(LDS offsets {run}, K stride {ld}): no ds_load_tr16_b128 path")
        groups.append((s, run[0]))
    return groups


def k_major_operand(fx, mma, tid, view, operand: str, dtype):
    """A reader of one K-major operand's fragment (``operand``: the MMA's, "A" or "B"):
    16-byte LDS reads (8 K per lane)."""
    atom = fx.make_copy_atom(fx.UniversalCopy128b(), dtype)
    make = fx.make_tiled_copy_A if operand == "A" else fx.make_tiled_copy_B
    s2r = make(atom, mma).get_slice(tid)
    src = s2r.partition_S(view)

    def read(frag, st):
        fx.copy(atom, src[None, None, None, st], s2r.retile(frag))
    return read


def tr16_operand(fx, thr_mma, view, operand: str, rows: int, cfg, lane):
    """A reader of one MN-major operand's fragment through ``ds_load_tr16_b128``.

    ``view``: the operand's LDS view (``lds_layout``, MN-major); ``operand``: which of the
    MMA's it is ("A" or "B"); ``rows``: its M/N extent. Returns ``read(frag, st)``:
    fills ``frag`` (the WMMA fragment the element-wise path filled) from stage ``st`` with
    one transposing read per 8 values. The fragment's slot -> LDS offset map comes from
    FlyDSL's partition of the view (static), the lane's base from its iterator (runtime).
    """
    from flydsl._mlir import ir
    from flydsl._mlir.dialects import rocdl as rocdl_ops
    _, (_, ld, stage_elems) = lds_layout(rows, cfg, False)
    part = getattr(thr_mma, f"partition_{operand}")(view[None, None, 0])
    layout = fx.get_layout(part)
    groups = tr16_groups(layout_offsets(layout.shape.to_py_value(),
                                        layout.stride.to_py_value()), ld)
    base = fx.get_iter(part)  # this lane's first fragment element, stage 0
    extra = tr16_lane_offset(lane, ld)

    def read(frag, st):
        vec8 = ir.VectorType.get([8], frag.element_type.ir_type)
        for slot, off in groups:
            ptr = fx.to_llvm_ptr(fx.add_offset(base, st * stage_elems + (extra + off)))
            vals = fx.Vector(rocdl_ops.ds_load_tr16_b128(vec8, ptr))
            for j in range(8):
                frag[slot + j] = vals[j]
    return read


def tiled_mma(fx, cfg, dtype):
    """The WMMA tiling of C^T (NOTE [C transposed] in ``gemm_gfx950``): warps_n x warps_m
    waves; the atom's M runs along our N, its N along our M."""
    atom = fx.make_mma_atom(fx.rocdl.WMMA(16, 16, 32, dtype))
    return fx.make_tiled_mma(atom, fx.make_layout((cfg.warps_n, cfg.warps_m, 1),
                                                  (1, cfg.warps_n, 0)))


C_RUN = 8  # WMMA 16x16: each lane holds runs of 8 consecutive accumulator M (our N)
# C^T = B A^T: the MMA operand each of our operands is
MMA_OPERAND = {"A": "B", "B": "A"}


def lds_bytes(cfg) -> int:
    """LDS the launch requests: padded A and B tiles for every stage."""
    bk, s = cfg.block_k, cfg.stages
    return 2 * s * (cfg.block_m * (bk + _PAD) + cfg.block_n * (bk + _PAD))


def build(template: str, cfg, *, dtype: str, out_dtype: str, has_bias: bool,
          a_k_major: bool, b_k_major: bool, n_align: int = 1, c_col_major: bool = False):
    """The ``@flyc.jit`` launcher of one specialization (see ``xvendor.rocm.launch``)."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr.rocdl import tdm_ops

    from .gemm_gfx950 import store_c_t, store_width

    T = {"bf16": fx.BFloat16, "fp16": fx.Float16}[dtype]
    TO = {"bf16": fx.BFloat16, "fp16": fx.Float16, "fp32": fx.Float32}[out_dtype]
    BM, BN, BK, S = cfg.block_m, cfg.block_n, cfg.block_k, cfg.stages
    NW = cfg.warps_m * cfg.warps_n
    threads = NW * WAVE
    smem_bytes = lds_bytes(cfg)
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
                sag, sbg, scg, sbiasg, a_k_major, b_k_major, has_bias, tdm=True,
                c_col_major=c_col_major)
            gC = fx.flat_divide(gC, fx.make_tile(BN, BM))[None, None, pid_n, pid_m]  # C^T
            warp = tid // WAVE
            sbase = fx.recast_iter(fx.PointerType.get(T.ir_type, fx.AddressSpace.Shared, 512),
                                   fx.get_dyn_shared())
            atomA, tgA, tsA, sA, a_elems = tdm_operand(fx, sbase, gA, BM, cfg, a_k_major,
                                                       pid_m, NW, warp)
            atomB, tgB, tsB, sB, _ = tdm_operand(fx, fx.add_offset(sbase, a_elems), gB, BN,
                                                 cfg, b_k_major, pid_n, NW, warp)
            mma = tiled_mma(fx, cfg, T)
            thr_mma = mma.thr_slice(tid)
            # C^T = B A^T: our A is the MMA's B operand, our B its A (MMA_OPERAND)
            fA = thr_mma.make_fragment_B(sA[None, None, 0])
            fB = thr_mma.make_fragment_A(sB[None, None, 0])
            fC = thr_mma.make_fragment_C(gC)
            lane = tid % WAVE
            # K-major operands: 16-byte ds_load_b128; MN-major ones: NOTE [tr16 reads]
            opA, opB = MMA_OPERAND["A"], MMA_OPERAND["B"]
            readA = k_major_operand(fx, mma, tid, sA, opA, T) if a_k_major else \
                tr16_operand(fx, thr_mma, sA, opA, BM, cfg, lane)
            readB = k_major_operand(fx, mma, tid, sB, opB, T) if b_k_major else \
                tr16_operand(fx, thr_mma, sB, opB, BN, cfg, lane)
            fC.fill(0.0)
            k_tiles = (kn + (BK - 1)) // BK
            for s in fx.range_constexpr(S - 1):  # tiles past K are zero-filled: unused
                fx.copy(atomA, tgA[None, s], tsA[None, s])
                fx.copy(atomB, tgB[None, s], tsB[None, s])
            for k in range(k_tiles):
                tdm_ops.tensor_wait(2 * (S - 2))  # this wave's share of tile k
                fx.gpu.barrier()  # every wave's share landed; tile k-1's stage is free
                nxt = k + (S - 1)
                fx.copy(atomA, tgA[None, nxt], tsA[None, nxt % S])
                fx.copy(atomB, tgB[None, nxt], tsB[None, nxt % S])
                st = k % S
                readA(fA, st)
                readB(fB, st)
                fx.gemm(mma, fC, fB, fA, fC)
            tdm_ops.tensor_wait(0)
            store_c_t(fx, mma, tid, fC, gC, gBias, pid_m, pid_n, TO, has_bias, BM, BN,
                      columns_left(N, pid_n, BN), rows_left(rows, pid_m, BM),
                      store_width(C_RUN, n_align, TO.width))

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
