"""Shared fixtures. Tiers are pytest markers (l0/l1/l2) registered in pyproject.toml and by
the xvendor.testing plugin (loaded through its pytest11 entry point)."""

pytest_plugins = ["pytester"]

import pytest
import torch

from xvendor import registry


@pytest.fixture(autouse=True)
def _clean_registry():
    """Each test starts from the built-in backends, empty caches and fresh env reads."""
    saved = dict(registry._registry.backends)
    registry.reset()
    yield
    registry._registry.backends.clear()
    registry._registry.backends.update(saved)
    registry._registry.tuned_lookup = None
    registry.reset()


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)
