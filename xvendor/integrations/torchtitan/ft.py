"""torchtitan's fault-tolerant trainer (``torchtitan.experiments.torchft``) on ``xvendor.ft``.

torchtitan 0.3.0's FT experiment (``FaultTolerantTrainer``, ``TorchFTManager``,
``TorchFTOptimizersContainer``, ``TorchFTCheckpointManager``) imports ``torchft`` by name and
has no plug-in point. ``prepare(xvendor=True)`` (``--xvendor-ft`` on the launchers) makes
that import resolve to ``xvendor.ft`` (``xvendor.ft.compat.install``) before the experiment is
imported: every name it uses exists there with torchft's semantics (``Manager``,
``ProcessGroupGloo/NCCL``, ``process_group.ManagedProcessGroup`` for FSDP2's all-reduce hook
and the loss reductions, ``Optimizer``, ``set_state_dict_fns``, ``participating_rank``,
``local_sgd.LocalSGD``). The trainer itself runs unchanged, with two fixes applied from
outside it (both also logged):

1. **Overrides.** ``FaultTolerantTrainer.__init__`` never applies ``--override.imports``
   (the base trainer does, after ``update_from_config``). ``prepare`` applies them at that
   same point of the FT trainer's build (``apply_overrides`` right after the model config's
   ``update_from_config``), for torchft and xvendor alike. An override that replaces the
   model's root config (rather than nodes inside it) cannot reach the FT trainer, which
   holds the root already: refused, naming it.
2. **State captured at the commit** (xvendor only). xvendor admits a newcomer inside the
   commit of a step, with the state its oldest survivor holds then; torchft heals it at the
   next quorum, after the loop has finished the step. Between the two, torchtitan's loop
   does two things that change transferred state: ``lr_schedulers.step()`` and, at the top
   of the next iteration, ``self.step += 1``. So the newcomer applies both after loading
   (its scheduler one step on, its step counter + 1): it then holds what torchft would have
   sent. (The per-replica dataloader state is not transferred in either system: each replica
   reloads its own from its FT checkpoint folder.)
3. **Steps that did not commit** (xvendor only). torchtitan's loop advances its step counter
   and steps its LR schedulers on every attempt, committed or not. On xvendor the survivors
   of one failure can make different numbers of attempts for the same committed step (one
   kept its step in flight, another, whose calls had all finished before it learned of the
   failure, redoes it: NOTE [the step in flight is kept] in ``xvendor.ft.manager``), so an
   attempt that did not commit leaves both as they were: the LR schedulers step only on a
   commit and the trainer's step counter is the committed step (the loop's ``self.step +=
   1`` is taken back after an attempt that did not commit). Every replica then holds the
   same LR schedule and step, whatever its attempts. (Synchronous FT only: with
   ``--fault-tolerance.semi-sync-method`` the commits are LocalSGD's syncs, and the inner
   steps between them advance both as in torchtitan.)

``XVENDOR_TITAN_FT_LOG=DIR`` (tests, ``bench/titan_ft.py``) adds a probe that writes one JSON
line per step attempt to ``DIR/r<replica_id>.jsonl`` (manager step, committed, participants,
times), stops the run once the committed step reaches the number in ``DIR/stop``, and at
the end writes a hash of the parameters with the optimizer's and the trainer's step
counters: the drill's evidence, the same for torchft and for xvendor.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time

import torch

log = logging.getLogger("xvendor.integrations.torchtitan")
LOG_ENV = "XVENDOR_TITAN_FT_LOG"
_prepared: dict = {}


def _is_xvendor(manager) -> bool:
    from xvendor.ft import Manager
    return isinstance(manager, Manager)


def _apply_overrides_in_ft_build(original_init):
    """Wrap ``FaultTolerantTrainer.__init__``: apply ``--override.imports`` right after the
    model config's ``update_from_config`` (fix 1 of the module docstring)."""

    def __init__(self, config):
        imports = getattr(getattr(config, "override", None), "imports", None)
        if not imports:
            return original_init(self, config)
        from torchtitan.config.override import apply_overrides
        root = config.model_spec.model
        cls = type(root)
        update = cls.update_from_config

        def update_then_override(model_cfg, *args, **kwargs):
            update(model_cfg, *args, **kwargs)
            if model_cfg is root:
                apply_overrides(config.override, config)
                if config.model_spec.model is not root:
                    raise RuntimeError(
                        f"--override.imports {imports}: an override replaced the model's root "
                        "config; torchtitan's FaultTolerantTrainer builds the root it already "
                        "holds, so only overrides of nodes inside the model reach it")
                log.warning("[xvendor ft] FaultTolerantTrainer ignores --override.imports: "
                            "applied here after update_from_config: %s", ", ".join(imports))

        cls.update_from_config = update_then_override
        try:
            original_init(self, config)
        finally:
            cls.update_from_config = update

    return __init__


