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
py=/usr/bin/python3
"$py" -c "import torch" 2>/dev/null || { echo "note: $py cannot import torch (apt-get install python3-torch): no baseline"; set -- --no-torch "$@"; }
cd "$src"
exec "$build/bench_attention" --torch "$src/bench/torch_fa2.py" --python "$py" "$@"
