"""torch.compile(fullgraph=True) of a small MoE block built on xvendor ops matches eager.

router -> topk -> sort tokens by expert -> grouped_mm (up) -> activation -> grouped_mm
(down) -> weighted combine, with rms_norm in front: every xvendor op in one graph, forward
and backward (the weight gradients take grouped_mm's 2Dx2D form).
"""

import pytest
import torch
import torch.nn.functional as F

import xvendor

pytestmark = pytest.mark.l0

E, TOPK, D, H = 4, 2, 32, 48


def moe_block(x, norm_w, router_w, w_up, w_down):
    h = xvendor.rms_norm(x, norm_w, 1e-6)
    logits = xvendor.gemm(h, router_w)  # (T, E)
    gate, expert = xvendor.topk(torch.softmax(logits, dim=-1), TOPK)  # (T, k)
    flat = expert.reshape(-1)
    order = torch.sort(flat, stable=True).indices
    token = order // TOPK
    counts = (flat.unsqueeze(1) == torch.arange(E, device=x.device)).sum(0)  # static shape
    offs = counts.cumsum(0).to(torch.int32)
    up = xvendor.grouped_mm(h[token], w_up, offs)  # (T*k, H)
    down = xvendor.grouped_mm(F.silu(up), w_down, offs)  # (T*k, D)
    weighted = down * gate.reshape(-1)[order].unsqueeze(1)
    return x + torch.zeros_like(x).index_add(0, token, weighted)


def _params(gen):
    def p(*s):
        return (torch.randn(*s, generator=gen) * 0.2).requires_grad_()
    return [p(D), p(D, E), p(E, D, H), p(E, H, D)]


def _run(fn, x, params):
    out = fn(x, *params)
    out.square().mean().backward()
    grads = [p.grad.clone() for p in params] + [x.grad.clone()]
    for t in params + [x]:
        t.grad = None
    return out.detach(), grads


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_moe_matches_eager(gen, backend):
    torch._dynamo.reset()
    x = torch.randn(24, D, generator=gen).requires_grad_()
    params = _params(gen)
    out_e, grads_e = _run(moe_block, x, params)
    compiled = torch.compile(moe_block, fullgraph=True, backend=backend)
    out_c, grads_c = _run(compiled, x, params)
    torch.testing.assert_close(out_c, out_e, rtol=1e-5, atol=1e-5)
    for gc, ge in zip(grads_c, grads_e):
        torch.testing.assert_close(gc, ge, rtol=1e-4, atol=1e-5)
    assert all(g.abs().sum() > 0 for g in grads_e)  # every parameter got a real gradient


def _graph_targets(gen) -> list[str]:
    torch._dynamo.reset()
    seen = []

    def record(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    x = torch.randn(16, D, generator=gen)
    with torch.no_grad():  # the eager fast path would be taken here outside compile
        torch.compile(moe_block, fullgraph=True, backend=record)(x, *[p.detach() for p in _params(gen)])
    return seen


def test_graph_holds_torchs_ops_where_the_torch_backend_serves(gen):
    """On the CPU every op's decision is the torch backend: Dynamo sees torch's own ops
    (Inductor lowers and fuses them as the user's own torch calls), no xvendor op."""
    seen = _graph_targets(gen)
    assert not any("xvendor" in s for s in seen), seen
    for name in ("rms_norm", "mm", "topk", "_grouped_mm"):
        assert any(name in s for s in seen), (name, seen)


def test_graph_holds_the_xvendor_ops_when_a_backend_is_requested(gen):
    """The fast path must not be traced into the graph: with a kernel of ours decided (here
    the reference, requested), Dynamo must see the ops."""
    with xvendor.use_backend("reference"):
        seen = _graph_targets(gen)
    for op in ("gemm", "grouped_mm", "rms_norm", "topk"):
        assert any(f"xvendor.{op}" in s for s in seen), (op, seen)