def _newcomer_fixup(trainer) -> None:
    """xvendor: the state a newcomer loads is the commit's; apply what the loop does after
    a commit (fix 2 of the module docstring)."""
    manager = trainer.ft_manager._manager
    if manager is None or not _is_xvendor(manager):
        return

    def finish_step(step: int) -> None:
        trainer.lr_schedulers.step()
        trainer.step += 1
        log.warning("[xvendor ft] admitted at the commit of step %d: LR schedulers stepped, "
                    "trainer step %d (what torchtitan's loop does after a commit)", step,
                    trainer.step)

    manager.register_admission_hook(finish_step)
    if not trainer.ft_manager.use_async_quorum:  # semi-sync: commits are the syncs only
        return
    schedulers = trainer.lr_schedulers
    step_schedulers = schedulers.step

    def step_on_commit(*args, **kwargs):  # fix 3 of the module docstring
        if manager.last_committed is False:
            return None
        return step_schedulers(*args, **kwargs)

    schedulers.step = step_on_commit


def _attempts_leave_the_step(train_step):
    """xvendor: an attempt that did not commit takes back the loop's ``self.step += 1``
    (fix 3 of the module docstring)."""

    def wrapped(self, data_iterator):
        out = train_step(self, data_iterator)
        manager = self.ft_manager._manager
        if (manager is not None and _is_xvendor(manager) and self.ft_manager.use_async_quorum
                and manager.last_committed is False):
            self.step -= 1
        return out

    return wrapped


def _torchft_state_off_the_forward(trainer) -> None:
    """torchft (``--torchft``): NOTE [torchft reads state on its quorum thread]. torchft
    0.2.0's async quorum calls the registered ``state_dict`` function on its own thread
    (``_async_quorum`` -> ``send_checkpoint``) while the training thread runs the step.
    torchtitan's function calls ``ModelWrapper.state_dict()``, which runs the model's
    ``state_dict()``, whose FSDP2 hooks set every module's parameters to their sharded
    DTensors: the forward running meanwhile fails ("aten.mm.default got mixed torch.Tensor and
    DTensor"). Seen here at the first heal (step 0, torchft's init_sync) on the replica that
    sends, every run. The fix keeps torchft's design and torchtitan's state: the model's
    entries are taken from ``ModelWrapper.cached_state_dict`` (the same sharded parameters,
    no hooks), and every tensor is cloned: torchft's HTTP transport keeps CPU tensors by
    reference (``_to_cpu`` copies only device tensors) and serves them later, while the
    sender's optimizer steps them (without the clone the replicas ended with different
    parameters here)."""
    from torchtitan.components.checkpoint import LR_SCHEDULER, MODEL, OPTIMIZER, TRAIN_STATE
    manager = trainer.ft_manager._manager
    fns = getattr(manager, "_user_state_dicts", {})
    if "set_state_dict_fns" not in fns:
        return
    states = trainer.checkpointer.states

    from torch.utils._pytree import tree_map

    def snapshot(x):
        return x.detach().clone() if isinstance(x, torch.Tensor) else x

    def state_dict():  # what TorchFTCheckpointManager's function returns, MODEL hook-free
        out = {k: v.state_dict() for k, v in states.items()
               if k in {OPTIMIZER, LR_SCHEDULER, TRAIN_STATE}}
        out[MODEL] = states[MODEL].cached_state_dict
        return tree_map(snapshot, out)

    fns["set_state_dict_fns"] = state_dict
    log.warning("[xvendor ft] torchft: the model's state for torchft's transfer is read "
                "without FSDP2's state_dict hooks (they race the forward on torchft's quorum "
                "thread)")


def _param_hash(model_parts) -> str:
    from torch.distributed.tensor import DTensor
    h = hashlib.sha256()
    for m in model_parts:
        for p in m.parameters():
            t = p.to_local() if isinstance(p, DTensor) else p
            h.update(t.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _optimizer_steps(optimizers) -> int:
    for opt in optimizers.optimizers:
        for state in opt.state.values():
            if "step" in state:
                return int(state["step"])
    return 0


def _install_probe(cls, directory: str) -> None:
    """The drill's probe (see the module docstring)."""
    state: dict = {}

    def write(trainer, **rec) -> None:
        if "f" not in state:
            replica = trainer.config.fault_tolerance.replica_id
            rank = int(os.environ.get("RANK", "0"))
            name = f"r{replica}.jsonl" if rank == 0 else f"r{replica}.rank{rank}.jsonl"
            state["f"] = open(os.path.join(directory, name), "a", buffering=1)
        rec.update(pid=os.getpid(), restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT",
                                                               "0")), t=time.time())
        state["f"].write(json.dumps(rec) + "\n")

    train_step, should_continue, train = (cls.train_step, cls.should_continue_training,
                                          cls.train)

    def probed_train_step(self, data_iterator):
        manager = self.ft_manager.manager
        before, t0 = manager.current_step(), time.time()
        if "up" not in state:
            state["up"] = True
            write(self, event="up", step=before)
        try:
            return train_step(self, data_iterator)
        finally:
            after = manager.current_step()
            extra = {}
            if _is_xvendor(manager):  # where a failure's time went (xvendor.ft's timeline)
                extra["timeline"] = manager.timeline()
                extra["epochs"] = manager.rg.stats["epochs"][-1:]
            write(self, event="attempt", step=after, committed=after > before,
                  n=manager.num_participants(), t0=t0, trainer_step=self.step, **extra)

    def probed_should_continue(self) -> bool:
        path = os.path.join(directory, "stop")
        if os.path.exists(path):
            with open(path) as f:
                stop = int(f.read().strip() or 0)
            if stop and self.ft_manager.manager.current_step() >= stop:
                return False
        return should_continue(self)

    def probed_train(self):
        out = train(self)
        manager = self.ft_manager.manager
        write(self, event="done", step=manager.current_step(), hash=_param_hash(self.model_parts),
              optimizer_steps=_optimizer_steps(self.optimizers), trainer_step=self.step)
        return out

    cls.train_step, cls.should_continue_training, cls.train = (
        probed_train_step, probed_should_continue, probed_train)


