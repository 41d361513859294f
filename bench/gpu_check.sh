#!/usr/bin/env bash
# gpu_check.sh [OUT_DIR]: everything the CUDA side needs a GPU for, in one run that fits the
# 15 minutes a lent GPU machine gives (budget: under 8 minutes on an H200): builds tilescope with
# CUDA (build-gpu/), runs the GPU tests (tests/capture/test_cuda: exact mode on device BF16/FP16/
# FP32 inputs bit for bit against the CPU reference, tile statistics included; test_backends,
# whose sweep then includes the "cuda" backend; test_capture_async), then the timings
# (bench_gpu: exact mode on GPT-2-small and Llama-7B layer shapes, capture overhead at 1/100
# sampling, fast mode's TFLOP/s; bench/gpu_torch_sdpa.py: torch's flash kernels on the same
# shapes), and writes OUT_DIR/gpu_summary.md (default build-gpu/gpu-check) with every output.
# Exits 1 when a test failed; each step has its own time limit so one hang cannot eat the budget.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build-gpu
out=${1:-$build/gpu-check}
mkdir -p "$out"
sum=$out/gpu_summary.md
rc=0
start=$(date +%s)
{
    echo "# GPU check"
    echo
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
    echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
} >"$sum"
step() { # step NAME LIMIT_S command...: runs it, appends its output to the summary
    local name=$1 limit=$2; shift 2
    echo "== $name" | tee -a "$sum"
    local t0=$(date +%s)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local r=$?
    tail -40 "$out/$name.log" | tee -a "$sum"
    echo "($name: exit $r, $(( $(date +%s) - t0 )) s)" | tee -a "$sum"
    return $r
}
step configure 120 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release || rc=1
grep -q "CUDA kernels enabled" "$out/configure.log" || { echo "no CUDA in this build" | tee -a "$sum"; rc=1; }
step build 300 cmake --build "$build" -j "$(nproc)" --target test_cuda test_backends test_capture_async bench_gpu || rc=1
step test_cuda 240 "$build/tests/test_cuda" || rc=1
step test_backends 120 "$build/tests/test_backends" || rc=1
step test_capture_async 60 "$build/tests/test_capture_async" || rc=1
step bench_gpu 240 "$build/bench_gpu" || rc=1
py=$(command -v python3 || true)
if [ -n "$py" ] && "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    step torch_sdpa 120 "$py" "$root/bench/gpu_torch_sdpa.py" || rc=1
else
    echo "== torch_sdpa: skipped, no python3 with torch and CUDA here" | tee -a "$sum"
fi
echo "total: $(( $(date +%s) - start )) s, exit $rc" | tee -a "$sum"
exit $rc
