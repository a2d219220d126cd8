"""The torchtitan overrides and the MXFP8 converter on torchtitan 0.3.0's own configs and
modules, in this process (no training): what gets swapped through torchtitan's
``apply_overrides``, what is said when nothing can be, and the router reproducing
torchtitan's routing bit for bit (node-limited routing and expert bias included)."""

from __future__ import annotations

import logging

import pytest
import torch

pytestmark = pytest.mark.l1

from torchtitan.config.override import OverrideConfig, apply_overrides  # the titan extra (dev)
from torchtitan.models.common.linear import Linear  # noqa: E402
from torchtitan.models.common.moe import GroupedExperts, TokenChoiceTopKRouter  # noqa: E402
from torchtitan.models.common.nn_modules import RMSNorm  # noqa: E402

from xvendor.integrations.torchtitan import counts  # noqa: E402
from xvendor.integrations.torchtitan.layers import XvendorRMSNorm, XvendorRouter  # noqa: E402
from xvendor.integrations.torchtitan.mx import XvendorMXFP8Converter  # noqa: E402

PKG = "xvendor.integrations.torchtitan.overrides"


def _apply(config, *names):
    return apply_overrides(OverrideConfig(imports=[f"{PKG}.{n}" for n in names]), config)


def _types(model_cfg, cls):
    return [type(c).__qualname__ for _, c, _, _ in model_cfg.traverse(cls)]


def test_each_override_swaps_its_nodes_through_torchtitan():
    from torchtitan.models.deepseek_v3.config_registry import deepseek_v3_debugmodel
    config = deepseek_v3_debugmodel()
    lines = _apply(config, "xvendor_grouped_mm", "xvendor_rms_norm", "xvendor_router")
    model = config.model_spec.model
    experts, norms = _types(model, GroupedExperts.Config), _types(model, RMSNorm.Config)
    routers = _types(model, TokenChoiceTopKRouter.Config)
    assert experts and set(experts) == {"XvendorGroupedExperts.Config"}
    assert norms and set(norms) == {"XvendorRMSNorm.Config"}
    assert routers and set(routers) == {"XvendorRouter.Config"}
    assert len(lines) == len(experts) + len(norms) + len(routers)
    assert all(line.startswith("[Override] " + PKG) for line in lines)


def test_xvendor_ops_on_a_model_without_moe_says_so(caplog):
    from torchtitan.models.llama3.config_registry import llama3_debugmodel
    config = llama3_debugmodel()
    with caplog.at_level(logging.INFO):
        _apply(config, "xvendor_ops")
    assert "Llama3Model.Config has no MoE layers" in caplog.text
    assert "13 RMSNorm swapped to xvendor.rms_norm" in caplog.text
    assert set(_types(config.model_spec.model, RMSNorm.Config)) == {"XvendorRMSNorm.Config"}


def test_grouped_mm_override_alone_on_a_model_without_moe_is_a_warning_not_a_crash(caplog):
    from torchtitan.models.llama3.config_registry import llama3_debugmodel
    with caplog.at_level(logging.WARNING):
        assert _apply(llama3_debugmodel(), "xvendor_grouped_mm") == []
    assert "produced no replacements" in caplog.text


ROUTERS = {
    "node-limited sigmoid, bias, norm, scale": dict(num_expert_groups=4, num_limited_groups=2,
                                                    top_k=3, score_func="sigmoid",
                                                    route_norm=True, route_scale=2.5),
    "softmax top-2": dict(top_k=2, score_func="softmax"),
    "debug load balance": dict(top_k=2, _debug_force_load_balance=True),
}


@pytest.mark.parametrize("name", list(ROUTERS))
def test_router_reproduces_torchtitan_routing_exactly(name):
    kw = ROUTERS[name]
    cfg = TokenChoiceTopKRouter.Config(
        num_experts=16, gate=Linear.Config(in_features=32, out_features=16), **kw)
    torch.manual_seed(0)
    stock = cfg.build()
    ours = XvendorRouter.Config(num_experts=16, gate=Linear.Config(in_features=32,
                                                                   out_features=16), **kw).build()
    ours.load_state_dict(stock.state_dict())
    x = torch.randn(3, 7, 32)
    bias = torch.randn(16) * 0.1
    counts.CALLS.clear()
    results = []
    for router in (stock, ours):
        xi = x.clone().requires_grad_()
        gates, ids, scores = router(xi, bias)
        (gates * torch.arange(1.0, gates.shape[-1] + 1)).sum().backward()
        results.append((gates, ids, scores, xi.grad, router.gate.weight.grad))
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)
    grouped = "num_expert_groups" in kw
    assert counts.CALLS["topk"] == (3 if grouped else 1)  # top-2 per group, groups, experts


def test_rms_norm_module_matches_torchtitan():
    torch.manual_seed(0)
    stock = RMSNorm.Config(normalized_shape=48, eps=1e-6).build()
    ours = XvendorRMSNorm.Config(normalized_shape=48, eps=1e-6).build()
    with torch.no_grad():
        stock.weight.uniform_(0.5, 1.5)
    ours.load_state_dict(stock.state_dict())
    x = torch.randn(4, 48)
    assert torch.equal(stock(x), ours(x))


def test_mx_converter_converts_blockable_sizes_and_lists_the_rest(caplog):
    from torchtitan.models.deepseek_v3 import model_registry
    model_cfg = model_registry("debugmodel").model
    odd = model_cfg.layers[0].attention.wo
    odd.in_features = 40  # a contraction MX cannot block
    converter = XvendorMXFP8Converter.Config().build()
    with caplog.at_level(logging.INFO):
        model_cfg = converter.convert(model_cfg)
    assert "layers.0.attention.wo" in converter.skipped
    assert "in_features=40" in converter.skipped["layers.0.attention.wo"]
    gates = [f for f in converter.skipped if f.endswith("router.gate")]
    assert gates and all("excluded" in converter.skipped[f] for f in gates)
    assert any(v == "GroupedExperts" for v in converter.converted.values())
    assert "lm_head" in converter.converted
    assert set(_types(model_cfg, GroupedExperts.Config)) == {"XvendorMXFP8GroupedExperts.Config"}
    assert "left in high precision: layers.0.attention.wo" in caplog.text


def test_mx_converter_selectable_through_model_registry():
    from xvendor.integrations.torchtitan.config_registry import qwen3_moe_debug_mxfp8
    model_cfg = qwen3_moe_debug_mxfp8().model_spec.model
    assert set(_types(model_cfg, GroupedExperts.Config)) == {"XvendorMXFP8GroupedExperts.Config"}
