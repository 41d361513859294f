#!/usr/bin/env bash
# Installs the Debian packages tilescope needs that are missing. Idempotent:
# prints what it installs, or nothing to do. Uses apt-get as root, sudo otherwise.
# --test adds what only the tests need: python3-torch (the PyTorch presets are checked against real
# torch) and chromium (the HTML viewer is tested in a real headless browser). --ci is --test plus
# clang (CI builds with a second compiler). --bench adds the benchmarks' baselines (python3-torch).
set -euo pipefail
pkgs=(
  build-essential cmake pkg-config
  libhdf5-dev hdf5-tools                 # dump format; h5dump for interop tests
  zlib1g-dev                             # .npz members stored with deflate (tilescope import)
  libcairo2-dev libpango1.0-dev          # heatmaps, PDF/SVG/PNG, text
  gnuplot-nox                            # curves (child process through a pipe)
  liblapacke-dev libopenblas-dev         # SVD, eigenvalues; BLAS products (blas.pc, cblas.h)
  openmpi-bin libopenmpi-dev             # mpirun: multi-process train and diagnose (docs/DISTRIBUTED.md)
  poppler-utils                          # pdfinfo/pdftotext/pdftoppm in report tests
  python3-h5py python3-numpy             # interop tests and baselines
  python3-pip python3-setuptools python3-wheel python3-venv   # `pip install .` offline (pyproject.toml)
  python3-matplotlib                     # the heatmap benchmark's baseline
  bible-kjv                              # `tilescope train`'s built-in text (and the PyTorch example's)
)
case "${1:-}" in
  --bench) pkgs+=(python3-torch time) ;;             # the benchmarks' baselines; GNU time (peak RSS)
  --test) pkgs+=(python3-torch chromium) ;;
  --ci) pkgs+=(python3-torch chromium clang) ;;  # CI builds and tests with a second compiler too
  "") ;;
  *) echo "setup: unknown option '$1' (expected --test, --ci or --bench)" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
