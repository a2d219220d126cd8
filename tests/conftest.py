"""Shared fixtures. Tiers are pytest markers (l0/l1/l2) registered in pyproject.toml and by
the xvendor.testing plugin (loaded through its pytest11 entry point)."""

pytest_plugins = ["pytester"]

import pytest
import torch

from xvendor import registry


@pytest.fixture(autouse=True)
def _clean_registry():
    """Each test starts and ends with the registry as at import: built-in backends, the
    default tuning hook, empty caches and fresh environment reads."""
    registry.reset(configuration=True)
    yield
    registry.reset(configuration=True)


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)
