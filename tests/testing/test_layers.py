"""The package's layering, read from the source: no import circle, no upward import, and
no backend reaching into the engine, the ops or tuning (NOTE in xvendor/testing/layers.py).

Also proves the checker can fail: a synthetic graph with the old circle
registry -> tuning.serve -> tuning.problem -> ops -> registry is reported.
"""

import pytest

from xvendor.testing import layers

pytestmark = pytest.mark.l0


def test_the_package_has_no_import_cycle_and_no_breach():
    edges = layers.graph()
    # the reader resolves every form, or the checks below would pass vacuously:
    assert "xvendor.shapes" in edges["xvendor.ops.gemm"]  # from .. import numerics, shapes
    assert "xvendor.registry" in edges["xvendor.xpu.check"]  # from .. import registry
    assert "xvendor.xpu.tensors" in edges["xvendor.xpu.backend"]  # from .tensors import ...
    assert "xvendor.tuning.serve" in edges["xvendor.tuning.tune_cli"]  # from . import serve
    assert layers.cycles(edges) == []
    assert layers.breaches(edges) == []


def test_the_engine_imports_no_op_backend_or_tuning_module():
    edges = layers.graph()
    for mod in ("xvendor.registry", "xvendor.gate", "xvendor.dispatch.engine"):
        assert {layers.layer(d) for d in edges[mod]} <= {1, 2}, edges[mod]


def test_no_circle_runs_through_modules_named_at_run_time():
    named, edges = layers.string_graph(), layers.graph()
    # the reader sees both forms: the engine's in-tree records, a record's hooks
    assert "xvendor.torch_backend.record" in named["xvendor.dispatch.engine"]
    assert "xvendor.triton.tunable" in named["xvendor.triton.record"]
    assert not any(layers.layer(d) >= 5 for d in named["xvendor.dispatch.engine"])  # no tuning
    assert layers.cycles({m: edges[m] | named[m] for m in edges}) == []
    hidden = {"xvendor.registry": {"xvendor.ops._common"}}  # a by-name loop is still a loop
    both = {m: edges[m] | hidden.get(m, set()) for m in edges}
    assert layers.cycles(both)


def test_the_checker_reports_the_old_circle_and_an_upward_import():
    old = {"xvendor.registry": {"xvendor.tuning.serve"},
           "xvendor.tuning.serve": {"xvendor.tuning.problem"},
           "xvendor.tuning.problem": {"xvendor.ops._common"},
           "xvendor.ops._common": {"xvendor.registry"},
           "xvendor.xpu.backend": {"xvendor.tuning.serve"}}
    assert layers.cycles(old) == [sorted(m for m in old if m != "xvendor.xpu.backend")]
    bad = layers.breaches(old)
    assert any("xvendor.registry (layer 2) imports xvendor.tuning.serve" in b for b in bad)
    assert any("xvendor.xpu.backend" in b and "upward" in b for b in bad)
