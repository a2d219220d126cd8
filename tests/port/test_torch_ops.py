"""``xvendor port --torch-ops``: tests/port/cuda/torch_ext.cu (an extension in the usual
style) becomes torch.library ops whose CPU implementation runs the ported kernels on the
OpenCL CPU SYCL device. Outputs the ops allocate with ``empty`` are poisoned
(``torch_ops.POISON``), out= arguments are NaN-filled; references in float64; ragged sizes
and strided (transposed) inputs; the fake implementations are checked with opcheck."""

import importlib.util
import json

import pytest
import torch

from xvendor.port import parse, torch_ops

from .conftest import CUDA

SRC = CUDA / "torch_ext.cu"


@pytest.mark.l0
def test_ops_schemas_and_refusals():
    ops = {o.name: o for o in torch_ops.find_ops(parse.parse_file(SRC))}
    assert list(ops) == ["scaled_softplus", "row_stats", "axpy_chunked_", "axpy_out", "iota_from",
                         "scaled_copy", "scratch_copy", "gemm_then_axpy"]
    assert ops["scaled_copy"].schema == ("scaled_copy(Tensor x, int[] tile, float s=2.0, bool check=True)"
                                         " -> Tensor")
    assert ops["scaled_softplus"].schema == "scaled_softplus(Tensor x, Tensor w, float bias) -> Tensor"
    assert ops["row_stats"].schema == "row_stats(Tensor x) -> Tensor[]"
    # a Tensor by value that its kernel writes, and a non-const Tensor&: both mutated in place
    assert ops["axpy_chunked_"].schema == "axpy_chunked_(Tensor(a!) y, Tensor x, float a, int chunk) -> ()"
    assert ops["axpy_out"].schema == "axpy_out(Tensor x, float a, Tensor(a!) out) -> ()"
    assert ops["iota_from"].fake is False and ops["scaled_softplus"].fake is True  # .item() on the host
    assert "cudaMalloc" in ops["scratch_copy"].reason
    assert "vendor library" in ops["gemm_then_axpy"].reason
    assert ops["scaled_softplus"].kernels == ["scaled_softplus_kernel"]


@pytest.mark.l0
def test_bindings_of_torch_library_blocks():
    fns, schemas = torch_ops.bindings('''
        TORCH_LIBRARY(myext, m) { m.def("fused(Tensor a, float s) -> Tensor"); }
        TORCH_LIBRARY_IMPL(myext, CUDA, m) { m.impl("fused", &fused_cuda); }
        TORCH_LIBRARY_IMPL(myext, CPU, m) { m.impl("fused", &fused_cpu); }''')
    assert fns == {"fused": "fused_cuda"} and schemas == {"fused": "fused(Tensor a, float s) -> Tensor"}


@pytest.mark.l0
@pytest.mark.parametrize("cxx, schema", [
    ("const at::Tensor&", "Tensor"), ("c10::optional<at::Tensor>", "Tensor?"), ("int64_t", "int"),
    ("double", "float"), ("bool", "bool"), ("std::vector<int64_t>", "int[]"), ("at::IntArrayRef", "int[]")])
def test_schema_types(cxx, schema):
    assert torch_ops.schema_type(cxx) == schema


@pytest.mark.l0
def test_cxx_integer_semantics():
    assert torch_ops.div(-7, 2) == -3 and torch_ops.rem(-7, 2) == -1 and torch_ops.div(7.0, 2) == 3.5
    assert torch_ops.ceil_div(1000, 256) == 4


