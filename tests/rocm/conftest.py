"""One cold compile cache for the FlyDSL tests of a session (each config compiles once)."""

import pytest


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("xvendor-flydsl-compile-cache")
