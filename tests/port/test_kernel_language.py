"""tests/port/cuda/kernel_language.cu: host code never reaches the SYCL compiler (host
class with host APIs, host member functions, explicit instantiations), macro-spelled
``__device__``, a device member function with ``__shared__``, a struct passed by value,
``uchar4``/``make_uchar4``, integer intrinsics, the unsigned ``atomicMax``, ``isfinite``,
``cg::sync``, ``#if`` inside a kernel decided by ``-D``, a header found through ``-I``,
template arguments from a local constant and from a default. Numerics against torch
references computed in float64 / exact integers, outputs poisoned first."""

import ctypes

import pytest
import torch

from xvendor.port import build

from .conftest import CUDA

SRC, INC = CUDA / "kernel_language.cu", [str(CUDA / "include")]


class Affine(ctypes.Structure):
    _fields_ = [("scale", ctypes.c_float), ("shift", ctypes.c_float)]


@pytest.mark.l0
def test_only_device_code_is_emitted():
    t = build.translate_file(SRC, include_dirs=INC)
    for host in ("StreamPool", "cudaStream", "print_on_host", "launch_all_typed", "std::vector",
                 "cudaDeviceSynchronize"):
        assert host not in t.source, host
    assert "kl_twice" in t.source and "work_group_static<float[1]>" in t.source  # member's __shared__
    insts = [i.args for i in t.report("scale_unrolled").instantiations]
    assert insts == [["float", "4"], ["float", "2"]]  # local constant; the default
    assert {k.name: k.status for k in t.kernels} == dict.fromkeys(
        ["affine_square", "bytes_and_ints", "finite_sum", "scale_unrolled", "smooth3", "apply_gain"], "ok")


@pytest.mark.l0
def test_a_header_outside_the_folder_needs_include_dirs():
    t = build.translate_file(SRC)
    assert "kl_twice" not in t.source.split("#include \"xvendor_cuda_compat.h\"")[1].split("affine_square")[0]


@pytest.fixture(scope="module")
def kl(sycl_device):
    import xvendor.port
    return xvendor.port.load(SRC, include_dirs=INC, defines=["KL_FLUSH_NONFINITE"])


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 128, 256])
def test_struct_by_value_and_member_shared(kl, block):
    n = 1000
    x, y = torch.randn(n), torch.full((n,), float("nan"))
    kl.affine_square[(n + block - 1) // block, block](Affine(1.5, -0.25), x, y, n)
    want = 2 * (1.5 * x.double() - 0.25) ** 2
    torch.testing.assert_close(y.double(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.l1
@pytest.mark.parametrize("block", [64, 256])
def test_vector_bytes_integer_intrinsics_unsigned_atomic(kl, block):
    n = 777
    px = torch.randint(0, 256, (n, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(block))
    out = torch.full((2 * n,), -1, dtype=torch.int32)
    mx = torch.zeros(1, dtype=torch.int32)
    kl.bytes_and_ints[(n + block - 1) // block, block](px, out, mx, n)
    b = px.long()
    packed = b[:, 3] | (b[:, 2] << 8) | (b[:, 1] << 16) | (b[:, 0] << 24)
    hi = (packed * 0x9E3779B9) >> 32
    pop = torch.tensor([bin(int(v)).count("1") for v in packed])
    got = out.long() & 0xFFFFFFFF
    assert torch.equal(got[0::2], packed)
    assert torch.equal(got[1::2], (hi + pop) & 0xFFFFFFFF)
    assert int(mx.long() & 0xFFFFFFFF) == int(packed.max())


@pytest.mark.l1
@pytest.mark.parametrize("block", [64, 256])
def test_isfinite_cg_sync_and_a_define(kl, block):
    n = 1500
    x = torch.randn(n)
    x[::7], x[3::11] = float("inf"), float("nan")
    grid = (n + block - 1) // block
    sums = torch.full((grid,), float("nan"))
    kl.finite_sum[grid, block](x, sums, n)
    clean = torch.where(torch.isfinite(x), x, torch.zeros(())).double()  # -D KL_FLUSH_NONFINITE: 0
    want = torch.nn.functional.pad(clean, (0, grid * block - n)).view(grid, block).sum(1)
    torch.testing.assert_close(sums.double(), want, atol=1e-4, rtol=1e-5)


@pytest.mark.l1
def test_local_constant_and_default_template_arguments(kl):
    n = 1001
    y = torch.randn(n)
    want = y.double() * 2 * 0.5 * 3
    kl["scale_unrolled<float, 4>"][(n + 255) // 256, 64](y, 2.0, n)
    kl["scale_unrolled<float, 2>"][(n + 127) // 128, 64](y, 0.5, n)
    kl["scale_unrolled<float, 4>"][(n + 255) // 256, 64](y, 3.0, n)
    torch.testing.assert_close(y.double(), want)


@pytest.mark.l1
@pytest.mark.parametrize("block", [32, 256])
def test_initialized_constant_symbols_are_const_globals(kl, block):
    n = 900
    x, y = torch.randn(n), torch.full((n,), float("nan"))
    kl.smooth3[(n + block - 1) // block, block](x, y, n)
    xd = x.double()
    want = 0.25 * xd[:-2] + 0.5 * xd[1:-1] + 0.25 * xd[2:] + 1e-3
    torch.testing.assert_close(y[1:-1].double(), want, atol=1e-6, rtol=1e-6)
    assert y[0].isnan() and y[-1].isnan()  # not written


@pytest.mark.l1
def test_constant_and_device_symbols_are_module_owned(kl):
    n, gains = 1000, torch.tensor([0.5, 2.0, -1.0, 3.0])
    assert sorted(kl.symbols) == ["c_gain", "n_written"]
    kl.symbols["c_gain"] = gains                                  # cudaMemcpyToSymbol
    assert torch.equal(kl.symbols["c_gain"].view(torch.float32), gains)
    kl.symbols["n_written"] = torch.zeros(1, dtype=torch.int32)
    x = torch.randn(n)
    y = x.clone()
    kl.apply_gain[(n + 127) // 128, 128](y, n)
    torch.testing.assert_close(y, x * gains[torch.arange(n) % 4])
    assert int(kl.symbols["n_written"].view(torch.int32)) == n  # cudaMemcpyFromSymbol
    with pytest.raises(Exception, match="must be 16 bytes"):
        kl.symbols["c_gain"] = torch.zeros(3)


@pytest.mark.l0
def test_at_dispatch_aliases_instantiate_per_dispatched_type():
    from xvendor.port import parse, translate
    src = b"""
    template <typename scalar_t> __global__ void scale(scalar_t *y, int n) { y[0] *= 2; }
    template <typename scalar_t, int D> struct Functor {
      static void run(scalar_t *y) { scale<scalar_t><<<1, 32>>>(y, D); }  // not concrete here
    };
    void host(at::Tensor y) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16,
          y.scalar_type(), "scale", ([&] { scale<scalar_t><<<1, 32>>>(y.data_ptr<scalar_t>(), 4); }));
    }
    """
    t = translate.translate(parse.parse_source(src))
    assert [i.args for i in t.report("scale").instantiations] == [
        ["float"], ["double"], ["c10::Half"], ["__nv_bfloat16"]]
    assert "Functor" not in t.source and "AT_DISPATCH" not in t.source
