"""MXFP8 training of torchtitan models on ``xvendor.nn``: ``XvendorMXFP8Converter``.

torchtitan's own MXFP8 converters need torchao and CUDA sm_100; this one runs wherever
``xvendor.scaled_mm`` / ``scaled_grouped_mm`` run (gfx950 / gfx1250 through FlyDSL, the
CPU reference here). It is a torchtitan ``ModelConfigConverter`` (a config-tree transform
before the model is built), selected the way torchtitan selects converters: in a config
function, ``model_registry(flavor, converters=[XvendorMXFP8Converter.Config()])``, or with
the ready-made configs of ``xvendor.integrations.torchtitan.config_registry``
(``--module xvendor.integrations.torchtitan --config deepseek_v3_debugmodel_mxfp8``).

What it converts (each GEMM's forward, dgrad and wgrad quantized along its contraction,
``xvendor.nn.MXLinearFunction`` / ``MXGroupedMMFunction``):
- ``Linear`` configs (exactly torchtitan's ``Linear``) whose FQN contains one of ``fqns``
  (all when empty), except the MoE router's gate (``...router.gate``: a top-k decision
  flipped by rounding sends a token elsewhere) and names in ``skip``;
- ``GroupedExperts`` configs (any subclass using the ``_grouped_mm`` seam).
Sizes that cannot be MX-blocked (a contraction dimension not a multiple of 32: Linear
in/out features, experts' dim/hidden_dim) are left in high precision; the converter logs
each with the reason and keeps them in ``converter.skipped`` (``converter.converted`` lists
the rest). Master weights stay bf16/fp32; the optimizer sees ordinary gradients.

Verified here (CPU reference backend): FSDP2 (the modules see FSDP's unsharded plain
parameters) and expert parallel (experts see ``to_local()`` weights). Tensor parallel is not
verified: a DTensor input is refused with an error rather than computed wrongly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
from torch.distributed.tensor import DTensor
from torchtitan.config import derive
from torchtitan.models.common.linear import Linear
from torchtitan.models.common.moe import GroupedExperts
from torchtitan.protocols.model import ModelConfigConverter

from ...nn import MXGroupedMMFunction, MXLinearFunction
from . import counts

log = logging.getLogger("xvendor.integrations.torchtitan")
BLOCK = 32
_MX_EXPERTS: dict[type, type] = {}


def _refuse_dtensor(where: str, *tensors) -> None:
    if any(isinstance(t, DTensor) for t in tensors):
        raise NotImplementedError(f"{where}: DTensor input (tensor parallel) is not supported "
                                  "by xvendor's MXFP8 converter; leave TP off or these modules "
                                  "out of `fqns`")


class XvendorMXFP8Linear(Linear):
    """torchtitan ``Linear`` with its GEMMs in MXFP8 (``xvendor.nn.MXLinearFunction``)."""

    @dataclass(kw_only=True, slots=True)
    class Config(Linear.Config):
        pass

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _refuse_dtensor("XvendorMXFP8Linear", x, self.weight)
        counts.record("mx_linear")
        out = MXLinearFunction.apply(x, self.weight, self.bias)
        return out if self.bias is None else out.to(x.dtype)


def _mx_grouped_mm(self, *, A: torch.Tensor, B_t: torch.Tensor,
                   offs: torch.Tensor) -> torch.Tensor:
    _refuse_dtensor(type(self).__name__, A, B_t)
    counts.record("mx_grouped_mm")
    return MXGroupedMMFunction.apply(A, B_t, offs)


def mx_experts(owner: type) -> type:
    """The MXFP8 subclass of a ``GroupedExperts`` class (its ``_grouped_mm`` seam)."""
    if owner not in _MX_EXPERTS:
        name = f"XvendorMXFP8{owner.__name__}"
        config = dataclass(kw_only=True, slots=True)(
            type("Config", (owner.Config,), {"__qualname__": f"{name}.Config",
                                              "__module__": __name__}))
        _MX_EXPERTS[owner] = type(name, (owner,), {
            "Config": config, "_grouped_mm": _mx_grouped_mm, "_xvendor_mx": True,
            "__module__": __name__, "__doc__": f"{owner.__name__} with MXFP8 expert GEMMs."})
    return _MX_EXPERTS[owner]


def _linear_problem(cfg: Linear.Config) -> str | None:
    k, n = cfg.in_features, cfg.out_features
    if k % BLOCK or n % BLOCK:
        return (f"in_features={k}, out_features={n}: both must be multiples of {BLOCK} "
                "(MX blocks along the forward and dgrad contractions)")
    return None


def _experts_problem(cfg: GroupedExperts.Config) -> str | None:
    if cfg.dim % BLOCK or cfg.hidden_dim % BLOCK:
        return (f"dim={cfg.dim}, hidden_dim={cfg.hidden_dim}: both must be multiples of "
                f"{BLOCK} (MX blocks along every expert GEMM's contraction)")
    return None


def _replace(parent, attr, new) -> None:
    if isinstance(parent, list):
        parent[attr] = new
    else:
        setattr(parent, attr, new)


class XvendorMXFP8Converter(ModelConfigConverter):
    """See the module docstring."""

    @dataclass(kw_only=True, slots=True)
    class Config(ModelConfigConverter.Config):
        fqns: list[str] = field(default_factory=list)
        """Convert only Linear configs whose FQN contains one of these (all when empty)."""
        skip: list[str] = field(default_factory=lambda: ["router.gate"])
        """Never convert Linear configs whose FQN contains one of these."""
        experts: bool = True
        """Convert MoE GroupedExperts too."""

    def __init__(self, config: Config):
        self.config = config
        self.converted: dict[str, str] = {}
        self.skipped: dict[str, str] = {}

    def convert(self, model_config):
        for fqn, cfg, parent, attr in list(model_config.traverse(Linear.Config)):
            if parent is None or type(cfg) is not Linear.Config:
                continue
            if self.config.fqns and not any(f in fqn for f in self.config.fqns):
                continue  # not asked for
            excluded = [s for s in self.config.skip if s in fqn]
            why = (f"excluded by skip={excluded} (a router's top-k stays in high precision: "
                   "rounding would send tokens to other experts)" if excluded
                   else _linear_problem(cfg))
            if why:
                self.skipped[fqn] = why
                continue
            _replace(parent, attr, derive(cfg, XvendorMXFP8Linear.Config))
            self.converted[fqn] = "Linear"
        if self.config.experts:
            for fqn, cfg, parent, attr in list(model_config.traverse(GroupedExperts.Config)):
                owner = type(cfg)._owner
                if parent is None or getattr(owner, "_xvendor_mx", False):
                    continue
                why = _experts_problem(cfg)
                if why:
                    self.skipped[fqn] = why
                    continue
                _replace(parent, attr, derive(cfg, mx_experts(owner).Config))
                self.converted[fqn] = owner.__name__
        log.info("[xvendor mxfp8] converted %d modules to MXFP8: %s", len(self.converted),
                 ", ".join(self.converted) or "none")
        for fqn, why in self.skipped.items():
            log.warning("[xvendor mxfp8] left in high precision: %s (%s)", fqn, why)
        return model_config
