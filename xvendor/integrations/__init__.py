"""xvendor inside other people's trainers, through their own extension points.

- ``xvendor.integrations.torchtitan``: torchtitan 0.3.0 (``pip install 'xvendor[titan]'``):
  ``--override.imports`` targets that put xvendor's ops into its models, an MXFP8
  ``ModelConfigConverter`` on ``xvendor.nn``, and a CPU launcher for tests and CI.
  See docs/torchtitan.md.

Nothing here is imported by ``import xvendor``: each integration imports its trainer.
"""
