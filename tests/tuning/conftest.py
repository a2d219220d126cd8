"""One cold compile cache for the whole tuning test session (the subset compiles once)."""

import pytest


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("xvendor-compile-cache")
