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

RMSNorm (``NormConfig``, ``xvendor.rocm.rmsnorm``) has its own space: ``vec`` elements per
load, ``rows`` per workgroup (1: the waves share a row; == waves: one wave per row) and
``waves`` per workgroup; its backward (template ``rms_norm_bwd``) another space of the same
kind. topk (``TopkConfig``, ``xvendor.rocm.topk``) has one template per form,
``topk:router`` and ``topk:radix``, each with the configs of its form. ``TEMPLATES`` stays
the GEMM family (its consumers read GEMM tiles); ``NORM_TEMPLATES``, ``TOPK_TEMPLATES`` and
``ALL_TEMPLATES`` (what ``xvendor compile --backend flydsl`` and the sweep build) name the
rest. ``OP_TEMPLATES`` maps each op the backend serves to the templates that run it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

TEMPLATES = ("gemm", "grouped_mm")
# Specializations compiled with each template's default config: the other operand layout of
# gemm (NN: b row-major) and the other grouped layouts (2Dx3D is the representative).
# rms_norm: "rms_norm:rows" compiles the several-rows-per-workgroup default (short rows),
# "rms_norm:fp32w" bf16 activations with fp32 master weights (two loads per weight vector).
# rms_norm:residual the fused rms_norm(x + residual); rms_norm_bwd:fp32 fp32 tensors,
# rms_norm_bwd:nw no weight; topk:router:fp32 fp32 router logits, topk:radix:smallest
# fp16 with largest=False (the reversed key).
VARIANTS = {"gemm": ("gemm:NN",), "grouped_mm": ("grouped_mm:2Dx2D", "grouped_mm:3Dx3D"),
            "rms_norm": ("rms_norm:rows", "rms_norm:fp32w", "rms_norm:residual"),
            "rms_norm_bwd": ("rms_norm_bwd:fp32", "rms_norm_bwd:nw"),
            "topk:router": ("topk:router:fp32",), "topk:radix": ("topk:radix:smallest",)}
# THE arch pair of the FlyDSL backend, and each one's wave width: every module of rocm/
# (record, backend, templates' configs) reads them from here.
TARGETS = ("gfx950", "gfx1250")
WAVE = {"gfx950": 64, "gfx1250": 32}  # MI355X wave64, MI450 wave32 (xvendor.archs agrees)


def base_template(name: str) -> str:
    """The template a specialization name belongs to ("topk:radix:smallest" ->
    "topk:radix", "gemm:NN" -> "gemm")."""
    for t in sorted(ALL_TEMPLATES, key=len, reverse=True):
        if name == t or name.startswith(t + ":"):
            return t
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


@dataclass(frozen=True)
class NormConfig:
    """One point of the RMSNorm space: elements per load, rows and waves per workgroup."""
    vec: int
    rows: int = 1
    waves: int = 4

    @property
    def name(self) -> str:
        return f"v{self.vec}_r{self.rows}_w{self.waves}"

    @property
    def num_warps(self) -> int:
        return self.waves

    def to_dict(self) -> dict:
        return asdict(self)


NORM_TEMPLATES = ("rms_norm", "rms_norm_bwd")
TOPK_TEMPLATES = ("topk:router", "topk:radix")
ALL_TEMPLATES = TEMPLATES + NORM_TEMPLATES + TOPK_TEMPLATES
OP_TEMPLATES = {"gemm": ("gemm",), "grouped_mm": ("grouped_mm",), "rms_norm": ("rms_norm",),
                "rms_norm_backward": ("rms_norm_bwd",), "topk": TOPK_TEMPLATES}


def _norm_space(rows) -> tuple[NormConfig, ...]:
    return tuple(NormConfig(*row) for row in rows)


