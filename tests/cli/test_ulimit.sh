#!/usr/bin/env bash
# Under a low address-space limit (ulimit -v) analyze stops with a message naming the limit instead
# of hanging in OpenBLAS's allocation retry loop; with room enough it runs. Skipped in the sanitizer
# build, whose shadow memory needs terabytes of address space.
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
if grep -q '^TSC_SANITIZE:BOOL=ON' "${TSC_BUILD:-.}/CMakeCache.txt" 2>/dev/null; then
  echo "skip: ulimit -v cannot apply to a sanitizer build"; exit 77
fi
ok "$TSC" synth --shape tiny -o "$tmp/t.h5" -q
# 400 MB: the program and its libraries fit, two OpenBLAS work buffers (2 x 144 MiB) do not
( ulimit -v 400000; OMP_NUM_THREADS=2 TSC_CONTAIN=0 timeout 60 "$TSC" analyze "$tmp/t.h5" -o "$tmp/a" -q ) \
  > "$tmp/out" 2> "$tmp/err"
rc=$?
[ "$rc" = 1 ] && ok || bad "analyze under ulimit -v 400000: exit $rc (124 is the old hang), stderr: $(head -3 "$tmp/err")"
grep -qF "the address-space limit (ulimit -v, 390 MiB) leaves no room for the BLAS work buffers (288 MiB for 2 thread(s))" \
  "$tmp/err" && ok || bad "message: $(cat "$tmp/err")"
( ulimit -v 2000000; OMP_NUM_THREADS=2 timeout 120 "$TSC" analyze "$tmp/t.h5" -o "$tmp/b" -q ) > "$tmp/out" 2> "$tmp/err" \
  && ok || bad "analyze under ulimit -v 2000000 failed: $(head -3 "$tmp/err")"
[ -s "$tmp/b/summary.json" ] && ok || bad "no summary.json with room enough"
finish
