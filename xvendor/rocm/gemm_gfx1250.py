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
- epilogue: fp32 accumulator (+ fp32 bias) -> out dtype -> bounded buffer stores,
  predicated to C's N columns, as on gfx950 (no host padding: NOTE [N tail] there).
- MN-major fragments are still read from LDS element-wise (``ds_load_u16``): FlyDSL
  0.3.4.1's transposing LDS copy atom is gfx950's (``ds_read_b64_tr_b16``; LLVM cannot
  select it for gfx1250), and gfx1250's ``ds_load_tr16_b128`` is only exposed as a raw
  per-lane helper (``fx.rocdl.lds_transpose_load``), whose lane mapping onto the WMMA
  fragment nothing here can check without the hardware.

NOTE [unverified numerics]: compiled to real gfx1250 code objects on a CPU; never run.
Numerics are unverified until they run on a gfx1250 device; the dispatch layer's
correctness gate checks each kernel there on first use (``xvendor.gate``).
"""

from .tiling import columns_left, operand_views, tile_of, traced

ARCH = "gfx1250"
WAVE = 32
_PAD = 8  # LDS row padding (elements) of the TDM tiles


def tdm_operand(fx, base, gX, rows, cfg, k_major: bool, tile_index, num_warps: int, warp):
    """(TDM atom, per-wave global tiles (…, k), per-wave LDS stages, LDS view (rows, BK, S))."""
    cdna5 = fx.rocdl.cdna5
    BK, S = cfg.block_k, cfg.stages
    if k_major:
        tile = fx.make_layout((rows, BK), (BK + _PAD, 1))
        stage_stride = rows * (BK + _PAD)
        view = fx.make_layout((rows, BK, S), (BK + _PAD, 1, stage_stride))
    else:
        tile = fx.make_layout((rows, BK), (1, rows + _PAD))
        stage_stride = BK * (rows + _PAD)
        view = fx.make_layout((rows, BK, S), (1, rows + _PAD, stage_stride))
    atom, tiled = cdna5.make_tiled_tdm_atom(cdna5.TensorLoad(), gX, tile, (rows, BK),
                                            num_warps=num_warps)
    tiled = fx.zipped_divide(tiled, fx.make_tile(rows, BK))[None, (tile_index, None)]
    stages = fx.make_view(base, fx.make_layout(((rows, BK), S),
                                               (tuple(tile.stride.to_py_value()), stage_stride)))
    ts, tg = cdna5.tdm_partition(atom, warp, fx.make_layout(num_warps, 1), stages, tiled)
    return atom, tg, ts, fx.make_view(base, view), stage_stride * S


def tiled_mma(fx, cfg, dtype):
    atom = fx.make_mma_atom(fx.rocdl.WMMA(16, 16, 32, dtype))
    return fx.make_tiled_mma(atom, fx.make_layout((cfg.warps_m, cfg.warps_n, 1),
                                                  (1, cfg.warps_m, 0)))


def lds_bytes(cfg) -> int:
    """LDS the launch requests: padded A and B tiles for every stage."""
    bk, s = cfg.block_k, cfg.stages
    return 2 * s * (cfg.block_m * (bk + _PAD) + cfg.block_n * (bk + _PAD))


def build(template: str, cfg, *, dtype: str, out_dtype: str, has_bias: bool,
          a_k_major: bool, b_k_major: bool):
    """The ``@flyc.jit`` launcher of one specialization (see ``xvendor.rocm.launch``)."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from flydsl.expr.rocdl import tdm_ops

    from .gemm_gfx950 import epilogue

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
                sag, sbg, scg, sbiasg, a_k_major, b_k_major, has_bias, tdm=True)
            gC = fx.flat_divide(gC, fx.make_tile(BM, BN))[None, None, pid_m, pid_n]
            warp = tid // WAVE
            sbase = fx.recast_iter(fx.PointerType.get(T.ir_type, fx.AddressSpace.Shared, 512),
                                   fx.get_dyn_shared())
            atomA, tgA, tsA, sA, a_elems = tdm_operand(fx, sbase, gA, BM, cfg, a_k_major,
                                                       pid_m, NW, warp)
            atomB, tgB, tsB, sB, _ = tdm_operand(fx, fx.add_offset(sbase, a_elems), gB, BN,
                                                 cfg, b_k_major, pid_n, NW, warp)
            mma = tiled_mma(fx, cfg, T)
            thr_mma = mma.thr_slice(tid)
            s2rA_atom = fx.make_copy_atom(
                fx.UniversalCopy128b() if a_k_major else fx.UniversalCopy16b(), T)
            s2rB_atom = fx.make_copy_atom(
                fx.UniversalCopy128b() if b_k_major else fx.UniversalCopy16b(), T)
            s2rA = fx.make_tiled_copy_A(s2rA_atom, mma).get_slice(tid)
            s2rB = fx.make_tiled_copy_B(s2rB_atom, mma).get_slice(tid)
            ssA = s2rA.partition_S(sA)
            ssB = s2rB.partition_S(sB)
            fA = thr_mma.make_fragment_A(sA[None, None, 0])
            fB = thr_mma.make_fragment_B(sB[None, None, 0])
            fC = thr_mma.make_fragment_C(gC)
            rA = s2rA.retile(fA)
            rB = s2rB.retile(fB)
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
                fx.copy(s2rA_atom, ssA[None, None, None, st], rA)
                fx.copy(s2rB_atom, ssB[None, None, None, st], rB)
                fx.gemm(mma, fC, fA, fB, fC)
            tdm_ops.tensor_wait(0)
            epilogue(fx, mma, tid, fC, gC, gBias, pid_m, pid_n, TO, has_bias, BM, BN,
                     columns_left(N, pid_n, BN))  # NOTE [N tail]

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
