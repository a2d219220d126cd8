"""``--override.imports`` targets that put xvendor's ops into torchtitan models.

    --override.imports xvendor.integrations.torchtitan.overrides.xvendor_ops   # all three

or any of them alone:

    xvendor.integrations.torchtitan.overrides.xvendor_grouped_mm   GroupedExperts (any subclass
                                                                   using the _grouped_mm seam)
    xvendor.integrations.torchtitan.overrides.xvendor_rms_norm     RMSNorm (exactly)
    xvendor.integrations.torchtitan.overrides.xvendor_router       TokenChoiceTopKRouter (exactly)

They are torchtitan ``@override`` factories: torchtitan applies them to the config tree
before the model is built and logs each swap as ``[Override] ...``. ``xvendor_ops`` claims
the model's root config and swaps the three kinds of node inside it, logging each swap
itself (``[xvendor] ...``) and saying plainly when the model has no MoE layers (then only
the norms change): torchtitan's own per-override warning for an unmatched target does not
say why. Parameters and state-dict keys are unchanged, so checkpoints load either way.
"""

from __future__ import annotations

import logging

from torchtitan.config import derive, override
from torchtitan.models.common.moe import GroupedExperts, TokenChoiceTopKRouter
from torchtitan.models.common.nn_modules import RMSNorm
from torchtitan.protocols.model import BaseModel

from .layers import XvendorRMSNorm, XvendorRouter, seamed_experts

log = logging.getLogger("xvendor.integrations.torchtitan")


def _experts(cfg: GroupedExperts.Config) -> GroupedExperts.Config:
    owner = type(cfg)._owner
    if getattr(owner, "_xvendor_seam", False) or getattr(owner, "_xvendor_mx", False):
        return cfg  # already on xvendor (the MXFP8 converter's experts run scaled_grouped_mm)
    return derive(cfg, seamed_experts(owner).Config)


def _norm(cfg: RMSNorm.Config) -> XvendorRMSNorm.Config:
    return derive(cfg, XvendorRMSNorm.Config)


def _router(cfg: TokenChoiceTopKRouter.Config) -> XvendorRouter.Config:
    return derive(cfg, XvendorRouter.Config)


@override(target=GroupedExperts.Config,
          description="xvendor: MoE expert GEMMs (the _grouped_mm seam) on xvendor.grouped_mm")
def xvendor_grouped_mm(cfg: GroupedExperts.Config) -> GroupedExperts.Config:
    return _experts(cfg)


@override(target=RMSNorm.Config, exact=True,
          description="xvendor: RMSNorm on xvendor.rms_norm")
def xvendor_rms_norm(cfg: RMSNorm.Config) -> XvendorRMSNorm.Config:
    return _norm(cfg)


@override(target=TokenChoiceTopKRouter.Config, exact=True,
          description="xvendor: MoE router top-k on xvendor.topk")
def xvendor_router(cfg: TokenChoiceTopKRouter.Config) -> XvendorRouter.Config:
    return _router(cfg)


# (target class, exact, factory, op): what xvendor_ops swaps inside the model config.
_SWAPS = ((GroupedExperts.Config, False, _experts, "grouped_mm"),
          (RMSNorm.Config, True, _norm, "rms_norm"),
          (TokenChoiceTopKRouter.Config, True, _router, "topk"))


def swap_all(model_cfg: BaseModel.Config, prefix: str = "model") -> dict[str, list[str]]:
    """Swap every node ``_SWAPS`` names inside ``model_cfg``, in place; returns, per xvendor
    op, the FQNs swapped."""
    done: dict[str, list[str]] = {op: [] for *_, op in _SWAPS}
    for target, exact, factory, op in _SWAPS:
        for fqn, cfg, parent, attr in list(model_cfg.traverse(target, _prefix=prefix)):
            if parent is None or (exact and type(cfg) is not target):
                continue
            new = factory(cfg)
            if new is cfg:
                continue
            if isinstance(parent, list):
                parent[attr] = new
            else:
                setattr(parent, attr, new)
            done[op].append(fqn)
            log.info("[xvendor] %s: %s %s -> %s", op, fqn, type(cfg).__qualname__,
                     type(new).__qualname__)
    return done


@override(target=BaseModel.Config,
          description="xvendor: grouped_mm, rms_norm and router top-k on xvendor ops")
def xvendor_ops(cfg: BaseModel.Config) -> BaseModel.Config:
    done = swap_all(cfg)
    name = type(cfg).__qualname__
    if not done["grouped_mm"] and not done["topk"]:
        log.warning("[xvendor] %s has no MoE layers (no GroupedExperts or TokenChoiceTopKRouter "
                    "config): grouped_mm and topk are not used; %d RMSNorm swapped to "
                    "xvendor.rms_norm", name, len(done["rms_norm"]))
    else:
        log.info("[xvendor] %s: %s", name,
                 ", ".join(f"{len(v)} x {op}" for op, v in done.items()))
    if not any(done.values()):
        log.warning("[xvendor] %s: nothing to swap (no RMSNorm, GroupedExperts or "
                    "TokenChoiceTopKRouter config found)", name)
    return cfg
