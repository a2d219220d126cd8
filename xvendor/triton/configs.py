"""Config spaces of the Triton templates, per exact arch, as data.

A ``Config`` is one point of a template's tuning space: the tile (BLOCK_M/N/K), the
GROUP_M band, ``num_warps``/``num_stages``, and the AMD knobs (``waves_per_eu``,
``matrix_instr_nonkdim``, ``kpack``), which are Triton compile options on the HIP backend
and ignored elsewhere. ``SPACES[arch][template]`` lists the candidates before pruning (the
cross-compile sweep in ``xvendor.tuning`` prunes spills, LDS overflow and missing matrix
instructions); ``DEFAULTS[arch][template]`` is the config the backend launches until the
tuner knows better, and must survive that pruning (tested for every arch).

Why these candidates:
- gfx942 (64 KiB LDS): bf16 tiles up to 256x128x64 at 2 stages fit; larger K needs 1 stage.
- gfx950 (160 KiB LDS): 256x256x64 fits LDS at 2 stages (the shape AMD's own GEMMs use)
  but spills with 8 waves (swept: 16 VGPRs for gemm, 93 for grouped_mm), and 256x128x128
  overflows LDS: both stay in the space as the tuner's evidence. ``matrix_instr_nonkdim``
  16 vs 32 picks v_mfma 16x16 vs 32x32.
- gfx1250 (320 KiB LDS, wave32, WMMA): deeper pipelines (3-4 stages) fit; no kpack/nonkdim.
- sm_90 (227 KiB shared): wgmma wants num_warps a multiple of 4 and BLOCK_M >= 64;
  3-4 stages is the usual Hopper sweet spot.
The grouped template shares the GEMM tiles (its inner loop is the same ``_tile_mma``); its
persistent loop keeps ~40-90 more registers live, so its defaults are smaller or use more
warps (sm_90: 128x128x64 with 4 warps spills 64 bytes, with 8 warps it does not; gfx950:
128x128x64 with 4 waves spills 1 VGPR on the 3Dx2D layout, 8 waves at waves_per_eu=2 do not).

Defaults are picked among the configs the cross-compile sweep finds valid (no spills,
within LDS, matrix instruction present), without timing (no hardware here): a tile of at
least 128x128 with the most workgroups per CU, or the classic large tile where only one
fits (gfx950 gemm 256x128, sm_90 gemm 128x256). Figures in ``bench/RESULTS.md``; a winner
measured on hardware replaces them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

TEMPLATES = ("gemm", "grouped_mm")
# Specializations of a template compiled with its configs: the grouped layouts besides the
# representative 2Dx3D (the sweep checks every default on each; the full space on 2Dx3D).
VARIANTS = {"grouped_mm": ("grouped_mm:3Dx2D", "grouped_mm:2Dx2D", "grouped_mm:3Dx3D")}


def base_template(name: str) -> str:
    """``"grouped_mm:3Dx2D"`` -> ``"grouped_mm"``."""
    return name.partition(":")[0]


@dataclass(frozen=True)
class Config:
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 2
    waves_per_eu: int = 0  # AMD only: occupancy hint (0 = compiler's choice)
    matrix_instr_nonkdim: int = 0  # AMD only: 16 or 32 (MFMA M/N), 0 = compiler's choice
    kpack: int = 1  # AMD only (gfx942/gfx950): K elements packed per MFMA operand load

    @property
    def name(self) -> str:
        s = (f"{self.block_m}x{self.block_n}x{self.block_k}_g{self.group_m}"
             f"_w{self.num_warps}_s{self.num_stages}")
        if self.waves_per_eu or self.matrix_instr_nonkdim or self.kpack != 1:
            s += f"_wpe{self.waves_per_eu}_nk{self.matrix_instr_nonkdim}_kp{self.kpack}"
        return s

    def constexprs(self) -> dict:
        """The template's tile meta-parameters."""
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
                "GROUP_M": self.group_m}

    def options(self, backend: str) -> dict:
        """Compile/launch options for Triton backend ``backend`` ("hip" or "cuda")."""
        opts = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if backend == "hip":
            opts.update(waves_per_eu=self.waves_per_eu,
                        matrix_instr_nonkdim=self.matrix_instr_nonkdim, kpack=self.kpack)
        return opts

    def to_dict(self) -> dict:
        return asdict(self)


