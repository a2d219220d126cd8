"""`xvendor port` (xvendor.port.cli.main): outputs, exit codes 0/1/2, --compile, --check."""

import json

import pytest

from xvendor.port import cli

from .conftest import CUDA


@pytest.mark.l0
def test_all_ok_file_exits_0_and_writes_three_outputs(tmp_path):
    assert cli.main([str(CUDA / "linalg.cu"), "-o", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "linalg.json").read_text())
    assert {k["name"]: k["status"] for k in report["kernels"]} == {
        "matmul_tiled": "ok", "axpy_float4": "ok", "scale_bias": "ok", "fill_iota": "ok",
        "block_sum": "ok"}
    assert "void matmul_tiled(" in (tmp_path / "linalg.sycl.cpp").read_text()
    py = (tmp_path / "linalg.py").read_text()
    assert "mod.matmul_tiled[grid, block](A, B, C, M, N, K)" in py
    compile(py, "linalg.py", "exec")


@pytest.mark.l0
def test_unsupported_kernels_exit_1_and_are_listed(tmp_path, capsys):
    assert cli.main([str(CUDA / "unsupported.cu"), "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "uses_ptx: unsupported: inline PTX" in err and "2/5 kernels ok" in err


@pytest.mark.l0
@pytest.mark.parametrize("argv", [["nope.cu"], ["--warp", "16", "x.cu"], []])
def test_usage_errors_exit_2(tmp_path, argv):
    argv = [str(tmp_path / a) if a.endswith(".cu") else a for a in argv]
    assert cli.main(argv + ["-o", str(tmp_path)]) == 2


@pytest.mark.l0
def test_unknown_kernel_selection_exits_2(tmp_path):
    assert cli.main([str(CUDA / "linalg.cu"), "--kernel", "nope", "-o", str(tmp_path)]) == 2


@pytest.mark.l1
def test_compile_and_check_against_a_reference(tmp_path, sycl_device, capsys):
    ref = CUDA.parent / "reductions_ref.py"
    rc = cli.main([str(CUDA / "reductions.cu"), "-o", str(tmp_path), "--check", str(ref)])
    report = json.loads((tmp_path / "reductions.json").read_text())
    assert len(report["check"]) == 7 and all(r["ok"] for r in report["check"]), report["check"]
    assert rc == 0
    assert "row_sum_shfl" in capsys.readouterr().out  # the table


@pytest.mark.l1
def test_check_reports_a_wrong_reference_as_mismatch(cuda_module):
    import torch

    from xvendor.port import Case, check
    mod = cuda_module("reductions")
    case = Case("row_sum_shfl", make=lambda: (torch.ones(3, 40), torch.empty(3), 40),
                outputs=(1,), grid=lambda b: 3, blocks=(32, 64))
    rows = check(mod, {"row_sum_shfl": lambda x, o, c: x.double().sum(1) + 1}, [case])
    assert [r.ok for r in rows] == [False, False] and rows[0].max_abs_err == pytest.approx(1.0)
    rows = check(mod, {"row_sum_shfl": lambda x, o, c: x.double().sum(1)}, [case])
    assert all(r.ok for r in rows)


@pytest.mark.l1
def test_translated_host_launchers_run(tmp_path, cuda_module):
    """The host functions of the .cu, translated to Python, launch the kernels right."""
    import importlib.util

    import torch
    assert cli.main([str(CUDA / "linalg.cu"), "-o", str(tmp_path)]) == 0
    spec = importlib.util.spec_from_file_location("linalg_launchers", tmp_path / "linalg.py")
    py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(py)
    mod = cuda_module("linalg")
    M, N, K = 33, 50, 21
    A, B, C = torch.randn(M, K), torch.randn(K, N), torch.full((M, N), float("nan"))
    py.launch_matmul(mod, A, B, C, M, N, K)  # dim3 block(TILE, TILE); grid from sizes
    torch.testing.assert_close(C.double(), A.double() @ B.double(), atol=1e-4, rtol=1e-5)
    x, out = torch.randn(1000), torch.full((1000,), float("nan"))
    py.launch_scale_bias(mod, out, x, 3.0, 1.0, 1000, 64)
    torch.testing.assert_close(out, x * 3 + 1)
    assert "launch_block_sum" in (tmp_path / "linalg.py").read_text()  # listed, with why
    assert "not translated" in (tmp_path / "linalg.py").read_text()


@pytest.mark.l0
def test_a_kernel_the_parser_cannot_read_is_never_exit_0(tmp_path):
    src = tmp_path / "broken.cu"
    src.write_text('#define X(a) a\nX(__global__ void k(float *y) { y[0] = 1; })\n')
    assert cli.main([str(src), "-o", str(tmp_path)]) == 1
