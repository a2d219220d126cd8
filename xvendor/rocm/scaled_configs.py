"""Config spaces of the FlyDSL scaled (MX BlockWise1x32) GEMM templates, per exact arch, as data.

A point is an ``xvendor.rocm.configs.Config`` (block_m x block_n x block_k, warps_m x
warps_n waves, LDS stages); ``mma`` is 16: the scaled atoms are 16x16x128 on both arches
(gfx950 ``v_mfma_scale_f32_16x16x128_f8f6f4``, gfx1250 ``v_wmma_scale_f32_16x16x128_f8f6f4``).

Rules every point obeys (``check``): block_k a multiple of 128 (one atom's K); block_m /
block_n multiples of 16 x the waves along them; the G2S copy (16 bytes per thread) covering
whole rows of the tile in passes that divide block_m and block_n, for fp8 and fp4 rows.

Why these candidates (nothing here can time them; the sweep keeps only those that compile
with no spills and LDS within the arch):
- gfx950 (160 KiB LDS, wave64): 128x128x128 with 2x2 waves and 2 stages is the MX workhorse
  (64 KiB of fp8 tiles, two workgroups per CU); 3 stages and 256-wide tiles still fit.
- gfx1250 (320 KiB LDS, wave32): the same tiles; deeper pipelines fit twice over.
``FORMATS`` are the element formats a template compiles for (both operands alike).
"""

from __future__ import annotations

from .configs import TARGETS, WAVE, Config

TEMPLATE = "scaled_mm:mx"
TEMPLATE_ROWWISE = "scaled_mm:rowwise"  # TensorWise / RowWise fp32 scales, e4m3 only
FORMATS = ("e4m3", "e2m1")


def _space(rows) -> tuple[Config, ...]:
    return tuple(Config(*row) for row in rows)


# (block_m, block_n, block_k, warps_m, warps_n, stages, mma)
SPACES: dict[str, tuple[Config, ...]] = {
    "gfx950": _space([
        (128, 128, 128, 2, 2, 2, 16), (128, 128, 128, 2, 2, 3, 16), (64, 64, 128, 2, 2, 2, 16),
        (128, 128, 256, 2, 2, 2, 16), (256, 128, 128, 4, 2, 2, 16),
    ]),
    "gfx1250": _space([
        (128, 128, 128, 2, 2, 2, 16), (128, 128, 128, 2, 2, 3, 16), (64, 64, 128, 2, 2, 2, 16),
        (256, 128, 128, 4, 2, 2, 16),
    ]),
}
DEFAULTS: dict[str, Config] = {
    "gfx950": Config(128, 128, 128, 2, 2, 2, 16),
    "gfx1250": Config(128, 128, 128, 2, 2, 2, 16),
}
# The exact matrix instruction each arch's MX template must contain (the inspection checks
# for it by name: an fp8 GEMM can also compile to the older, unscaled fp8 MFMA).
MX_INSTR = {"gfx950": "v_mfma_scale_f32_16x16x128_f8f6f4",
            "gfx1250": "v_wmma_scale_f32_16x16x128_f8f6f4"}


def check(cfg: Config, arch: str) -> None:
    """Raise ValueError naming the rule a config breaks for ``arch``'s MX template."""
    if arch not in SPACES:
        raise ValueError(f"arch must be one of {TARGETS}, got {arch!r}")
    rules = [
        (cfg.mma == 16, "mma must be 16 (the scaled atoms are 16x16x128)"),
        (cfg.block_k % 128 == 0 and cfg.block_k >= 128, "block_k must be a multiple of 128"),
        (cfg.block_m % (16 * cfg.warps_m) == 0, "block_m must be a multiple of 16 * warps_m"),
        (cfg.block_n % (16 * cfg.warps_n) == 0, "block_n must be a multiple of 16 * warps_n"),
        (cfg.stages >= 2, "stages must be at least 2"),
    ]
    threads = cfg.num_warps * WAVE[arch]
    for bits in (8, 4):  # e4m3, e2m1: one 16-byte G2S copy per thread, whole rows per pass
        chunks = cfg.block_k * bits // 8 // 16
        ok = chunks > 0 and threads % chunks == 0 and \
            min(cfg.block_m, cfg.block_n) % (threads // chunks) == 0
        rules.append((ok, f"{threads} threads copying 16 bytes each must cover whole "
                          f"{bits}-bit rows of block_k and divide block_m and block_n"))
    broken = [why for ok, why in rules if not ok]
    if broken:
        raise ValueError(f"config {cfg.name} for {arch}: " + "; ".join(broken))


def default(arch: str) -> Config:
    return DEFAULTS[arch]


def config_from(value: dict | Config | None, arch: str) -> Config:
    """A tuned config (dict), a Config, or None (the default), checked for ``arch``."""
    cfg = DEFAULTS[arch] if value is None else value if isinstance(value, Config) \
        else Config(**value)
    check(cfg, arch)
    return cfg