def _space(rows) -> tuple[Config, ...]:
    return tuple(Config(*row) for row in rows)


# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, waves_per_eu, nonkdim, kpack)
_GFX942 = _space([
    (256, 128, 64, 8, 8, 2, 0, 16, 1), (128, 256, 64, 8, 8, 2, 0, 16, 1),
    (128, 128, 64, 8, 4, 2, 0, 16, 1), (128, 128, 64, 8, 8, 2, 2, 16, 2),
    (128, 128, 64, 8, 4, 2, 0, 32, 1), (128, 128, 32, 8, 4, 2, 0, 16, 1),
    (128, 128, 128, 8, 8, 1, 0, 16, 2), (128, 64, 64, 8, 4, 2, 0, 16, 1),
    (64, 128, 64, 8, 4, 2, 0, 16, 1), (64, 64, 64, 8, 4, 2, 0, 16, 1),
    (64, 64, 128, 4, 4, 2, 2, 16, 2), (64, 64, 32, 4, 2, 2, 0, 16, 1),
    (32, 64, 64, 4, 2, 2, 0, 16, 1), (32, 32, 128, 4, 2, 2, 0, 16, 1),
    (256, 256, 32, 8, 8, 1, 0, 16, 1), (256, 64, 64, 8, 4, 2, 0, 16, 1),
    (64, 256, 64, 8, 4, 2, 0, 32, 1), (128, 128, 64, 16, 8, 2, 1, 16, 1),
])
_GFX950 = _space([
    (256, 256, 64, 8, 8, 2, 0, 16, 1), (256, 256, 64, 8, 8, 2, 0, 32, 1),
    (256, 128, 64, 8, 8, 2, 0, 16, 1), (128, 256, 64, 8, 8, 2, 0, 16, 1),
    (128, 128, 64, 8, 4, 2, 0, 16, 1), (128, 128, 64, 8, 8, 2, 2, 16, 1),
    (128, 128, 128, 8, 8, 2, 0, 16, 1), (128, 128, 64, 8, 4, 3, 0, 32, 1),
    (128, 64, 128, 8, 4, 2, 0, 16, 1), (64, 128, 128, 8, 4, 2, 0, 16, 1),
    (64, 64, 128, 4, 4, 2, 0, 16, 1), (64, 64, 64, 4, 4, 2, 2, 16, 1),
    (32, 64, 128, 4, 2, 2, 0, 16, 1), (32, 32, 128, 4, 2, 2, 0, 16, 1),
    (256, 128, 128, 8, 8, 2, 0, 16, 1), (128, 256, 32, 8, 8, 3, 0, 16, 1),
    (256, 64, 64, 8, 4, 2, 0, 16, 1), (64, 256, 64, 8, 4, 2, 0, 32, 1),
])
_GFX1250 = _space([
    (256, 256, 64, 8, 8, 2, 0, 0, 1), (256, 128, 64, 8, 8, 3, 0, 0, 1),
    (128, 256, 64, 8, 8, 3, 0, 0, 1), (128, 128, 64, 8, 4, 3, 0, 0, 1),
    (128, 128, 64, 8, 8, 4, 0, 0, 1), (128, 128, 128, 8, 8, 2, 0, 0, 1),
    (128, 128, 32, 8, 4, 4, 0, 0, 1), (128, 64, 64, 8, 4, 3, 0, 0, 1),
    (64, 128, 64, 8, 4, 3, 0, 0, 1), (64, 64, 64, 4, 4, 3, 0, 0, 1),
    (64, 64, 128, 4, 4, 2, 0, 0, 1), (64, 32, 64, 4, 2, 3, 0, 0, 1),
    (32, 64, 64, 4, 2, 3, 0, 0, 1), (32, 32, 64, 4, 2, 2, 0, 0, 1),
    (256, 64, 64, 8, 8, 3, 0, 0, 1), (64, 256, 64, 8, 8, 3, 0, 0, 1),
    (128, 128, 64, 8, 4, 2, 2, 0, 1), (256, 128, 32, 8, 8, 4, 0, 0, 1),
])
_SM90 = _space([
    (128, 256, 64, 8, 8, 3, 0, 0, 1), (256, 128, 64, 8, 8, 3, 0, 0, 1),
    (128, 128, 64, 8, 4, 4, 0, 0, 1), (128, 128, 64, 8, 8, 4, 0, 0, 1),
    (128, 128, 64, 8, 4, 3, 0, 0, 1), (128, 128, 128, 8, 8, 3, 0, 0, 1),
    (128, 128, 32, 8, 4, 5, 0, 0, 1), (128, 64, 64, 8, 4, 4, 0, 0, 1),
    (64, 128, 64, 8, 4, 4, 0, 0, 1), (64, 64, 64, 4, 4, 4, 0, 0, 1),
    (64, 64, 128, 4, 4, 3, 0, 0, 1), (64, 256, 64, 8, 4, 3, 0, 0, 1),
    (256, 64, 64, 8, 4, 3, 0, 0, 1), (64, 128, 32, 4, 4, 5, 0, 0, 1),
    (64, 32, 64, 4, 4, 4, 0, 0, 1), (256, 128, 64, 8, 8, 4, 0, 0, 1),
    (128, 256, 64, 8, 8, 4, 0, 0, 1), (64, 64, 32, 4, 4, 6, 0, 0, 1),
])

