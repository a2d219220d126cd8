"""Modules built on xvendor's ops: the MoE expert layer (``GroupedLinear``) and a token-choice
top-k ``MoE`` block that uses it.

``GroupedLinear`` is what ``xvendor.nn.convert_to_mx_training`` recognizes as an expert GEMM:
a module that calls ``xvendor.grouped_mm`` from some other class is invisible to a
conversion (nothing can see inside a forward), so MoE code that wants its expert GEMMs
converted builds them from this class.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..ops import grouped_mm


class GroupedLinear(nn.Module):
    """``num_groups`` linear maps of (in_features -> out_features), one per expert.

    ``forward(x, offs)``: x (M, in_features) holds the tokens sorted by group, ``offs`` the
    int32 cumulative group ends (``grouped_mm``'s 2Dx3D layout); rows past ``offs[-1]`` come
    out as zeros. ``weight`` is (G, in_features, out_features), the layout ``grouped_mm``
    multiplies without a transpose; ``bias`` (optional) is (G, out_features).
    """

    def __init__(self, num_groups: int, in_features: int, out_features: int, *,
                 bias: bool = False, device=None, dtype=None):
        super().__init__()
        self.num_groups, self.in_features, self.out_features = num_groups, in_features, out_features
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(num_groups, in_features, out_features, **kw))
        self.bias = nn.Parameter(torch.empty(num_groups, out_features, **kw)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)  # nn.Linear's default range, per expert
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor, offs: Tensor) -> Tensor:
        return grouped_mm(x, self.weight, offs, self.bias)

    def extra_repr(self) -> str:
        return (f"num_groups={self.num_groups}, in_features={self.in_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class MoE(nn.Module):
    """Token-choice top-k mixture of experts with SiLU expert MLPs.

    The router (``self.router``, an ``nn.Linear``) scores every token in fp32, keeps the
    ``top_k`` experts with softmax weights renormalized over them, tokens are sorted by
    expert (a stable sort: ties keep token order), each expert's MLP runs as two
    ``GroupedLinear`` calls over the ragged groups, and the weighted outputs are summed back
    per token. Empty experts are fine (an empty group).
    """

    def __init__(self, dim: int, hidden: int, num_experts: int, top_k: int = 2, *,
                 device=None, dtype=None):
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"MoE: top_k must be in [1, num_experts={num_experts}], got {top_k}")
        kw = {"device": device, "dtype": dtype}
        self.num_experts, self.top_k = num_experts, top_k
        self.router = nn.Linear(dim, num_experts, bias=False, **kw)
        self.up = GroupedLinear(num_experts, dim, hidden, **kw)
        self.down = GroupedLinear(num_experts, hidden, dim, **kw)

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])
        logits = nn.functional.linear(flat.float(), self.router.weight.float())
        weights, experts = logits.softmax(-1).topk(self.top_k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        order = experts.flatten().argsort(stable=True)
        token = order // self.top_k
        counts = torch.bincount(experts.flatten(), minlength=self.num_experts)
        offs = counts.cumsum(0).to(torch.int32)
        h = nn.functional.silu(self.up(flat[token], offs))
        y = self.down(h, offs) * weights.flatten()[order].unsqueeze(-1).to(h.dtype)
        return torch.zeros_like(flat).index_add_(0, token, y.to(flat.dtype)).reshape(x.shape)