# (vec, rows, waves). rows == 1: the waves share a row (LDS holds one partial per wave);
# rows == waves: one wave per row (lane shuffles only). vec 8 = 16-byte bf16/fp16 loads,
# 4 = 8-byte, 2 = 4-byte.
NORM_SPACES: dict[str, tuple[NormConfig, ...]] = {
    "gfx950": _norm_space([  # wave64
        (8, 1, 4), (8, 1, 2), (8, 1, 8), (8, 1, 16), (4, 1, 4), (4, 1, 8), (2, 1, 4),
        (8, 4, 4), (8, 2, 2), (8, 8, 8), (4, 4, 4),
    ]),
    "gfx1250": _norm_space([  # wave32
        (8, 1, 8), (8, 1, 4), (8, 1, 16), (8, 1, 32), (4, 1, 8), (4, 1, 16), (2, 1, 8),
        (8, 8, 8), (8, 4, 4), (8, 16, 16), (4, 8, 8),
    ]),
}
# Chosen without timing (no hardware here), from what a memory-bound kernel needs:
# - vec 8: 16-byte accesses, the widest a lane issues on both archs, so the fewest memory
#   instructions per byte moved;
# - 256 threads per workgroup on both (gfx950: 4 wave64, gfx1250: 8 wave32): a row chunk
#   is 2048 elements, so hidden 4096-8192 takes 2-4 chunks per lane, and a workgroup of
#   256 lanes with 40 VGPRs leaves room for 8 per CU (register limit far away);
# - short rows (``norm_for``): a row below one chunk would idle most of a workgroup's
#   lanes, so the several-rows form gives each row one wave (256 threads, 4 or 8 rows).
NORM_DEFAULTS: dict[str, dict[str, NormConfig]] = {
    "gfx950": {"rms_norm": NormConfig(8, 1, 4), "rms_norm:rows": NormConfig(8, 4, 4)},
    "gfx1250": {"rms_norm": NormConfig(8, 1, 8), "rms_norm:rows": NormConfig(8, 8, 8)},
}


def norm_for(arch: str, hidden: int) -> NormConfig:
    """The default RMSNorm config for rows of ``hidden`` elements (see NORM_DEFAULTS)."""
    one_row = NORM_DEFAULTS[arch]["rms_norm"]
    if hidden >= one_row.waves * WAVE[arch] * one_row.vec:
        return one_row
    return NORM_DEFAULTS[arch]["rms_norm:rows"]


def config_from(template: str, config: dict):
    """A config of ``template``'s kind from its ``to_dict()``."""
    base = base_template(template)
    kind = NormConfig if base in NORM_TEMPLATES else TopkConfig if base in TOPK_TEMPLATES \
        else Config
    return kind(**{k: config[k] for k in kind.__dataclass_fields__})


def default(arch: str, template: str):
    base = base_template(template)
    if base == "rms_norm_bwd":
        return NORM_BWD_DEFAULTS[arch]
    if base in TOPK_TEMPLATES:
        return TOPK_DEFAULTS[arch][base.partition(":")[2]]
    if base in NORM_TEMPLATES:
        d = NORM_DEFAULTS[arch]
        return d.get(template, d[base])
    return DEFAULTS[arch][base]


def space(arch: str, template: str) -> tuple:
    """The config space of ``template`` (a specialization name is its template's)."""
    base = base_template(template)
    if base == "rms_norm_bwd":
        return NORM_BWD_SPACES[arch]
    if base in TOPK_TEMPLATES:
        return tuple(c for c in TOPK_SPACES[arch] if c.form == base.partition(":")[2])
    return NORM_SPACES[arch] if base in NORM_TEMPLATES else SPACES[arch][base]


def candidates(arch: str, template: str, which: str = "all") -> tuple:
    """``which="all"``: the space (the default first); ``"default"``: only the default."""
    if arch not in SPACES:
        raise KeyError(f"no FlyDSL config space for {arch!r}; FlyDSL targets {list(SPACES)}")
    d = default(arch, template)
    if which == "default":
        return (d,)
    return (d,) + tuple(c for c in space(arch, template) if c != d)


