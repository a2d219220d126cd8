"""On a CUDA/ROCm GPU: every op's automatic path (the ``torch`` backend here) is captured
in a CUDA graph and replays to the eager result: proof on the device that nothing in it
synchronizes with the host (a sync inside capture raises). Skipped without a GPU."""

import pytest
import torch

import xvendor
from xvendor import registry

from .test_no_host_sync import _calls

pytestmark = [pytest.mark.l2,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA or ROCm GPU (torch.cuda.is_available())")]


@pytest.mark.parametrize("case", sorted(_calls("cpu")))
def test_automatic_path_captures_in_a_cuda_graph(case):
    op, args = _calls("cuda")[case]
    fn = getattr(xvendor, op)
    if op == "scaled_mm":
        from torch.nn.functional import ScalingType
        a, b, sa, ra, sb, rb, *_ = args
        call = lambda: fn(a, b, sa, ScalingType(ra), sb, ScalingType(rb))  # noqa: E731
    else:
        call = lambda: fn(*args)  # noqa: E731
    eager = call()  # also the warm-up: decisions and kernels are made outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = call()
    graph.replay()
    torch.cuda.synchronize()
    first = lambda t: t[0] if isinstance(t, tuple) else t  # noqa: E731
    torch.testing.assert_close(first(captured), first(eager))
    dtype = args[0].dtype if op != "scaled_mm" else torch.bfloat16
    print(case, "->", registry.decide(op, args[0].device, dtype).backend)
