"""Worker programs that the tests and the benchmarks start: not part of the installed
library (``xvendor`` needs none of them at run time; ``pyproject.toml`` packages
``xvendor*`` only).

- ``drill``: workers under ``xvendor run``'s agent (``train``, ``pulse``), started by the
  agent's forkserver, which imports them by module name: ``drills.drill``.
- ``ddp_drill``: a DDP worker joining a ``Coordinator`` from the environment,
  ``python -m drills.ddp_drill``.

Both need the repository root on the module path: ``tests/distributed/conftest.py`` puts it
there (and on ``PYTHONPATH`` for the processes tests start); the bench scripts do the same.
``xvendor demo elastic`` keeps its worker in the package (``xvendor.distributed.demo``):
the installed command runs it.
"""
