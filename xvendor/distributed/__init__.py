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

from .agent import Agent
from .control import EpochAborted, Excluded, Timing
from .coordinator import Coordinator, StragglerPolicy
from .ddp import ResilientDDP, resilient_ddp
from .group import ResilientGroup
from .torch_pg import ResilientProcessGroup, device_mesh
from .wire import Refused
from .recorder import FlightRecorder, analyze, format_analysis

__all__ = ["Agent", "Coordinator", "EpochAborted", "Excluded", "FlightRecorder", "Refused",
           "ResilientDDP", "ResilientGroup", "ResilientProcessGroup", "StragglerPolicy", "Timing",
           "analyze", "device_mesh", "format_analysis", "resilient_ddp"]
