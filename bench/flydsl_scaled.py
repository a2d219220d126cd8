"""FlyDSL MX scaled GEMM: static report of each arch's default config (no AMD GPU needed).

    python bench/flydsl_scaled.py

Compiles ``xvendor.rocm.scaled_launch``'s representative problem (M, N off the tile, K a
multiple of 32 but not of block_k) for gfx950 and gfx1250 in MXFP8 (e4m3), MXFP4 (e2m1) and
RowWise e4m3 to real code objects and prints what ``xvendor.tuning.resources.inspect`` reads:
registers, LDS, occupancy, spills and the scaled matrix instruction. Nothing is timed; the
numerics need a gfx950/gfx1250 device (the correctness gate checks them on first use).
"""

from __future__ import annotations

from xvendor.rocm import scaled_configs, scaled_launch
from xvendor.tuning import resources


def main() -> None:
    print("| arch | format | config | VGPR | LDS B | WG/CU | spills | instruction (count) |")
    print("|---|---|---|---|---|---|---|---|")
    for arch in ("gfx950", "gfx1250"):
        cfg = scaled_configs.default(arch)
        for fmt, recipe in (("e4m3", "mx"), ("e2m1", "mx"), ("e4m3", "rowwise")):
            rec = resources.inspect(arch, scaled_launch.compile_mx(arch, fmt, None, recipe))
            name = {"mx": "MXFP8" if fmt == "e4m3" else "MXFP4"}.get(recipe, "RowWise e4m3")
            print(f"| {arch} | {name} | {cfg.name} | {rec.get('vgpr')} | {rec.get('lds_bytes')} "
                  f"| {rec.get('occupancy')} | {rec.get('spills')} | `{rec.get('mma_instr')}` "
                  f"x{rec.get('mma_count')} |")


if __name__ == "__main__":
    main()
