"""The ``flydsl`` backend: FlyDSL GEMM / grouped GEMM / RMSNorm / topk templates on gfx950 and
gfx1250.

Runs on ROCm devices (torch "cuda" devices with ``torch.version.hip``) whose arch is
gfx950 (MFMA templates, ``gemm_gfx950``) or gfx1250 (WMMA + Tensor Data Mover,
``gemm_gfx1250``), with the config the dispatch layer passes (``config=``, a tuned
``Config.to_dict()``) or the arch's default (``xvendor.rocm.configs``). Arguments arrive
checked by ``xvendor.ops``; the wrappers plan (``xvendor.rocm.launch``), build (cached per
specialization), launch — nothing else.

NOTE [unverified numerics]: nothing in CI can run these kernels. They compile to real
code objects on a CPU (``xvendor compile --backend flydsl``) and their layouts are proved
(tests/rocm), but their numerics are unverified until they run on gfx950/gfx1250
hardware. The record is gated (``gate_identity``): the first use of each compiled
specialization on a device is checked against the reference and a failing
specialization is never used again (NOTE [correctness gate] in ``xvendor.gate``): the
gate identity names the compiled specialization (template, config, majors, bias, dtypes,
FlyDSL version), the same key the build cache uses. RMSNorm (``xvendor.rocm.rmsnorm``)
keys on template, config, dtype, weight dtype, has-weight, residual, ragged rows and the
version; topk (``xvendor.rocm.topk``) on form (router / radix), config, dtype, largest,
ragged rows and the version; the RMSNorm backward (``xvendor.rms_norm_backward``, which
``xvendor.rms_norm``'s autograd calls) on template, config, dtypes, has-weight, ragged
rows and the version. ``rms_norm_residual`` (the fused ``rms_norm(x + residual)``) is a
kernel without an op of its own yet: a fused op would call it.
"""

from __future__ import annotations

import functools

import torch

from .. import devices
from . import configs, launch, rmsnorm, scaled_configs, scaled_launch, topk as _topk

__all__ = ["KERNELS", "gemm", "grouped_mm", "rms_norm", "rms_norm_backward",
           "rms_norm_residual", "topk", "probe", "gate_identity"]

ARCHS = configs.TARGETS
_built: dict = {}


@functools.lru_cache(maxsize=1)
def flydsl_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("flydsl")
    except PackageNotFoundError:
        return None


def probe() -> str | None:
    """``None`` when the backend can run here, else why not (plainly)."""
    ver = flydsl_version()
    if ver is None:
        return "flydsl is not installed (pip install 'xvendor[rocm]')"
    if not ver.startswith("0.3."):
        return f"flydsl {ver} is installed; these templates are written for the 0.3.x line"
    if not torch.version.hip:
        return ("no ROCm device: this torch build has no HIP (FlyDSL kernels run only on "
                "AMD gfx950/gfx1250; here they are compiled and inspected, never run: "
                "`xvendor compile --backend flydsl`)")
    if not torch.cuda.is_available():
        return "no ROCm device visible (torch.cuda.is_available() is False)"
    archs = {devices.detect(torch.device("cuda", i)).arch
             for i in range(torch.cuda.device_count())}
    if not archs & set(ARCHS):
        return f"ROCm devices are {sorted(archs)}, not gfx950 or gfx1250"
    return None


def _config(arch: str, op: str, config: dict | None) -> configs.Config:
    return configs.Config(**{k: config[k] for k in _CONFIG_FIELDS}) if config \
        else configs.default(arch, op)


_CONFIG_FIELDS = tuple(configs.Config.__dataclass_fields__)


def gate_identity(op: str, info, dtype, args: tuple, config: dict | None) -> str:
    """The compiled specialization a call runs: template, config, spec, FlyDSL version."""
    if op == "rms_norm":
        cfg = _norm_config(info.arch, args[0], config)
        template, spec = rmsnorm.specialization(args, cfg)
    elif op == "rms_norm_backward":
        cfg = _norm_bwd_config(info.arch, config)
        template, spec = rmsnorm.specialization_backward(args[:3], cfg)
    elif op == "topk":
        cfg = _topk_config(info.arch, args, config)
        template, spec = _topk.specialization(args[:2] + tuple(args[2:4]), cfg, info.arch)
    elif op == "scaled_mm":
        cfg = scaled_configs.config_from(config, info.arch)
        mx = int(getattr(args[3], "value", args[3])) == scaled_launch.MX
        template = scaled_configs.TEMPLATE if mx else scaled_configs.TEMPLATE_ROWWISE
        spec = {"fmt": "e4m3" if args[0].dtype == torch.float8_e4m3fn else "e2m1",
                "out_dtype": "bf16", "recipe": "mx" if mx else "rowwise",
                "n_align": launch.n_align(args[1].shape[1])}  # as scaled_launch's plans
    else:
        cfg = _config(info.arch, op, config)
        template, spec = launch.specialization(op, args, cfg)
    flags = ",".join(f"{k}={v}" for k, v in sorted(spec.items()))
    return f"{template}/{cfg.name}/{flags}/flydsl-{flydsl_version()}"


def _launch(plan, arch: str, cfg, build, device):
    """Build (once per specialization) and launch ``plan`` on ``device``'s current stream;
    ``build(cfg, arch=, **spec)`` returns (launcher, ...). The plan's result."""
    key = (arch, plan.template, cfg, tuple(sorted(plan.spec.items())))
    fn = _built.get(key)
    if fn is None:
        fn = _built[key] = build(cfg, arch=arch, **plan.spec)[0]
    fn(*plan.args, torch.cuda.current_stream(device))  # the stream argument is positional
    return plan.result()


