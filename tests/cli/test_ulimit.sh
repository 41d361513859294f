#!/usr/bin/env bash
# Under a low address-space limit (ulimit -v) analyze stops with a message naming the limit instead
# of hanging in OpenBLAS's allocation retry loop, also when OpenBLAS's own worker threads run late (a
# loaded machine); no limit from too little to enough hangs; with room enough it runs. Skipped in the sanitizer
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
# A late OpenBLAS worker (a loaded machine): OpenBLAS's pthread build starts worker threads when it is
# loaded, each mapping its 128 MiB buffer when it first runs and retrying forever when that fails; one
# that ran after the headroom check hung the job, then exit() waiting for it. The program keeps that pool
# from starting under a limit (cli/main.c); late_blas_worker.c, holding every such mapping of a thread
# other than the main one back by 0.5 s, stands in for the late worker (the job hung with it before the fix).
if cc -shared -fPIC -o "$tmp/late.so" "$(dirname "$0")/late_blas_worker.c" -ldl 2> "$tmp/cc.err"; then
  ( ulimit -v 400000; LD_PRELOAD="$tmp/late.so" OMP_NUM_THREADS=2 TSC_CONTAIN=0 timeout 20 "$TSC" analyze "$tmp/t.h5" \
    -o "$tmp/late" -q ) > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ "$rc" = 1 ] && grep -qF "leaves no room for the BLAS work buffers" "$tmp/err" && ok ||
    bad "analyze under ulimit -v 400000 with a late BLAS worker: exit $rc (124 is the hang), stderr: $(head -3 "$tmp/err")"
else
  bad "cannot build the late-worker shim: $(head -3 "$tmp/cc.err")"
fi
# No limit leaves a hang: from too little to enough, each run stops with the message or succeeds.
for v in 300000 400000 500000 600000 800000; do
  ( ulimit -v $v; OMP_NUM_THREADS=2 TSC_CONTAIN=0 timeout 20 "$TSC" analyze "$tmp/t.h5" -o "$tmp/s$v" -q ) \
    > "$tmp/out" 2> "$tmp/err"
  rc=$?
  { [ "$rc" = 0 ] || { [ "$rc" = 1 ] && grep -qF "leaves no room for the BLAS work buffers" "$tmp/err"; }; } && ok ||
    bad "analyze under ulimit -v $v: exit $rc (124 is a hang), stderr: $(head -3 "$tmp/err")"
done
( ulimit -v 2000000; OMP_NUM_THREADS=2 timeout 120 "$TSC" analyze "$tmp/t.h5" -o "$tmp/b" -q ) > "$tmp/out" 2> "$tmp/err" \
  && ok || bad "analyze under ulimit -v 2000000 failed: $(head -3 "$tmp/err")"
[ -s "$tmp/b/summary.json" ] && ok || bad "no summary.json with room enough"
finish