SPACES: dict[str, dict[str, tuple[Config, ...]]] = {
    arch: {t: space for t in TEMPLATES}
    for arch, space in (("gfx942", _GFX942), ("gfx950", _GFX950), ("gfx1250", _GFX1250),
                        ("sm_90", _SM90))
}

DEFAULTS: dict[str, dict[str, Config]] = {
    "gfx942": {"gemm": Config(128, 128, 64, 8, 4, 2, 0, 16, 1),
               "grouped_mm": Config(128, 128, 64, 8, 4, 2, 0, 16, 1)},
    "gfx950": {"gemm": Config(256, 128, 64, 8, 8, 2, 0, 16, 1),
               "grouped_mm": Config(128, 128, 64, 8, 8, 2, 2, 16, 1)},
    "gfx1250": {"gemm": Config(128, 128, 64, 8, 4, 3, 0, 0, 1),
                "grouped_mm": Config(128, 128, 64, 8, 4, 3, 0, 0, 1)},
    "sm_90": {"gemm": Config(128, 256, 64, 8, 8, 3, 0, 0, 1),
              "grouped_mm": Config(128, 128, 64, 8, 8, 4, 0, 0, 1)},
}

# Archs without a space borrow the nearest one's default (same vendor, the smallest LDS).
_FALLBACK_ARCH = {"amd": "gfx942", "nvidia": "sm_90"}

# The Triton interpreter runs on CPU tensors: small tiles keep several tiles and K steps
# per test shape (edges, GROUP_M bands, persistent loop) while the numpy work stays cheap.
INTERPRETER = Config(32, 32, 32, group_m=2, num_warps=4, num_stages=1)

# Cross-compile targets: arch -> (triton backend, arch id, warp size); `xvendor compile`
# and the CI matrix list them in this order.
TARGETS = {
    "gfx950": ("hip", "gfx950", 64),
    "gfx1250": ("hip", "gfx1250", 32),
    "gfx942": ("hip", "gfx942", 64),
    "sm_90": ("cuda", 90, 32),
}


def default(arch: str, template: str, vendor: str = "") -> Config:
    """The config the backend launches for ``template`` on ``arch``."""
    per_arch = DEFAULTS.get(arch) or DEFAULTS[_FALLBACK_ARCH.get(vendor, "gfx942")]
    return per_arch[base_template(template)]


def candidates(arch: str, template: str, which: str = "all") -> tuple[Config, ...]:
    """``which="all"``: the space (the default first); ``"default"``: only the default."""
    if arch not in SPACES:
        raise KeyError(f"no Triton config space for {arch!r}; known: {sorted(SPACES)}")
    template = base_template(template)
    d = DEFAULTS[arch][template]
    if which == "default":
        return (d,)
    return (d,) + tuple(c for c in SPACES[arch][template] if c != d)
