"""The multi-vendor CI matrix (matrix.py), the tier runner (run.py) and their commands
(cli.py; ``python -m xvendor.ci``). Nothing here imports torch at import time."""
