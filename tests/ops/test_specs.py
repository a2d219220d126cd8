"""Every op's description (``OpSpec``): its self-check cases, run by ``xvendor check``
through the dispatch layer on the CPU, pass against the op's fp64 oracle, on the backend
that was decided (no fallback); where the op judges its outputs with its own ``error``
hook (dtypes, shapes, bits), the hook finds nothing at all."""

import pytest
import torch

from xvendor import ops, registry, selfcheck

pytestmark = pytest.mark.l0


@pytest.mark.parametrize("op", sorted(ops.SPECS))
def test_self_check_cases_pass_on_the_cpu(op):
    rows = selfcheck.run(torch.device("cpu"), op_names={op})
    assert len(rows) == 3 * len(list(ops.SPECS[op].cases(torch.randn, "cpu")))  # 3 dtypes
    bad = [r for r in rows if not (r.ok and r.backend in ("torch", "reference") and not r.fell_back_from)]
    assert not bad, bad
    if ops.SPECS[op].error is not None:
        assert all(r.rel_error == 0.0 for r in rows), rows


def test_every_defined_op_has_a_spec_and_cases():
    assert set(registry.ops()) == set(ops.SPECS)
    assert all(list(spec.cases(torch.randn, "cpu")) for spec in ops.SPECS.values())
