#!/usr/bin/env bash
# An interrupted job leaves no temporary file beside its output: SIGINT and SIGTERM while synth
# writes its dump remove the open temporary (util/tsc_file.h), the final name never appears, and
# the process ends by the signal (status 128 + signal number).
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"

for sig in INT TERM; do
  out="$tmp/big-$sig.h5"
  "$TSC" synth --shape gpt2-small -o "$out" -q &
  pid=$!
  # wait (at most 60 s) until the temporary exists, so the signal lands while it is open
  seen=0
  for _ in $(seq 600); do
    if compgen -G "$out.tmp.*" > /dev/null; then seen=1; break; fi
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  [ "$seen" = 1 ] && ok || bad "$sig: no temporary $out.tmp.* appeared while synth ran"
  kill -"$sig" "$pid" 2> /dev/null
  rc=0; wait "$pid" || rc=$?
  want=$((128 + $(kill -l "$sig")))
  [ "$rc" = "$want" ] && ok || bad "$sig: exit status $rc, expected $want"
  left=$(compgen -G "$out*" || true)
  [ -z "$left" ] && ok || bad "$sig: left behind: $left"
done
finish
