"""Tuning: config spaces are per toolchain (``xvendor.triton.configs``); this package holds
what every toolchain shares.

- ``sweep``: cross-compile every template x config x target in worker processes, cached;
- ``workers``: the crash-isolated compile workers;
- ``resources``: read registers/spills/LDS from the compiled code, occupancy, verdict;
- ``compile_cli``: the ``xvendor compile`` subcommand and the ``xvendor check`` summary;
- ``problem``, ``store``, ``model``, ``tuner``, ``tune_cli``: problem keys, the tables,
  the analytical model, the tuning loop and ``xvendor tune``;
- ``serve``: the registry's tuned-winner hook (named by a string; nothing here is imported
  by the registry) and capture.
"""
