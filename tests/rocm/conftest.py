"""Fixtures of the FlyDSL tests: one cold compile cache per session (each config compiles
once), and an MLIR context for the layout proofs."""

import pytest


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("xvendor-flydsl-compile-cache")


@pytest.fixture(scope="module")
def mlir():
    """An MLIR context and insertion point, so FlyDSL's layout algebra evaluates on the CPU
    (the layout proofs)."""
    pytest.importorskip("flydsl")
    from flydsl._mlir import ir
    ctx = ir.Context()
    ctx.load_all_available_dialects()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            yield
