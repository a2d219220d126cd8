"""The multi-vendor CI matrix (matrix.py) and the tier runner (run.py)."""
