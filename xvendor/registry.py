"""The public face of the dispatch layer: register backends, list them, request one,
install the tuned-winner lookup, reset, and read the fallbacks. The engine behind it
(selection, decision cache, binding, fallback) is ``xvendor.dispatch.engine``; the
``Backend`` record is ``xvendor.dispatch.records``; each in-tree backend's record lives in
its own folder (``IN_TREE``). NOTE [selection order] in the engine says how a backend is
chosen.
"""

from __future__ import annotations

from .dispatch.engine import (FLOOR, IN_TREE, REFERENCE, Decision, Fallback, backends, decide,
                              define_op, device_info, dispatcher, explain_request,
                              fallback_count, fallbacks, floor_trainer,
                              install_default_tuned_hook, ops, plugin_problems, register,
                              requested_backend, requested_in_context, reset, select,
                              set_tuned_lookup, traced_floor,
                              tunable, unavailable_reason, use_backend)
from .dispatch.records import FLOAT_DTYPES, Backend, BackendUnavailable, load_attr
from .gate import GateFailure

__all__ = ["Backend", "BackendUnavailable", "GateFailure", "Decision", "Fallback", "register",
           "backends", "ops", "define_op", "select", "decide", "dispatcher", "explain_request",
           "use_backend", "requested_backend", "set_tuned_lookup", "install_default_tuned_hook",
           "tunable", "reset", "plugin_problems", "fallbacks", "fallback_count", "device_info",
           "unavailable_reason", "traced_floor", "floor_trainer",
           "requested_in_context", "IN_TREE", "REFERENCE", "FLOOR",
           "FLOAT_DTYPES", "load_attr"]