def _run(plan: launch.Launch, arch: str, cfg):
    def build(cfg, arch, **spec):  # the GEMM family: the arch's template module
        from .crosscompile import template_module
        return template_module(arch).build(plan.template, cfg, **spec)
    return _launch(plan, arch, cfg, build, plan.args[0].device)


def gemm(a, b, bias=None, out_dtype=None, *, config=None):
    arch = devices.info(a.device).arch
    cfg = _config(arch, "gemm", config)
    return _run(launch.plan_gemm(a, b, bias, out_dtype, cfg), arch, cfg)


def _norm_config(arch: str, x, config: dict | None) -> configs.NormConfig:
    """The tuned config, else the arch's default for x's row length."""
    return configs.config_from("rms_norm", config) if config \
        else configs.norm_for(arch, x.shape[-1] if x.dim() else 1)


def rms_norm(x, weight=None, eps=None, *, config=None):
    """xvendor.rms_norm over the last dim; ValueError (aten then serves) when weight spans
    more than the last dim or x/weight dtypes are not the kernel's."""
    arch = devices.info(x.device).arch
    cfg = _norm_config(arch, x, config)
    plan = rmsnorm.plan(x, weight, eps, cfg)
    if x.numel() == 0:
        return plan.result()  # no rows or no columns: nothing to launch
    return _launch(plan, arch, cfg, rmsnorm.build, x.device)


def rms_norm_backward(grad, x, weight=None, eps=None, *, config=None):
    """(dx, dweight or None) of ``xvendor.rms_norm`` over the last dim (NOTE [rms_norm
    backward] in ``xvendor.rocm.rmsnorm``); ValueError (aten then serves) as the forward."""
    arch = devices.info(x.device).arch
    cfg = _norm_bwd_config(arch, config)
    plan = rmsnorm.plan_backward(grad, x, weight, eps, cfg)
    if x.numel() == 0:
        return _op_backward_result(plan.result(), x)
    return _op_backward_result(_launch(plan, arch, cfg, rmsnorm.build_backward, x.device), x)


def _norm_bwd_config(arch: str, config: dict | None) -> configs.NormConfig:
    return configs.config_from("rms_norm_bwd", config) if config \
        else configs.NORM_BWD_DEFAULTS[arch]


def _op_backward_result(result: tuple, x) -> tuple:
    """The op's (dx, dweight): an empty dweight without a weight (ops return no None)."""
    dx, dweight = result
    return dx, (dweight if dweight is not None else x.new_empty(0))


def rms_norm_residual(x, residual, weight=None, eps=None, *, config=None):
    """(rms_norm(x + residual), x + residual) in one pass (NOTE [fused residual] in
    ``xvendor.rocm.rmsnorm``); the sum is rounded to x's dtype once, as torch's ``x + r``."""
    arch = devices.info(x.device).arch
    cfg = _norm_config(arch, x, config)
    plan = rmsnorm.plan(x, weight, eps, cfg, residual=residual)
    if x.numel() == 0:
        return plan.result()
    return _launch(plan, arch, cfg, rmsnorm.build, x.device)


def _topk_config(arch: str, args: tuple, config: dict | None) -> configs.TopkConfig:
    x, k, dim = (tuple(args) + (-1,))[:3]
    if config:
        return configs.TopkConfig(**{f: config[f] for f in configs.TopkConfig.__dataclass_fields__})
    return configs.topk_for(arch, x.shape[dim] if x.dim() else 1, k)


def topk(x, k, dim=-1, largest=True, sorted=True, *, config=None):
    """torch.topk along ``dim``; always sorted (valid for sorted=False). ValueError (aten
    then serves) for dtypes or sizes the kernels do not take (``xvendor.rocm.topk``)."""
    arch = devices.info(x.device).arch
    cfg = _topk_config(arch, (x, k, dim), config)
    plan = _topk.plan(x, k, dim, largest, cfg, arch)
    if x.numel() == 0 or k == 0:
        return plan.result()
    return _launch(plan, arch, cfg, _topk.build, x.device)


def scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b, swizzle_a=0, swizzle_b=0,
              bias=None, output_dtype=torch.bfloat16, *, config=None):
    """MX (e4m3 or e2m1, E8M0 block-32 scales) and RowWise/TensorWise e4m3 scaled GEMM,
    bf16 out (``xvendor.rocm.scaled_gfx950`` / ``scaled_gfx1250``); ValueError (aten then
    serves) for what the templates do not take: bias, other outputs, e5m2, swizzles."""
    arch = devices.info(a.device).arch
    cfg = scaled_configs.config_from(config, arch)
    plan = scaled_launch.plan_scaled_mm(a, b, scale_a, recipe_a, scale_b, recipe_b,
                                        swizzle_a, swizzle_b, bias, output_dtype, cfg=cfg)
    return _launch(plan, arch, cfg, scaled_launch.build, a.device)


def grouped_mm(a, b, offs=None, bias=None, out_dtype=None, *, config=None):
    arch = devices.info(a.device).arch
    cfg = _config(arch, "grouped_mm", config)
    return _run(launch.plan_grouped(a, b, offs, bias, out_dtype, cfg), arch, cfg)


KERNELS = {"gemm": gemm, "grouped_mm": grouped_mm, "rms_norm": rms_norm,
           "rms_norm_backward": rms_norm_backward, "topk": topk, "scaled_mm": scaled_mm}
