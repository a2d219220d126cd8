"""One cold compile cache for the whole tuning test session (the subset compiles once)."""

import pytest


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("xvendor-compile-cache")


@pytest.fixture
def recording_backend():
    """``make(name, ops)``: register a CPU backend serving ``ops`` with the aten kernels that
    records the ``config`` each call receives (``module.CONFIGS``: [(op, config)]); it is
    unregistered and the registry restored afterwards."""
    import sys
    import types

    import xvendor
    from xvendor import reference, registry
    made = []

    def make(name: str, ops):
        mod = types.ModuleType(f"xvendor_test_{name}")
        mod.CONFIGS = []

        def kernel(op):
            def run(*args, config=None):
                mod.CONFIGS.append((op, config))
                return getattr(reference, op)(*args)
            return run
        mod.KERNELS = {op: kernel(op) for op in ops}
        sys.modules[mod.__name__] = mod
        made.append(mod.__name__)
        xvendor.register(registry.Backend(name=name, module=mod.__name__, ops=set(ops),
                                          device_types={"cpu"}))
        return mod

    yield make
    for name in made:
        sys.modules.pop(name, None)
    registry.reset(configuration=True)
