"""Resilient process groups: shrink around failed ranks, grow with replacements, and a flight
recorder. See docs/resilient-groups.md.

- ``Agent``: hosts the control-plane store outside the training ranks, starts workers, posts
  death notices (process exit at once, a stale heartbeat after ``Timing.hb_timeout_s``).
- ``ResilientGroup``: all_reduce / broadcast / all_gather / reduce_scatter / barrier with
  sliced waits; ``recover()`` after ``EpochAborted``; ``commit_step()`` admits newcomers;
  ``rejoin()`` after ``Excluded``.
- ``analyze``: what a set of flight-recorder dumps says (``xvendor fr analyze DIR``).
"""

from .agent import Agent
from .control import EpochAborted, Excluded, Timing
from .group import ResilientGroup
from .recorder import FlightRecorder, analyze, format_analysis

__all__ = ["Agent", "EpochAborted", "Excluded", "FlightRecorder", "ResilientGroup", "Timing",
           "analyze", "format_analysis"]
