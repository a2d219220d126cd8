"""torchtitan modules whose math runs on xvendor's ops (built by the overrides in
``overrides.py``; each keeps its torchtitan base class, parameters and state-dict keys).

- ``seamed_experts(owner)``: a subclass of any ``GroupedExperts`` class (torchtitan's own,
  gpt_oss's) whose ``_grouped_mm`` seam (``A (R, D) @ B_t (E, D, F)`` per expert, int32
  cumulative ``offs``) is ``xvendor.grouped_mm``'s 2Dx3D layout.
- ``XvendorRMSNorm``: ``RMSNorm`` on ``xvendor.rms_norm`` (forward and backward).
- ``XvendorRouter``: ``TokenChoiceTopKRouter`` with every ``torch.topk`` of its routing
  (the final top-k, node-limited routing's top-2-per-group and group selection) on
  ``xvendor.topk``; expert bias, score functions, route norm/scale and the debug
  load-balance routing as in torchtitan 0.3.0.

DTensor inputs (tensor parallel) have no sharding rule on xvendor's ops: these modules run
torchtitan's own code for them (``XvendorRMSNorm``) or hand them to xvendor as local tensors
where torchtitan itself does (the experts take ``to_local()`` weights). Tensor parallel is
not verified here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor
from torchtitan.models.common.moe import GroupedExperts, TokenChoiceTopKRouter
from torchtitan.models.common.nn_modules import RMSNorm

from ...ops import grouped_mm, rms_norm, topk
from . import counts

_SEAMED: dict[type, type] = {}


def _xvendor_grouped_mm(self, *, A: torch.Tensor, B_t: torch.Tensor,
                        offs: torch.Tensor) -> torch.Tensor:
    counts.record("grouped_mm")
    return grouped_mm(A, B_t, offs)


def seamed_experts(owner: type) -> type:
    """The subclass of ``owner`` (a ``GroupedExperts`` class) with the xvendor seam; one per
    owner, with its own ``Config`` so ``Config.build()`` builds it."""
    if not (isinstance(owner, type) and issubclass(owner, GroupedExperts)):
        raise TypeError(f"seamed_experts: owner must be a GroupedExperts subclass, got {owner!r}")
    if getattr(owner, "_xvendor_seam", False):
        return owner
    if owner not in _SEAMED:
        name = f"Xvendor{owner.__name__}"
        config = dataclass(kw_only=True, slots=True)(
            type("Config", (owner.Config,), {"__qualname__": f"{name}.Config",
                                              "__module__": __name__}))
        _SEAMED[owner] = type(name, (owner,), {
            "Config": config, "_grouped_mm": _xvendor_grouped_mm, "_xvendor_seam": True,
            "__module__": __name__, "__doc__": f"{owner.__name__} on xvendor.grouped_mm."})
    return _SEAMED[owner]


XvendorGroupedExperts = seamed_experts(GroupedExperts)


class XvendorRMSNorm(RMSNorm):
    """torchtitan's RMSNorm on ``xvendor.rms_norm``."""

    @dataclass(kw_only=True, slots=True)
    class Config(RMSNorm.Config):
        pass

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(x, DTensor) or isinstance(self.weight, DTensor):
            return super().forward(x)  # tensor parallel: torchtitan's path (see the module)
        if isinstance(self.normalized_shape, tuple) and len(self.normalized_shape) != 1 \
                and self.weight is None:
            return super().forward(x)  # xvendor normalizes weight's dims or the last one
        counts.record("rms_norm")
        return rms_norm(x, self.weight, self.eps)


def _topk(x: torch.Tensor, k: int, *, sorted: bool) -> tuple[torch.Tensor, torch.Tensor]:
    counts.record("topk")
    return topk(x, k, dim=-1, sorted=sorted)


class XvendorRouter(TokenChoiceTopKRouter):
    """Token-choice top-k routing with xvendor.topk (see the module docstring)."""

    @dataclass(kw_only=True, slots=True)
    class Config(TokenChoiceTopKRouter.Config):
        pass

    def _get_node_limited_routing_scores(self, scores_BLE: torch.Tensor) -> torch.Tensor:
        """Keep the experts of the ``num_limited_groups`` groups whose two best experts score
        highest; the others get -inf."""
        if self.num_limited_groups is None:
            raise ValueError("num_limited_groups must be set when num_expert_groups is set")
        groups = self.num_expert_groups
        if self.num_experts % groups:
            raise ValueError(f"num_experts ({self.num_experts}) must be divisible by "
                             f"num_expert_groups ({groups})")
        per_group = self.num_experts // groups
        if per_group < 2:
            raise ValueError(f"experts_per_group ({per_group}) must be >= 2")
        grouped = scores_BLE.unflatten(-1, (groups, per_group))
        best2, _ = _topk(grouped, 2, sorted=True)  # torch's Tensor.topk default: sorted
        _, chosen = _topk(best2.sum(dim=-1), self.num_limited_groups, sorted=False)
        dropped = torch.ones(grouped.shape[:-1], dtype=torch.bool, device=grouped.device)
        dropped.scatter_(-1, chosen, False)
        return grouped.masked_fill(dropped.unsqueeze(-1), float("-inf")).flatten(-2)

    def forward(self, x_BLD: torch.Tensor, expert_bias_E: torch.Tensor | None = None):
        if isinstance(x_BLD, DTensor):
            return super().forward(x_BLD, expert_bias_E)  # tensor parallel: torchtitan's path
        with torch.autocast(device_type=x_BLD.device.type, dtype=torch.float32):
            scores = self.gate(x_BLD)  # fp32 gate, as torchtitan
        if self.score_func == "sigmoid":
            scores = torch.sigmoid(scores)
        elif self.score_func == "softmax":
            scores = F.softmax(scores, dim=-1)
        else:
            raise NotImplementedError(f"Unknown score function {self.score_func}")
        # The bias steers which experts are chosen; the gate values come from the raw scores.
        choice = scores if expert_bias_E is None else scores + expert_bias_E
        if self.num_expert_groups is not None:
            choice = self._get_node_limited_routing_scores(choice)
        _, ids = _topk(choice, self.top_k, sorted=False)
        gates = scores.gather(dim=-1, index=ids)
        if self._debug_force_load_balance:
            ids, gates = self._debug_force_load_balance_routing(scores)
        if self.route_norm:
            gates = gates / (gates.sum(dim=-1, keepdim=True) + 1e-20)
        return gates * self.route_scale, ids, scores
