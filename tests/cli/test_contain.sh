#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# Containment (docs/SECURITY.md): dumps that crash or hang libhdf5 1.10.8 while its metadata is
# read (tests/data/hostile/, found by fuzzing) make `tilescope info` and `tilescope analyze` exit 1
# promptly with a message naming the file and the cause, and leave no core dump; a sound dump
# gives the same output with containment on (the CLI's default) and off (TSC_CONTAIN=0).
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
DATA="$(cd "$(dirname "$0")/../data/hostile" && pwd)"
cd "$tmp" || exit 1
ulimit -c unlimited 2>/dev/null || true
# expect_prompt WANT MAXSECS CMD...: exit status 1 within MAXSECS, stderr containing WANT, no core file
expect_prompt() {
  local want=$1 max=$2; shift 2
  local t0=$SECONDS
  timeout 30 "$@" >out 2>err; local got=$?
  local took=$((SECONDS - t0))
  if [ "$got" != 1 ] || ! grep -qF -- "$want" err || [ "$took" -gt "$max" ]; then
    echo "FAIL: '$*' exit $got in ${took}s (want 1 within ${max}s, with '$want'), stderr:" >&2; head -5 err >&2
    fail=$((fail+1))
  else pass=$((pass+1)); fi
  ls core* >/dev/null 2>&1 && bad "'$*' left a core dump" || ok
}
crash="the HDF5 library crashed (SIGSEGV) while reading the file's metadata: the file is corrupt or hostile; not opened"
# Under ASan/UBSan the sanitizer catches the fault first, reports and exits 1: the parent then sees
# an exit without a report rather than the signal, so only the common part of the message is fixed.
sanitized=0
grep -q '^TSC_SANITIZE:BOOL=ON' "${TSC_BUILD:-.}/CMakeCache.txt" 2>/dev/null && sanitized=1
want="d.h5: $crash"
[ "$sanitized" = 1 ] && want="while reading the file's metadata: the file is corrupt or hostile; not opened"
for f in global-heap-segv global-heap-memcpy-overlap; do
  cp "$DATA/$f.h5" d.h5
  expect_prompt "$want" 5 "$TSC" info d.h5
  expect_prompt "$want" 5 "$TSC" analyze d.h5 -o an
  [ ! -e an/summary.json ] && ok || bad "analyze of $f wrote a summary"
  # without containment the same file crashes the process (the reason for containment)
  TSC_CONTAIN=0 timeout 30 "$TSC" info d.h5 >/dev/null 2>uerr; rc=$?
  { [ "$rc" -ge 128 ] || { [ "$sanitized" = 1 ] && grep -q "ERROR: AddressSanitizer" uerr; }; } && ok ||
    bad "uncontained info of $f exited $rc (expected a crash: is it still a crasher?)"
  rm -f core*
done
cp "$DATA/global-heap-hang.h5" h.h5
export TSC_CONTAIN_TIMEOUT=3
expect_prompt "tilescope info: h.h5: the HDF5 library did not finish reading the file's metadata within 3 s" 8 "$TSC" info h.h5
expect_prompt "h.h5: the HDF5 library did not finish reading the file's metadata within 3 s" 8 "$TSC" analyze h.h5 -o an
unset TSC_CONTAIN_TIMEOUT

# a sound dump: the same output contained or not
"$TSC" synth -o good.h5 -q || { echo "synth failed"; exit 1; }
"$TSC" info good.h5 --json >on.json && ok || bad "info good.h5"
TSC_CONTAIN=0 "$TSC" info good.h5 --json >off.json && ok || bad "TSC_CONTAIN=0 info good.h5"
cmp -s on.json off.json && ok || bad "info --json differs with containment on and off"
grep -q '"ok": *true' on.json && ok || bad "info of good.h5 is not ok: $(head -c 300 on.json)"
finish
