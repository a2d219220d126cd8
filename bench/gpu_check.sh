#!/usr/bin/env bash
# One run on a lent CUDA/ROCm GPU: the environment, `xvendor check`, every l2 test of the
# project and the GPU benchmarks, all written to OUT_DIR, so a few minutes of a GPU are
# spent well. Runs from a source checkout against the machine's own torch (no install):
#
#     bench/gpu_check.sh OUT_DIR            # e.g. the device tool: bench/gpu_check.sh "$OUT"
#
# Exit status: 0 when every step passed; the logs say which did not.
set -uo pipefail
OUT="${1:?usage: bench/gpu_check.sh OUT_DIR}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
status=0
step() {  # step NAME COMMAND...: run, log to OUT/NAME.txt, remember a failure
    local name=$1; shift
    echo "== $name: $*"
    if ! "$@" > "$OUT/$name.txt" 2>&1; then echo "   FAILED (see $name.txt)"; status=1; fi
}
step env bash -c "nvidia-smi || rocm-smi; $PY -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.version.cuda, torch.version.hip, torch.cuda.get_device_name())'"
step info "$PY" -m xvendor.cli info
step check "$PY" -m xvendor.cli check
step l2-tests "$PY" -m pytest tests -m l2 -rs -q -p no:cacheprovider -o addopts="--import-mode=importlib" --junitxml="$OUT/l2-junit.xml"
step gpu-bench "$PY" bench/gpu_gemm.py --json "$OUT/gpu-bench.json"
# xvendor's automatic choice against torch's own op on the device (the CUDA-graph capture
# of every automatic path is an l2 test above: tests/torch_backend/test_cuda_graph_l2.py).
step vs-torch "$PY" bench/vs_torch.py --device cuda
step scaled-bench "$PY" bench/scaled_mm.py --gpu --json "$OUT/scaled-bench.json"
# On gfx950/gfx1250: the FlyDSL RMSNorm (fwd/bwd) and topk kernels against torch, next to
# their memory-bound floors; on NVIDIA: the backends that run there.
step norm-topk-bench "$PY" bench/gpu_norm_topk.py --json "$OUT/norm-topk-bench.json"
echo "gpu_check: $([ $status = 0 ] && echo PASS || echo FAIL) -> $OUT"
exit $status