# -- RMSNorm backward (``xvendor.rocm.rmsnorm.build_backward``) -------------------------
# (vec, rows, waves): here ``rows`` is how many consecutive rows one workgroup walks (a
# launch argument: the code is the same for every value) with all its waves on each row
# (NOTE [rms_norm backward]); each workgroup owns one fp32 dweight partial row, so more
# rows per workgroup means fewer partial bytes for the host's final sum (4 * hidden per
# ``rows`` rows of 6 * hidden bf16 bytes: 8% at 8 rows) but fewer workgroups for short
# batches. Keeping every row's dweight term in registers instead (one register set per
# row) was tried: its buffer descriptors spilled 56-505 SGPRs (compiled here).
NORM_BWD_SPACES: dict[str, tuple[NormConfig, ...]] = {
    "gfx950": _norm_space([(8, 8, 4), (8, 4, 4), (8, 16, 4), (8, 8, 8), (4, 8, 4)]),
    "gfx1250": _norm_space([(8, 8, 8), (8, 4, 8), (8, 16, 8), (8, 8, 16), (4, 8, 8)]),
}
# 256 threads and 8 rows: the forward default's chunk (16-byte accesses), and partials
# under a tenth of the traffic; chosen without timing (no hardware here).
# (76 VGPRs bf16 with a weight on gfx950, 58 on gfx1250: no config of these spills.)
NORM_BWD_DEFAULTS: dict[str, NormConfig] = {"gfx950": NormConfig(8, 8, 4),
                                            "gfx1250": NormConfig(8, 8, 8)}


# -- topk (``xvendor.rocm.topk``) --------------------------------------------------------
@dataclass(frozen=True)
class TopkConfig:
    """One point of the topk space. ``form``: "router" (one wave per row, each lane holds
    ``vec`` + 1 candidates in registers: rows up to ``vec * wave`` elements) or "radix"
    (one workgroup per row, radix select through an LDS histogram: any row length);
    ``vec`` elements per load; ``waves`` per workgroup; ``k_max`` (radix) the LDS room
    for the selected entries."""
    form: str
    vec: int
    waves: int
    k_max: int = 0

    @property
    def name(self) -> str:
        return f"{self.form}_v{self.vec}_w{self.waves}" + (f"_k{self.k_max}" if self.k_max else "")

    @property
    def num_warps(self) -> int:
        return self.waves

    def to_dict(self) -> dict:
        return asdict(self)


# router: vec * wave = 256 experts on both (gfx950: 4 x 64, 8-byte bf16 loads; gfx1250:
# 8 x 32, 16-byte loads); 4 rows (waves) per workgroup. radix: 256 threads, 16-byte loads,
# room for k <= 1024 (8 KiB of LDS for the selected keys and indices).
TOPK_SPACES: dict[str, tuple[TopkConfig, ...]] = {
    "gfx950": (TopkConfig("router", 4, 4), TopkConfig("router", 4, 8),
               TopkConfig("radix", 8, 4, 1024), TopkConfig("radix", 8, 8, 1024),
               TopkConfig("radix", 4, 4, 1024)),
    "gfx1250": (TopkConfig("router", 8, 4), TopkConfig("router", 8, 8),
                TopkConfig("radix", 8, 8, 1024), TopkConfig("radix", 8, 16, 1024),
                TopkConfig("radix", 4, 8, 1024)),
}
TOPK_DEFAULTS: dict[str, dict[str, TopkConfig]] = {
    "gfx950": {"router": TopkConfig("router", 4, 4), "radix": TopkConfig("radix", 8, 4, 1024)},
    "gfx1250": {"router": TopkConfig("router", 8, 4), "radix": TopkConfig("radix", 8, 8, 1024)},
}


def topk_for(arch: str, n: int, k: int) -> TopkConfig:
    """The default topk config for rows of ``n`` elements: the router form while a wave
    holds the row in registers and k fits its lanes, else radix select."""
    router = TOPK_DEFAULTS[arch]["router"]
    if n <= router.vec * WAVE[arch] and k <= WAVE[arch]:
        return router
    return TOPK_DEFAULTS[arch]["radix"]
