"""Make ``import torchft`` resolve to ``xvendor.ft``: ``install()``.

For code that imports torchft by name and offers no plug-in point (torchtitan's
``experiments/torchft`` trainer, ``import torchft`` at module level, guarded by
``importlib.util.find_spec("torchft")``). ``install()`` puts ``xvendor.ft`` and its modules in
``sys.modules`` under torchft's names, before that code is imported:

    torchft                  -> xvendor.ft            (Manager, DistributedDataParallel,
                                                       Optimizer / OptimizerWrapper,
                                                       ProcessGroupGloo / ProcessGroupNCCL)
    torchft.manager          -> xvendor.ft.manager
    torchft.process_group    -> xvendor.ft.process_group  (ManagedProcessGroup)
    torchft.optim            -> xvendor.ft.optim
    torchft.ddp              -> xvendor.ft.wrappers
    torchft.local_sgd        -> xvendor.ft.local_sgd  (LocalSGD; DiLoCo refuses, naming why)

It refuses (naming them) if real torchft modules are already imported: two Managers of
different systems in one process would not agree on anything. Names torchft has and
xvendor.ft does not (its lighthouse, checkpoint transports, ``torchft.torchcomms``...) raise
``ImportError`` / ``AttributeError`` as for any missing name.
"""

from __future__ import annotations

import importlib
import sys

ALIASES = {"torchft": "xvendor.ft", "torchft.manager": "xvendor.ft.manager",
           "torchft.process_group": "xvendor.ft.process_group",
           "torchft.optim": "xvendor.ft.optim", "torchft.ddp": "xvendor.ft.wrappers",
           "torchft.local_sgd": "xvendor.ft.local_sgd"}


def installed() -> bool:
    mod = sys.modules.get("torchft")
    return mod is not None and mod.__name__ == "xvendor.ft"


def install() -> None:
    """Alias torchft's module names to xvendor.ft's (idempotent)."""
    if installed():
        return
    real = sorted(m for m in sys.modules if m == "torchft" or m.startswith("torchft."))
    if real:
        raise RuntimeError("xvendor.ft.compat.install() must run before torchft is imported; "
                           f"already imported: {real}")
    for alias, target in ALIASES.items():
        sys.modules[alias] = importlib.import_module(target)
    parent = sys.modules["torchft"]
    for alias in ALIASES:  # `torchft.process_group` as an attribute, as a real import makes it
        if "." in alias:
            setattr(parent, alias.split(".", 1)[1], sys.modules[alias])
