"""Config spaces of the FlyDSL templates, per exact arch, as data.

A ``Config`` is one point of a template's space: the workgroup tile (block_m x block_n x
block_k), the wave grid (warps_m x warps_n waves, one matrix-instruction atom each), the
number of LDS pipeline stages, and the matrix instruction's M/N (gfx950: MFMA 16x16x32 or
32x32x16; gfx1250: WMMA 16x16x32). ``SPACES[arch][template]`` is what ``xvendor compile
--backend flydsl`` builds; every shipped config must compile with no spills, no scratch,
LDS within the arch limit and the arch's matrix instruction present (checked by
tests/rocm and the sweep). ``DEFAULTS`` is what the backend launches until a tuner
measures better on the device.

Why these candidates:
- gfx950 (160 KiB LDS, wave64, 512 VGPR+AGPR per lane): 128x128x64 with 2x2 waves and 2
  stages is the workhorse (64 KiB LDS, two workgroups per CU); 3-4 stages and 256-wide
  tiles with 8 waves stay within LDS; 32x32x16 MFMA halves the fragment loads per FLOP.
  256x256x64 with 16 waves was dropped: the gemm epilogue spilled 34 VGPRs (swept).
- gfx1250 (320 KiB LDS, wave32, 1024 VGPRs): the Tensor Data Mover fills LDS without
  VGPR staging, so deeper pipelines (3-4 stages) and 256-wide tiles are affordable.
The grouped templates share the GEMM mainloop, so they share the spaces; their defaults
are the same tile (MoE group sizes are rarely far above 128 rows per expert).
Defaults are chosen without timing (no hardware here): the 128x128x64 tile with the most
workgroups per CU among the valid configs (bench/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

TEMPLATES = ("gemm", "grouped_mm")
# Specializations compiled with each template's default config: the other operand layout of
# gemm (NN: b row-major) and the other grouped layouts (2Dx3D is the representative).
VARIANTS = {"gemm": ("gemm:NN",), "grouped_mm": ("grouped_mm:2Dx2D", "grouped_mm:3Dx3D")}
TARGETS = ("gfx950", "gfx1250")


def base_template(name: str) -> str:
    return name.partition(":")[0]


@dataclass(frozen=True)
class Config:
    block_m: int
    block_n: int
    block_k: int
    warps_m: int = 2
    warps_n: int = 2
    stages: int = 2
    mma: int = 16  # the matrix instruction's M = N

    @property
    def name(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k}_w{self.warps_m}x{self.warps_n}"
                f"_s{self.stages}_i{self.mma}")

    @property
    def num_warps(self) -> int:
        return self.warps_m * self.warps_n

    def lds_bytes(self, elem_bytes: int = 2) -> int:
        """LDS the launch requests: A and B tiles for every stage."""
        return (self.block_m + self.block_n) * self.block_k * self.stages * elem_bytes

    def to_dict(self) -> dict:
        return asdict(self)


def _space(rows) -> tuple[Config, ...]:
    return tuple(Config(*row) for row in rows)


# (block_m, block_n, block_k, warps_m, warps_n, stages, mma)
_GFX950 = _space([
    (128, 128, 64, 2, 2, 2, 16), (128, 128, 64, 2, 2, 3, 16), (128, 128, 32, 2, 2, 3, 16),
    (128, 128, 64, 2, 2, 2, 32), (128, 128, 128, 2, 2, 2, 16), (256, 128, 64, 4, 2, 2, 16),
    (128, 256, 64, 2, 4, 2, 16), (128, 64, 64, 2, 2, 2, 16),
    (64, 128, 64, 2, 2, 2, 16), (64, 64, 64, 2, 2, 2, 16), (64, 64, 128, 2, 2, 2, 16),
    (32, 64, 64, 1, 2, 2, 16), (128, 128, 64, 2, 2, 4, 16),
])
_GFX1250 = _space([
    (128, 128, 64, 2, 2, 2, 16), (128, 128, 64, 2, 2, 3, 16), (128, 128, 64, 2, 4, 3, 16),
    (256, 128, 64, 4, 2, 3, 16), (128, 256, 64, 2, 4, 3, 16), (256, 256, 64, 4, 4, 2, 16),
    (128, 128, 32, 2, 2, 4, 16), (64, 128, 64, 2, 2, 3, 16), (128, 64, 64, 2, 2, 3, 16),
    (64, 64, 64, 2, 2, 3, 16), (64, 64, 128, 2, 2, 2, 16), (256, 128, 64, 4, 2, 4, 16),
    (128, 128, 128, 2, 2, 3, 16), (32, 64, 64, 1, 2, 3, 16),
])

SPACES: dict[str, dict[str, tuple[Config, ...]]] = {
    "gfx950": {t: _GFX950 for t in TEMPLATES},
    "gfx1250": {t: _GFX1250 for t in TEMPLATES},
}
DEFAULTS: dict[str, dict[str, Config]] = {
    "gfx950": {t: Config(128, 128, 64, 2, 2, 2, 16) for t in TEMPLATES},
    "gfx1250": {t: Config(128, 128, 64, 2, 2, 3, 16) for t in TEMPLATES},
}


def default(arch: str, template: str) -> Config:
    return DEFAULTS[arch][base_template(template)]


def candidates(arch: str, template: str, which: str = "all") -> tuple[Config, ...]:
    """``which="all"``: the space (the default first); ``"default"``: only the default."""
    if arch not in SPACES:
        raise KeyError(f"no FlyDSL config space for {arch!r}; FlyDSL targets {list(SPACES)}")
    d = default(arch, template)
    if which == "default":
        return (d,)
    return (d,) + tuple(c for c in SPACES[arch][base_template(template)] if c != d)
