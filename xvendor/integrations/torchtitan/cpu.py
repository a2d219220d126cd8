"""What torchtitan 0.3.0 needs to train on a CPU, applied from outside it.

Four things stop stock torchtitan on a CPU; each is fixed here without editing torchtitan:

1. ``torchtitan.tools.utils`` picks ``device_type = <available accelerator> or "cuda"`` at
   import, and several modules copy ``device_type`` / ``device_module`` by value at their own
   import. ``use_host_device()`` sets both to the CPU before any of those modules loads (it
   refuses, naming them, if one already has).
2. FlexAttention, every language model's attention, has no CPU backward.
   ``attention.dense_attention`` swaps it in the parsed config for a module that runs the
   same masks densely (done directly, not as an ``--override.imports`` entry, so that
   ``xvendor_ops``, which claims the model's root, can still be listed).
3. FSDP2 reduces gradients with ``ReduceOp.PREMUL_SUM``, which gloo lacks. torchtitan sets
   the gradient divide factor to 1 (it scales by the global token count itself), so a plain
   SUM is the same reduction: ``force_sum_reductions()`` makes every FSDP module that gets a
   divide factor reduce with SUM.
4. Expert parallelism on gloo: CUDA graphs must be off (torchtitan refuses EP with them
   on) and the default ``spmd_types`` all-to-all fails on gloo ("invalid tensor size");
   ``partial_dtensor`` works. ``cpu_flags`` adds both flags ahead of the user's.

``prepare()`` applies all of them; ``python -m xvendor.integrations.torchtitan.run`` calls it
and then torchtitan's own ``main()``. None of this is needed on a GPU node.
"""

from __future__ import annotations

import logging
import os
import sys
import types

import torch

log = logging.getLogger("xvendor.integrations.torchtitan")

# Modules that copy torchtitan.tools.utils.device_type / device_module at import.
_COPIES_DEVICE = ("torchtitan.components.metrics", "torchtitan.models.common.token_dispatcher",
                  "torchtitan.distributed.parallel_dims", "torchtitan.distributed.utils",
                  "torchtitan.tools.profiler")
_prepared = False


def _host_device_module() -> types.ModuleType:
    """A ``torch.cuda``-shaped module for the host: what torchtitan calls on its device module."""
    mod = types.ModuleType("xvendor_host_device")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    props = types.SimpleNamespace(total_memory=total, name="cpu")
    mod.is_available = lambda: True
    mod.device_count = lambda: 1
    mod.current_device = lambda: 0
    mod.set_device = lambda device: None
    mod.synchronize = lambda device=None: None
    mod.get_device_name = lambda device=None: "cpu"
    mod.get_device_properties = lambda device=None: props
    mod.reset_peak_memory_stats = lambda device=None: None
    mod.empty_cache = lambda: None
    mod.memory_stats = lambda device=None: {}  # torchtitan reports -1 for missing peaks
    mod.memory = types.SimpleNamespace(_record_memory_history=lambda *a, **k: None,
                                       _dump_snapshot=lambda *a, **k: None)
    return mod


def use_host_device() -> None:
    """Point torchtitan's device globals at the CPU (see the module docstring, item 1)."""
    loaded = [m for m in _COPIES_DEVICE if m in sys.modules]
    import torchtitan.tools.utils as tt_utils
    if tt_utils.device_type == "cpu":
        return
    if loaded:
        raise RuntimeError(
            "xvendor.integrations.torchtitan.prepare() must run before these torchtitan modules "
            f"are imported (they copied device_type={tt_utils.device_type!r}): {loaded}")
    tt_utils.device_type, tt_utils.device_module = "cpu", _host_device_module()


def force_sum_reductions() -> None:
    """FSDP2 on gloo: reduce with SUM where the divide factor is 1 (item 3)."""
    from torch.distributed.fsdp import FSDPModule
    if getattr(FSDPModule.set_gradient_divide_factor, "_xvendor_sum", False):
        return
    original = FSDPModule.set_gradient_divide_factor

    def set_gradient_divide_factor(self, factor: float) -> None:
        original(self, factor)
        if factor == 1.0:  # SUM == PREMUL_SUM by 1; any other factor keeps torch's path
            self.set_force_sum_reduction_for_comms(True)

    set_gradient_divide_factor._xvendor_sum = True
    FSDPModule.set_gradient_divide_factor = set_gradient_divide_factor


def cpu_flags(argv: list[str]) -> list[str]:
    """The torchtitan flags a CPU run needs (item 4), to go before ``argv`` (so a flag the
    user gives wins: tyro keeps the last). They must be flags, not edits of the parsed
    config: torchtitan validates CUDA-graph settings while parsing."""
    flags = ["--training.disable-cuda-graphs"]
    if _expert_parallel_degree(argv) > 1:
        flags += ["--parallelism.spmd-backend", "partial_dtensor"]
    return flags


def _expert_parallel_degree(argv: list[str]) -> int:
    degree = 1
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name.replace("_", "-") == "--parallelism.expert-parallel-degree":
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "1")
            try:
                degree = int(value)
            except ValueError:
                raise ValueError(f"--parallelism.expert_parallel_degree must be an int, "
                                 f"got {value!r}") from None
    return degree


def adjust_config(config) -> list[str]:
    """What a CPU run needs on a parsed ``Trainer.Config`` (item 2); returns what was
    changed, one line each."""
    from .attention import dense_attention
    changed = []
    swapped = dense_attention(config.model_spec.model)
    if swapped:
        changed.append(f"{len(swapped)} FlexAttention -> DenseMaskAttention (FlexAttention has "
                       "no CPU backward)")
    return changed


def _adjust_parsed_configs() -> None:
    from torchtitan.config.manager import ConfigManager
    if getattr(ConfigManager.parse_args, "_xvendor_cpu", False):
        return
    original = ConfigManager.parse_args

    def parse_args(self, *args, **kwargs):
        config = original(self, *args, **kwargs)
        for line in adjust_config(config):
            log.warning("[xvendor cpu] %s", line)
        return config

    parse_args._xvendor_cpu = True
    ConfigManager.parse_args = parse_args


def prepare() -> None:
    """Everything a CPU run needs, before torchtitan's trainer is imported. Idempotent."""
    global _prepared
    if _prepared:
        return
    if not torch.distributed.is_available():
        raise RuntimeError("torchtitan needs torch.distributed, which this torch build lacks")
    use_host_device()
    force_sum_reductions()
    _adjust_parsed_configs()
    _prepared = True
