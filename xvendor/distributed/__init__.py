"""Resilient process groups: shrink around failed ranks, grow with replacements, and a flight
recorder. See docs/resilient-groups.md.

- ``Agent``: hosts the control-plane store outside the training ranks, starts workers, posts
  death notices (process exit at once, a stale heartbeat after ``Timing.hb_timeout_s``).
- ``ResilientGroup``: all_reduce / broadcast / all_gather / reduce_scatter / barrier with
  sliced waits; ``recover()`` after ``EpochAborted``; ``commit_step()`` admits newcomers;
  ``rejoin()`` after ``Excluded``.
- ``Coordinator`` (``xvendor coordinator``): the same role for jobs whose workers are launched
  by others (torchrun per replica group, Slurm, Kubernetes); workers find it from the
  environment: ``ResilientGroup.from_env(get_state, set_state, model=model)``.
- ``ResilientProcessGroup``: one epoch as a ``torch.distributed.ProcessGroup``
  (``device_mesh(pg)``: a 1-D ``DeviceMesh`` over it, where ``DeviceMesh.from_group`` fails);
  ``resilient_ddp(model, rg)`` DDP that follows the epochs; ``with rg.step(optimizer):``
  the step guard (commit on every member or redo on the next epoch).
- ``analyze``: what a set of flight-recorder dumps says (``xvendor fr analyze DIR``).
"""

# NOTE [a torch-free control plane]: the names below are looked up on first use (PEP 562),
# so that importing one control-plane module (``control``, ``wire``, ``storewire``,
# ``storeserver``, ``membership``'s plan helpers) does not import the data plane, DDP and
# torch with it: a process that only speaks the protocol (the simulator's shards in
# bench/sim_members.py: 10 processes, ~550 MB each with torch) stays small.
_LAZY = {"Agent": "agent", "EpochAborted": "control", "Excluded": "control",
         "Timing": "control", "Coordinator": "coordinator", "StragglerPolicy": "coordinator",
         "ResilientDDP": "ddp", "resilient_ddp": "ddp", "ResilientGroup": "group",
         "ResilientProcessGroup": "torch_pg", "device_mesh": "torch_pg", "Refused": "wire",
         "FlightRecorder": "recorder", "analyze": "recorder", "format_analysis": "recorder"}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'xvendor.distributed' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Agent", "Coordinator", "EpochAborted", "Excluded", "FlightRecorder", "Refused",
           "ResilientDDP", "ResilientGroup", "ResilientProcessGroup", "StragglerPolicy", "Timing",
           "analyze", "device_mesh", "format_analysis", "resilient_ddp"]
