"""torchtitan configs with xvendor's MXFP8 converter:
``--module xvendor.integrations.torchtitan --config <name>``.

Each is torchtitan 0.3.0's own config function with the model rebuilt through its
``model_registry(flavor, converters=[XvendorMXFP8Converter.Config()])``: the same model,
the converter applied before the build, everything else (optimizer, data, schedule) stock.
Add ``--override.imports xvendor.integrations.torchtitan.overrides.xvendor_ops`` to put the
remaining high-precision ops (norms, router top-k) on xvendor too.
"""

from __future__ import annotations

from torchtitan.trainer import Trainer

from .mx import XvendorMXFP8Converter


def _with_mx(config: Trainer.Config, model_registry, flavor: str) -> Trainer.Config:
    config.model_spec = model_registry(flavor, converters=[XvendorMXFP8Converter.Config()])
    return config


def llama3_debugmodel_mxfp8() -> Trainer.Config:
    from torchtitan.models.llama3 import model_registry
    from torchtitan.models.llama3.config_registry import llama3_debugmodel
    return _with_mx(llama3_debugmodel(), model_registry, "debugmodel")


def deepseek_v3_debugmodel_mxfp8() -> Trainer.Config:
    from torchtitan.models.deepseek_v3 import model_registry
    from torchtitan.models.deepseek_v3.config_registry import deepseek_v3_debugmodel
    return _with_mx(deepseek_v3_debugmodel(), model_registry, "debugmodel")


def qwen3_moe_debug_mxfp8() -> Trainer.Config:
    from torchtitan.models.qwen3 import model_registry
    from torchtitan.models.qwen3.config_registry import qwen3_moe_debug
    return _with_mx(qwen3_moe_debug(), model_registry, "debugmodel_moe")