@pytest.fixture(scope="module")
def te(sycl_device, tmp_path_factory):
    out = tmp_path_factory.mktemp("torch_ops")
    from xvendor.port import cli
    rc = cli.main([str(SRC), "-o", str(out), "--torch-ops", "xv_test_ext"])
    assert rc == 1  # two ops are refused
    report = json.loads((out / "torch_ext.json").read_text())["torch_ops"]
    assert [o["op"] for o in report if not o["registered"]] == ["xv_test_ext::scratch_copy",
                                                                "xv_test_ext::gemm_then_axpy"]
    spec = importlib.util.spec_from_file_location("torch_ext_ops", out / "torch_ext_ops.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    torch_ops.POISON = True
    yield torch.ops.xv_test_ext
    torch_ops.POISON = False


@pytest.mark.l1
@pytest.mark.parametrize("dtype, shape, tol", [(torch.float32, (3, 37), 1e-5), (torch.float64, (2, 300), 1e-5),
                                               (torch.float16, (4, 129), 2e-3)])
def test_accessor_kernel_under_dispatch(te, dtype, shape, tol):
    # a strided view; the kernel computes softplus in float (w is float): fp32 tolerance
    x = (torch.randn(shape[::-1], dtype=torch.float64) * 4).to(dtype).t()
    w = torch.randn(shape[1])
    out = te.scaled_softplus(x, w, 0.25)
    want = torch.nn.functional.softplus(x.double()) * w.double() + 0.25
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), want, atol=tol, rtol=tol)


@pytest.mark.l1
def test_checks_raise_like_torch_check(te):
    with pytest.raises(RuntimeError, match="w must have 5 elements"):
        te.scaled_softplus(torch.randn(2, 5), torch.randn(4), 0.0)
    with pytest.raises(NotImplementedError, match="not implemented for 'Int'"):
        te.row_stats(torch.ones(2, 3, dtype=torch.int32))


@pytest.mark.l1
@pytest.mark.parametrize("rows, cols", [(1, 1), (5, 1000), (3, 7)])
def test_shared_memory_reduction_and_torch_ops_after(te, rows, cols):
    x = torch.randn(rows, cols, dtype=torch.float64)
    sumsq, rms = te.row_stats(x)
    want = (x * x).sum(1)
    torch.testing.assert_close(sumsq.double(), want, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(rms.double(), (want / cols).sqrt(), atol=1e-4, rtol=1e-5)


@pytest.mark.l1
@pytest.mark.parametrize("n, chunk", [(1000, 300), (5, 8), (257, 1)])
def test_loop_of_launches_with_pointer_offsets_in_place(te, n, chunk):
    x, y = torch.randn(n), torch.randn(n)
    want = 1.5 * x.double() + y.double()
    te.axpy_chunked_(y, x, 1.5, chunk)
    torch.testing.assert_close(y.double(), want, atol=1e-6, rtol=1e-6)
    out = torch.full((n,), float("nan"))
    te.axpy_out(x, 2.0, out)  # out += 2x on NaN stays NaN: the kernel read it, as CUDA's would
    assert torch.isnan(out).all()
    out.zero_()
    te.axpy_out(x, 2.0, out)
    torch.testing.assert_close(out.double(), 2 * x.double(), atol=1e-6, rtol=1e-6)


@pytest.mark.l1
@pytest.mark.parametrize("n, tile", [(1, (32, 1)), (1000, (32, 4)), (77, (8, 8))])
def test_defaults_tuple_arguments_and_errors(te, n, tile):
    x = torch.randn(n)
    torch.testing.assert_close(te.scaled_copy(x, list(tile)).double(), 2 * x.double())
    torch.testing.assert_close(te.scaled_copy(x, list(tile), -0.5).double(), -0.5 * x.double())
    with pytest.raises(RuntimeError, match="tile 0 must be positive"):
        te.scaled_copy(x, [0, 4])


@pytest.mark.l1
def test_data_dependent_size(te):
    assert te.iota_from(torch.tensor(6)).tolist() == [0, 3, 6, 9, 12, 15]
    assert te.iota_from(torch.tensor(0)).numel() == 0


@pytest.mark.l1
def test_fake_implementations_pass_opcheck(te):
    x, w = torch.randn(3, 33), torch.randn(33)
    checks = ("test_schema", "test_faketensor")
    torch.library.opcheck(te.scaled_softplus.default, (x, w, 0.5), test_utils=checks)
    torch.library.opcheck(te.axpy_chunked_.default, (torch.randn(40), torch.randn(40), 0.5, 16), test_utils=checks)
    torch.library.opcheck(te.row_stats.default, (torch.randn(4, 9),), test_utils=checks)
