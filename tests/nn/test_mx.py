"""MXFP8 training conversion: every converted GEMM's gradients against an fp64 oracle of the
quantized math (written here from the MX rules, not from the module's code), the conversion's
rules, and a small MoE transformer whose MXFP8 training tracks the bf16 run."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import xvendor
from xvendor import numerics
from xvendor.nn import GroupedLinear, MoE, MXGroupedLinear, MXLinear, convert_to_mx_training

pytestmark = pytest.mark.l0
E4 = torch.float8_e4m3fn


def mx_view(t: torch.Tensor, dim: int) -> torch.Tensor:
    """t as MXFP8 represents it with 32-blocks along ``dim`` (zero-padded to 32), in fp64."""
    size = t.shape[dim]
    pad = -size % 32
    if pad:
        shape = list(t.shape)
        shape[dim] = pad
        t = torch.cat([t, t.new_zeros(shape)], dim=dim)
    data, scale = xvendor.quantize(t, E4, "mx", dim=dim)
    s = numerics.e8m0_value(scale.view(torch.uint8)).repeat_interleave(32, dim=dim)
    return (data.double() * s).narrow(dim, 0, size)


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    err = numerics.rel_error(got, want)
    assert err <= numerics.TOLERANCE[torch.float32], err


def test_linear_gradients_match_the_quantized_oracle(gen):
    m, k, n = 37, 64, 96  # 37 tokens: the wgrad pads M to 64
    lin = nn.Linear(k, n, bias=True)
    convert_to_mx_training(lin)
    assert type(lin) is MXLinear
    x = torch.randn(1, m, k, generator=gen).requires_grad_()
    gy = torch.randn(1, m, n, generator=gen)
    y = lin(x)
    w = lin.weight.detach()
    close(y[0], mx_view(x[0].detach(), 1) @ mx_view(w, 1).t() + lin.bias.double())
    y.backward(gy)
    close(x.grad[0], mx_view(gy[0], 1) @ mx_view(w, 0))
    close(lin.weight.grad, mx_view(gy[0], 0).t() @ mx_view(x[0].detach(), 0))
    close(lin.bias.grad, gy[0].double().sum(0))


@pytest.mark.parametrize("sizes", [[5, 0, 40, 19], [0, 0, 3, 0]], ids=["ragged+empty", "mostly-empty"])
def test_grouped_gradients_match_the_quantized_oracle(gen, sizes):
    k, n, tail = 64, 32, 3  # 3 rows past offs[-1]: zero output, zero gradient
    layer = GroupedLinear(len(sizes), k, n)
    convert_to_mx_training(layer)
    assert type(layer) is MXGroupedLinear
    offs = numerics.random_offs(sizes)
    rows = sum(sizes) + tail
    x = torch.randn(rows, k, generator=gen).requires_grad_()
    gy = torch.randn(rows, n, generator=gen)
    y = layer(x, offs)
    y.backward(gy)
    w = layer.weight.detach()
    want_y = torch.zeros(rows, n, dtype=torch.float64)
    want_gx = torch.zeros(rows, k, dtype=torch.float64)
    want_gw = torch.zeros(len(sizes), k, n, dtype=torch.float64)
    start = 0
    for g, size in enumerate(sizes):
        r = slice(start, start + size)
        start += size
        if not size:
            continue
        xs, gs = x.detach()[r], gy[r]
        want_y[r] = mx_view(xs, 1) @ mx_view(w[g], 0)
        want_gx[r] = mx_view(gs, 1) @ mx_view(w[g], 1).t()
        want_gw[g] = mx_view(xs, 0).t() @ mx_view(gs, 0)
    close(y, want_y)
    close(x.grad, want_gx)
    close(layer.weight.grad, want_gw)


def test_conversion_keeps_routers_parameters_and_reports_skips():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.moe = MoE(64, 64, 4, 2)
            self.proj = nn.Linear(64, 64)
            self.odd = nn.Linear(64, 10)  # 10 outputs: no MX blocks along N
            self.norm = nn.RMSNorm(64)

    model = Block()
    params = dict(model.named_parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert convert_to_mx_training(model) is model
    assert type(model.moe.router) is nn.Linear  # the router stays high precision
    assert type(model.moe.up) is MXGroupedLinear and type(model.proj) is MXLinear
    assert type(model.odd) is nn.Linear and "multiples of 32" in model.mx_skipped["odd"]
    assert dict(model.named_parameters()) == params  # the same Parameter objects
    before = model.proj.weight.detach().clone()
    model.proj(torch.randn(4, 64)).sum().backward()
    opt.step()  # the optimizer built before the conversion updates the converted module
    assert not torch.equal(before, model.proj.weight)
    everything = convert_to_mx_training(Block(), filter_fn=lambda mod, fqn: True)
    # a filter that accepts everything reaches the router too (4 experts: too few outputs
    # for an MX block, so it is reported rather than converted)
    assert "moe.router" in everything.mx_skipped and type(everything.norm) is nn.RMSNorm


def test_conversion_bad_input():
    with pytest.raises(xvendor.ArgumentError, match="recipe must be one of"):
        convert_to_mx_training(nn.Linear(32, 32), recipe="mxfp4")
    with pytest.raises(xvendor.ArgumentError, match="filter_fn must be callable"):
        convert_to_mx_training(nn.Linear(32, 32), filter_fn="router")


class TinyMoETransformer(nn.Module):
    """Embedding -> 2 x [RMSNorm, causal attention, RMSNorm, MoE] -> RMSNorm -> head."""

    def __init__(self, vocab=64, dim=64, heads=2, experts=4):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "n1": nn.RMSNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "out": nn.Linear(dim, dim),
            "n2": nn.RMSNorm(dim), "moe": MoE(dim, dim, experts, 2)}) for _ in range(2))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        b, t, d = h.shape
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["n1"](h)).view(b, t, 3, self.heads, -1).unbind(2)
            att = nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
            h = h + blk["out"](att.transpose(1, 2).reshape(b, t, d))
            h = h + blk["moe"](blk["n2"](h))
        return self.head(self.norm(h))


def _train(model, steps, seed=0):
    """Next-token prediction on sequences t_{i+1} = (5 t_i + 3) mod 64 from random starts."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        start = torch.randint(0, 64, (16, 1), generator=gen)
        seq = [start]
        for _ in range(16):
            seq.append((seq[-1] * 5 + 3) % 64)
        seq = torch.cat(seq, 1)
        logits = model(seq[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().reshape(-1, 64), seq[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.heavy
def test_mxfp8_training_tracks_bf16():
    torch.manual_seed(0)
    base = TinyMoETransformer().to(torch.bfloat16)
    mx = convert_to_mx_training(copy.deepcopy(base))
    assert not mx.mx_skipped
    steps = 150
    ref, got = _train(base, steps), _train(mx, steps)
    first, ref_end, got_end = ref[0], sum(ref[-20:]) / 20, sum(got[-20:]) / 20
    assert ref_end < 0.25 * first, (first, ref_end)  # the bf16 run learned the task
    # MXFP8 tracks it: the last-20-step mean loss within 10% of bf16's (+0.02 absolute for a
    # near-zero loss), and no step of the MX run blew up.
    assert got_end <= 1.10 * ref_end + 0.02, (ref_end, got_end)
    assert max(got) < 2 * first
