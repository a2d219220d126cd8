"""`xvendor port --torch-ops` on real PyTorch CUDA extensions: ops found / registered / run
correctly against the extension's own Python reference.

    python bench/port_torch_ext.py ROOT

ROOT holds the fetched repositories, extracted with ``git archive`` (never committed here):
  ROOT/pytorch+extension-cpp            pytorch/extension-cpp HEAD (muladd.cu)
  ROOT/lltm                             pytorch/extension-cpp at 79d111d: cuda/lltm_cuda_kernel.cu,
                                        python/lltm.py (the LLTM reference)
  ROOT/facebookresearch+pytorch3d       facebookresearch/pytorch3d HEAD: pytorch3d/csrc, tests/,
                                        pytorch3d/ops (its naive Python references)
Every .cu file under those is ported; an op counts as verified when it matches a reference
the extension itself ships (pytorch3d's ``*_python``/``_naive`` test functions, lltm's
Python module) or, for muladd (whose reference is C++), the same arithmetic in float64.
The references are read from the fetched files (``ast``), not copied here.
"""

from __future__ import annotations

import ast
import collections
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import torch


def reference(path: Path, name: str, extra=None):
    """The function ``name`` (top level or a static method) of a fetched Python file."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            node.decorator_list = []
            mod = ast.Module(body=[node], type_ignores=[])
            ns = {"torch": torch, "_KNN": collections.namedtuple("_KNN", "dists idx knn"), **(extra or {})}
            exec(compile(mod, str(path), "exec"), ns)  # noqa: S102 (the extension's own reference)
            return ns[name]
    raise KeyError(f"{path}: no function {name}")


def port(cu: Path, ns: str, out: Path, include=()):
    from xvendor.port import cli
    t0 = time.perf_counter()
    rc = cli.main([str(cu), "-o", str(out), "--torch-ops", ns, "--compile"]
                  + [f"-I{d}" for d in include])
    stem = cu.name.split(".")[0]
    spec = importlib.util.spec_from_file_location(f"{ns}_{stem}_ops", out / f"{stem}_ops.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    import json
    rep = json.loads((out / f"{stem}.json").read_text())
    return rc, rep.get("torch_ops", []), time.perf_counter() - t0


def close(a, b, tol):
    return (a.double() - b.double()).abs().max().item() <= tol if a.numel() else a.shape == b.shape


def cases(root: Path):
    """(cu file, namespace, op, run() -> bool) for each op with a reference."""
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.rand(*s, generator=g)  # noqa: E731
    ext = root / "pytorch+extension-cpp/extension_cpp/csrc/cuda/muladd.cu"
    a, b = torch.randn(1001, generator=g), torch.randn(1001, generator=g)

    def muladd():
        return close(torch.ops.ext_muladd.mymuladd(a, b, 0.75), a.double() * b.double() + 0.75, 1e-6)

    def mymul():
        return close(torch.ops.ext_muladd.mymul(a, b), a.double() * b.double(), 1e-6)

    def myadd_out():
        out = torch.full_like(a, float("nan"))
        torch.ops.ext_muladd.myadd_out(a, b, out)
        return close(out, a.double() + b.double(), 1e-6)
    yield ext, "ext_muladd", "mymuladd", muladd
    yield ext, "ext_muladd", "mymul", mymul
    yield ext, "ext_muladd", "myadd_out", myadd_out

    lltm = root / "lltm/lltm_cuda_kernel.cu"
    lltm_py = root / "lltm/python/lltm.py"
    if lltm_py.is_file():
        spec = importlib.util.spec_from_file_location("lltm_reference", lltm_py)
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        B, I, S = 3, 17, 45

        def forward_backward(check_backward):
            model = ref.LLTM(I, S).double()
            x, h, c = (torch.randn(B, n, generator=g, dtype=torch.float64) for n in (I, S, S))
            hr, cr = h.clone().requires_grad_(), c.clone().requires_grad_()
            xr = x.clone().requires_grad_()
            nh, nc = model(xr, (hr, cr))
            outs = torch.ops.ext_lltm.lltm_cuda_forward(x.float(), model.weights.detach().float(),
                                                        model.bias.detach().float(), h.float(), c.float())
            if not check_backward:
                return close(outs[0], nh, 1e-5) and close(outs[1], nc, 1e-5)
            gh, gc = torch.randn(B, S, generator=g, dtype=torch.float64), torch.randn(B, S, generator=g, dtype=torch.float64)
            grads = torch.autograd.grad((nh * gh).sum() + (nc * gc).sum(), [hr, xr, model.weights, model.bias, cr])
            d = torch.ops.ext_lltm.lltm_cuda_backward(gh.float(), gc.float(), outs[1], outs[2], outs[3], outs[4],
                                                      outs[5], outs[6], model.weights.detach().float())
            return all(close(x_, y_, 1e-4) for x_, y_ in zip(d[:5], grads))
        yield lltm, "ext_lltm", "lltm_cuda_forward", lambda: forward_backward(False)
        yield lltm, "ext_lltm", "lltm_cuda_backward", lambda: forward_backward(True)

    p3 = root / "facebookresearch+pytorch3d"
    csrc, tests = p3 / "pytorch3d/csrc", p3 / "tests"
    if not csrc.is_dir():
        return
    P = torch.ops.p3d

    def compositing(op, ref_name):
        def run():
            ref_fn = reference(tests / "test_compositing.py", ref_name)
            B, C, K, H, W, Np = 2, 3, 4, 5, 7, 20
            feats, alphas = r(C, Np), r(B, K, H, W)
            idx = torch.randint(-1, Np, (B, K, H, W), generator=g)
            return close(getattr(P, op)(feats, alphas, idx), ref_fn(idx, alphas.double(), feats.double()), 1e-5)
        return run
    yield csrc / "compositing/alpha_composite.cu", "p3d", "alphaCompositeCudaForward", compositing(
        "alphaCompositeCudaForward", "accumulate_alphacomposite_python")
    yield csrc / "compositing/weighted_sum.cu", "p3d", "weightedSumCudaForward", compositing(
        "weightedSumCudaForward", "accumulate_weightedsum_python")
    yield csrc / "compositing/norm_weighted_sum.cu", "p3d", "weightedSumNormCudaForward", compositing(
        "weightedSumNormCudaForward", "accumulate_weightedsumnorm_python")

    def face_areas():
        ref_fn = reference(tests / "test_face_areas_normals.py", "face_areas_normals_python")
        verts = torch.randn(50, 3, generator=g)
        faces = torch.randint(0, 50, (77, 3), generator=g)
        areas, normals = P.FaceAreasNormalsForwardCuda(verts, faces)
        ra, rn = ref_fn(verts.double(), faces)
        return close(areas, ra, 1e-5) and close(normals * areas[:, None], rn * ra[:, None], 1e-5)
    yield csrc / "face_areas_normals/face_areas_normals.cu", "p3d", "FaceAreasNormalsForwardCuda", face_areas

    def packed_to_padded():
        ref_fn = reference(tests / "test_packed_to_padded.py", "packed_to_padded_python")
        first = torch.tensor([0, 7, 19, 20])
        x = torch.randn(33, 5, generator=g)
        return close(P.PackedToPaddedCuda(x, first, 13), ref_fn(x, first, 13, "cpu"), 0)

    def padded_to_packed():
        ref_fn = reference(tests / "test_packed_to_padded.py", "padded_to_packed_python")
        first = torch.tensor([0, 7, 19, 20])
        x = torch.randn(4, 13, 5, generator=g)
        return close(P.PaddedToPackedCuda(x, first, 33), ref_fn(x, first, 33, "cpu"), 0)
    yield csrc / "packed_to_padded_tensor/packed_to_padded_tensor.cu", "p3d", "PackedToPaddedCuda", packed_to_padded
    yield csrc / "packed_to_padded_tensor/packed_to_padded_tensor.cu", "p3d", "PaddedToPackedCuda", padded_to_packed

    def gather_scatter():
        ref_fn = reference(p3 / "pytorch3d/ops/graph_conv.py", "gather_scatter_python")
        x = torch.randn(40, 9, generator=g)
        edges = torch.randint(0, 40, (100, 2), generator=g)
        return all(close(P.GatherScatterCuda(x, edges, d, False), ref_fn(x, edges, d), 1e-5)
                   for d in (False, True))
    yield csrc / "gather_scatter/gather_scatter.cu", "p3d", "GatherScatterCuda", gather_scatter

    def interp():
        ref_fn = reference(p3 / "pytorch3d/ops/interp_face_attrs.py", "interpolate_face_attributes_python")
        N, H, W, K, F, D = 2, 5, 6, 3, 11, 4
        p2f = torch.randint(-1, F, (N, H, W, K), generator=g)
        bary, attrs = r(N, H, W, K, 3), torch.randn(F, 3, D, generator=g)
        got = P.InterpFaceAttrsForwardCuda(p2f.reshape(-1), bary.reshape(-1, 3), attrs)  # packed, as its wrapper
        return close(got.reshape(N, H, W, K, D), ref_fn(p2f, bary.double(), attrs.double()), 1e-5)
    yield csrc / "interp_face_attrs/interp_face_attrs.cu", "p3d", "InterpFaceAttrsForwardCuda", interp

    def ball_query():
        ref_fn = reference(tests / "test_ball_query.py", "_ball_query_naive")
        N, P1, P2, D, K = 2, 30, 50, 3, 5
        p1, p2 = r(N, P1, D), r(N, P2, D)
        l1, l2 = torch.tensor([30, 21]), torch.tensor([50, 37])
        idx, dists = P.BallQueryCuda(p1, p2, l1, l2, K, 0.3, False)
        want = ref_fn(p1, p2, l1, l2, K, 0.3)
        return bool((idx == want.idx).all()) and close(dists, want.dists, 1e-5)
    yield csrc / "ball_query/ball_query.cu", "p3d", "BallQueryCuda", ball_query


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(__doc__)
        return 2
    root = Path(args[0])
    out = Path(tempfile.mkdtemp(prefix="port_torch_ext_"))
    files = sorted(set((root / "pytorch+extension-cpp").rglob("*.cu")) | set((root / "lltm").rglob("*.cu"))
                   | set((root / "facebookresearch+pytorch3d/pytorch3d/csrc").rglob("*.cu")))
    ported, ns_of = {}, {}
    for c in cases(root):
        ns_of[c[0]] = c[1]
    rows = []
    for cu in files:
        ns = ns_of.get(cu, "p3d" if "pytorch3d" in str(cu) else "ext")
        try:
            # pytorch3d's setup.py builds with include_dirs=[pytorch3d/csrc]
            inc = [root / "facebookresearch+pytorch3d/pytorch3d/csrc"] if "pytorch3d" in str(cu) else []
            rc, ops, secs = port(cu, ns, out / cu.stem.replace(".", "_"), inc)
        except Exception as e:  # a module that does not import counts as 0 registered
            print(f"{cu.relative_to(root)}: port/import failed: {type(e).__name__}: {str(e)[:200]}")
            ops, secs = [], 0.0
        ported[cu] = ops
        rows.append((cu, len(ops), sum(o["registered"] for o in ops), secs))
    verified, failed = [], []
    for cu, ns, op, run in cases(root):
        if not any(o["op"] == f"{ns}::{op}" and o["registered"] for o in ported.get(cu, [])):
            failed.append((op, "not registered"))
            continue
        try:
            ok = run()
        except Exception as e:
            ok, why = False, f"{type(e).__name__}: {str(e)[:160]}"
        else:
            why = "" if ok else "mismatch"
        (verified if ok else failed).append((op, why))
    print(f"{'file':58} {'ops':>4} {'registered':>10} {'s':>6}")
    for cu, n, reg, secs in rows:
        print(f"{str(cu.relative_to(root))[:58]:58} {n:4} {reg:10} {secs:6.1f}")
    print(f"total: {sum(r[1] for r in rows)} ops found, {sum(r[2] for r in rows)} registered; "
          f"{len(verified)}/{len(verified) + len(failed)} with a reference run correctly")
    for op, why in failed:
        print(f"  FAILED {op}: {why}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
