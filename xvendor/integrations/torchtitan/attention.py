"""``DenseMaskAttention``: torchtitan's FlexAttention masks, run densely (FlexAttention has no
CPU backward). The CPU launcher swaps it in (``dense_attention``); GPU runs never need it.

The model still builds torchtitan's ``BlockMask`` (document-causal masking from the packed
batch's positions); this module evaluates the mask's ``mask_mod`` on every (query, key)
pair (``torch.nn.attention.flex_attention.create_mask``) and runs SDPA with it, so the
attention pattern is the model's own. ``score_mod`` is not supported (no torchtitan 0.3.0
language model passes one); ``out_transform`` (gpt_oss's sinks) gets the log-sum-exp from an
explicit softmax. Memory is O(B * heads * L^2): fine for debug models, not for real ones.

Importing this module also makes torchtitan build its ``BlockMask`` eagerly: stock
torchtitan wraps ``create_block_mask`` in ``torch.compile``, which on a CPU costs ~30 s of
Inductor compilation in the first step for a mask this path only reads through
``mask_mod``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, create_mask
from torchtitan.config import derive
from torchtitan.models.common import attention as tt_attention
from torchtitan.models.common.attention import FlexAttention

tt_attention._compiled_create_block_mask = create_block_mask  # see the module docstring


class DenseMaskAttention(FlexAttention):
    """FlexAttention's interface and masks, computed with a dense mask (see the module)."""

    @dataclass(kw_only=True, slots=True)
    class Config(FlexAttention.Config):
        pass

    def forward(self, q_BLNH, k_BLNH, v_BLNH, *, attention_masks: BlockMask, score_mod=None,
                scale=None, enable_gqa: bool = False, out_transform=None, **kwargs):
        if not isinstance(attention_masks, BlockMask):
            raise TypeError("DenseMaskAttention: attention_masks must be a BlockMask, got "
                            f"{type(attention_masks).__name__}")
        if score_mod is not None:
            raise NotImplementedError("DenseMaskAttention: score_mod is not supported on the CPU "
                                      "path (no torchtitan language model uses one)")
        q, k, v = (t.transpose(1, 2) for t in (q_BLNH, k_BLNH, v_BLNH))  # (B, N, L, H)
        b, heads, lq, _ = q.shape
        mask = create_mask(attention_masks.mask_mod, b, heads, lq, k.shape[2], device=q.device)
        if enable_gqa and k.shape[1] != heads:
            k = k.repeat_interleave(heads // k.shape[1], dim=1)
            v = v.repeat_interleave(heads // v.shape[1], dim=1)
        if out_transform is None:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
            return out.transpose(1, 2)
        scale = scale if scale is not None else q.shape[-1] ** -0.5
        s = (q @ k.transpose(-2, -1)).float() * scale
        s = s.masked_fill(~mask, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)  # (B, N, L)
        out = (torch.softmax(s, dim=-1).to(v.dtype) @ v).transpose(1, 2)
        return out_transform(out, lse.transpose(1, 2))


def dense_attention(model_cfg, prefix: str = "model") -> list[str]:
    """Swap, in place, every FlexAttention config (exactly that class) in ``model_cfg`` for
    ``DenseMaskAttention``; returns the FQNs swapped."""
    swapped = []
    for fqn, cfg, parent, attr in list(model_cfg.traverse(FlexAttention.Config, _prefix=prefix)):
        if parent is None or type(cfg) is not FlexAttention.Config:
            continue
        new = derive(cfg, DenseMaskAttention.Config)
        if isinstance(parent, list):
            parent[attr] = new
        else:
            setattr(parent, attr, new)
        swapped.append(fqn)
    return swapped
