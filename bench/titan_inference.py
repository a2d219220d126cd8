"""Inference forward of a torchtitan model nobody here wrote, stock against xvendor's ops.

    python bench/titan_inference.py [--model qwen3_moe_debug] [--rounds 12] [--threads 2]

torchtitan 0.3.0's own config (default ``qwen3_moe_debug``: MoE layers, RMSNorm, a top-k
router) is built twice, once as shipped and once with
``xvendor.integrations.torchtitan.overrides.xvendor_ops`` applied (grouped experts on
``xvendor.grouped_mm``, norms on ``xvendor.rms_norm``, the router's top-k on
``xvendor.topk``), the second loading the first's weights. One batch of random tokens, under
``torch.no_grad``: the logits are compared (max |difference|, bitwise equality), then both
forwards are timed in alternating order and the medians and their ratio printed.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

import torch
from torchtitan.config.override import OverrideConfig, apply_overrides

OPS = "xvendor.integrations.torchtitan.overrides.xvendor_ops"


def build(name: str, xvendor: bool):
    module, fn = {"qwen3_moe_debug": ("qwen3", "qwen3_moe_debug"),
                  "deepseek_v3_debugmodel": ("deepseek_v3", "deepseek_v3_debugmodel")}[name]
    cfg = getattr(importlib.import_module(f"torchtitan.models.{module}.config_registry"), fn)()
    if xvendor:
        apply_overrides(OverrideConfig(imports=[OPS]), cfg)
    torch.manual_seed(0)
    return cfg.model_spec.model.build().eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3_moe_debug")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    stock, ours = build(args.model, False), build(args.model, True)
    ours.load_state_dict(stock.state_dict())
    vocab = stock.tok_embeddings.weight.shape[0]
    tok = torch.randint(0, vocab, (args.batch, args.seq),
                        generator=torch.Generator().manual_seed(1))
    pos = torch.arange(args.seq).expand_as(tok)
    masks = stock.get_attention_masks(pos)
    with torch.no_grad():
        a, b = stock(tok, pos, masks), ours(tok, pos, masks)
        print(f"{args.model}, tokens {tuple(tok.shape)}, torch {torch.__version__}, "
              f"{args.threads} threads: max |logits difference| {(a - b).abs().max().item():.3g} "
              f"(max |logit| {a.abs().max().item():.3g}), bitwise equal: {torch.equal(a, b)}")
        times = {"stock": [], "xvendor": []}
        for r in range(args.rounds):
            order = (("stock", stock), ("xvendor", ours))
            for name, m in order if r % 2 else order[::-1]:
                t0 = time.perf_counter()
                m(tok, pos, masks)
                times[name].append(time.perf_counter() - t0)
    s, x = (statistics.median(times[k]) for k in ("stock", "xvendor"))
    print(f"forward: stock {s * 1e3:.2f} ms, xvendor {x * 1e3:.2f} ms, stock/xvendor {s / x:.3f}x "
          f"(medians of {args.rounds})")


if __name__ == "__main__":
    main()