# torchtitan's FT debug config at the sizes of a CPU drill: synchronous FT (FSDP2's all-reduce
# hook on the managed process group), gloo, in-memory state transfer (--checkpoint.enable;
# no full checkpoint before step 100000), no profiler or validator.
DRILL_FLAGS = ["--module", "torchft.llama3", "--config", "llama3_torchft_debugmodel",
               "--fault-tolerance.semi-sync-method", "None",
               "--fault-tolerance.process-group", "gloo", "--training.seq-len", "128",
               "--training.local-batch-size", "2", "--training.steps", "100000",
               "--profiler.no-enable-profiling", "--validator.no-enable", "--checkpoint.enable",
               "--checkpoint.interval", "100000", "--debug.deterministic", "--debug.seed", "42"]


def drill_argv(system: str, replica: int, replicas: int, dump_folder: str,
               extra: list[str] | tuple = ()) -> list[str]:
    """The CPU launcher's arguments for replica group ``replica`` of ``replicas`` in the FT
    drill, on ``system`` ("xvendor" or "torchft"), with torchtitan flags ``extra``;
    ``group_size`` is the number of replica groups (torchtitan splits the data by it)."""
    if system not in ("xvendor", "torchft"):
        raise ValueError(f"drill_argv: system must be 'xvendor' or 'torchft', got {system!r}")
    return [{"xvendor": "--xvendor-ft", "torchft": "--torchft"}[system], *DRILL_FLAGS,
            "--fault-tolerance.replica-id", str(replica), "--fault-tolerance.group-size",
            str(replicas), "--dump-folder", dump_folder, *extra, "activation-checkpoint:none"]


def prepare(xvendor: bool = True) -> None:
    """Before torchtitan's FT experiment is imported: with ``xvendor``, ``import torchft``
    resolves to ``xvendor.ft``; in both cases the FT trainer applies ``--override.imports``
    and, with ``XVENDOR_TITAN_FT_LOG``, carries the drill's probe. Idempotent."""
    if _prepared:
        if _prepared["xvendor"] != xvendor:
            raise RuntimeError("xvendor.integrations.torchtitan.ft.prepare: already prepared "
                               f"with xvendor={_prepared['xvendor']}")
        return
    if xvendor:
        from xvendor.ft import compat
        compat.install()
    from torchtitan.experiments.torchft.trainer import FaultTolerantTrainer as cls
    original = _apply_overrides_in_ft_build(cls.__init__)

    def __init__(self, config):
        original(self, config)
        if xvendor:
            _newcomer_fixup(self)
        elif self.ft_manager.enabled and self.checkpointer.enable:
            _torchft_state_off_the_forward(self)

    close = cls.close

    def leave_then_close(self):
        manager = getattr(getattr(self, "ft_manager", None), "_manager", None)
        if manager is not None and _is_xvendor(manager) and manager._rg is not None:
            manager.shutdown()  # leave cleanly: not seen as a failure by the others
        return close(self)

    cls.__init__, cls.close = __init__, leave_then_close
    if xvendor:
        cls.train_step = _attempts_leave_the_step(cls.train_step)
    if os.environ.get(LOG_ENV):
        _install_probe(cls, os.environ[LOG_ENV])
    _prepared["xvendor"] = xvendor


def main() -> None:
    """``python -m xvendor.integrations.torchtitan.ft <torchtitan arguments>`` on a GPU node:
    torchtitan's own ``main()`` with the FT trainer on xvendor.ft (no CPU changes)."""
    prepare(xvendor=True)
    from torchtitan.train import main as torchtitan_main
    torchtitan_main()


if __name__ == "__main__":
    main()
