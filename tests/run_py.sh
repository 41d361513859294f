#!/usr/bin/env bash
# Runs a Python test with an interpreter that imports h5py and numpy (Debian's /usr/bin/python3
# first: the python3 first on PATH may be a separate build without them). Exit 77 = skipped.
py=$(bash "$(dirname "$0")/../scripts/find_python.sh") || {
  echo "SKIP: no python3 with h5py and numpy found (apt-get install python3-h5py python3-numpy)"; exit 77; }
# The package python/tilescope of this tree, over the build's library and program (docs/PYTHON.md).
export PYTHONPATH="$(cd "$(dirname "$0")/../python" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
[ -n "${TSC_BUILD:-}" ] && export TILESCOPE_LIB="$TSC_BUILD/libtilescope.so"
[ -n "${TSC:-}" ] && export TILESCOPE_BIN="$TSC"
# A sanitized libtilescope loaded into Python through ctypes needs the ASan runtime first in the
# process; the interpreter's own allocations are not ours to leak-check.
if [ -n "${TSC_BUILD:-}" ] && grep -q '^TSC_SANITIZE:BOOL=ON' "$TSC_BUILD/CMakeCache.txt" 2>/dev/null; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so)${LD_PRELOAD:+:$LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
exec "$py" "$@"
