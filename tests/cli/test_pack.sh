#!/usr/bin/env bash
# The user's path after a crash: a training loop (examples/capture_loop) capturing through the API
# is killed with SIGKILL; `tilescope info` reads the session folder; `tilescope pack` turns it into
# one dump holding every completed step; bad arguments give usage errors.
. "$(dirname "$0")/lib.sh"
: "${TSC:?}" "${TSC_BUILD:?}"
loop="$TSC_BUILD/capture_loop"
[ -x "$loop" ] || { echo "capture_loop not built: skip"; exit 77; }

"$loop" "$tmp/run.h5" --steps 0 --select "steps=all,layers=1" --sleep-ms 20 >/dev/null 2>&1 &
pid=$!
# wait until at least 4 steps are complete (files renamed into place), then kill mid-run
for _ in $(seq 1 200); do
  n=$(ls "$tmp/run.h5.capture" 2>/dev/null | grep -c '^step_[0-9]*\.h5$')
  [ "${n:-0}" -ge 4 ] && break
  sleep 0.05
done
kill -9 $pid; wait $pid 2>/dev/null
[ -d "$tmp/run.h5.capture" ] && ok || bad "no session folder after the kill"
[ ! -e "$tmp/run.h5" ] && ok || bad "a packed file exists although the run was killed"
complete=$(ls "$tmp/run.h5.capture" | grep -c '^step_[0-9]*\.h5$')
[ "$complete" -ge 4 ] && ok || bad "only $complete complete steps"

# info reads the folder in place of the missing file
"$TSC" info "$tmp/run.h5" --json > "$tmp/info1.json" && ok || bad "info on the session folder failed"
grep -q "\"kind\": \"session\"" "$tmp/info1.json" && ok || bad "info does not say it read a session: $(head -c 200 "$tmp/info1.json")"

"$TSC" pack "$tmp/run.h5.capture" > "$tmp/pack.out" && ok || bad "pack failed: $(cat "$tmp/pack.out")"
[ -f "$tmp/run.h5" ] && ok || bad "pack wrote no file"
[ ! -e "$tmp/run.h5.capture" ] && ok || bad "pack left the folder without --keep"
"$TSC" info "$tmp/run.h5" --json > "$tmp/info2.json" && ok || bad "info on the packed file failed"
n2=$(grep -o '"n_steps": [0-9]*' "$tmp/info2.json" | grep -o '[0-9]*$')
[ "${n2:-0}" -eq "$complete" ] && ok || bad "packed file has ${n2:-?} complete steps, the folder had $complete"

# usage errors and failures
"$TSC" pack >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "pack without a folder: not exit 2"
"$TSC" pack "$tmp/nothere.capture" >/dev/null 2>&1; [ $? -eq 1 ] && ok || bad "pack of a missing folder: not exit 1"
mkdir "$tmp/x"; "$TSC" pack "$tmp/x" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "pack of a folder without .capture and no -o: not exit 2"
"$TSC" pack "$tmp/x" -o "$tmp/y.h5" > "$tmp/e" 2>&1; [ $? -eq 1 ] && ok || bad "pack of an empty folder: not exit 1"
grep -q "$tmp/x" "$tmp/e" && ok || bad "the error does not name the folder: $(cat "$tmp/e")"
finish
