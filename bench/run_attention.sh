#!/usr/bin/env bash
# Builds and runs the attention benchmark (bench/bench_attention.c) with its PyTorch baseline
# (bench/torch_fa2.py, run by Debian's /usr/bin/python3 with python3-torch). Usage, from anywhere:
#   bash bench/run_attention.sh [BUILD_DIR] [bench_attention flags...]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
shift || true
cmake -S "$src" -B "$build" -DTSC_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target bench_attention -j2 >/dev/null
py=$(bash "$src/scripts/find_python.sh" torch) || {
    echo "note: no python3 imports torch (apt-get install python3-torch): no baseline"; py=/usr/bin/python3; set -- --no-torch "$@"; }
cd "$src"
exec "$build/bench_attention" --torch "$src/bench/torch_fa2.py" --python "$py" "$@"
