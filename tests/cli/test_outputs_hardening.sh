#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# Outputs, sessions and the readers of analysis folders under attack: FIFOs and endless files as
# summary.json or a training log are refused promptly; the report's reproducing commands quote
# crafted names; a report written into another analysis folder leaves its summary.json alone;
# huge declared sizes do not overflow; a second capture of a live session folder and a pack of it are
# refused, pack removes only its own files; on a full disk (root: a 64 KiB tmpfs) every writer exits 1
# naming the file, without a crash and without a partial or temporary file.
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
PY=$(find_py h5py numpy) || PY=""
cd "$tmp" || exit 1
"$TSC" synth -o d.h5 --shape tiny --quiet || { echo "synth failed"; exit 1; }
"$TSC" analyze d.h5 -o an --layers 1 -q > /dev/null 2>&1 || { echo "analyze failed"; exit 1; }

# --- readers: FIFOs, devices and endless files ---------------------------------------------------
mkdir fifo_an && cp an/analysis.h5 fifo_an/ && mkfifo fifo_an/summary.json
expect 1 "fifo_an/summary.json: not a regular file (a FIFO, device or socket); refused" \
  "$TSC" figure fig3 --from fifo_an -o f.png
mkfifo log.fifo
expect 1 "log.fifo: not a regular file (a FIFO, device or socket); refused" \
  "$TSC" figure fig1 --from an --log x=log.fifo -o f.png
expect 1 "/dev/zero: not a regular file (a FIFO, device or socket); refused" \
  "$TSC" figure fig1 --from an --log x=/dev/zero -o f.png
# a regular file above the text-input limit (TSC_MAX_MEMORY lowers it; 300K leaves room for the parsed tree of
# the analysis' summary.json, about 250 KB, which counts against the same budget)
head -c 400000 /dev/zero | tr '\0' ' ' > big.csv
TSC_MAX_MEMORY=300K expect 1 "big.csv: 400000 bytes, above the limit of 307200 bytes for a text input" \
  "$TSC" figure fig1 --from an --log x=big.csv -o f.png
[ ! -e f.png ] && ok || bad "a refused figure left f.png"

# --- the report: quoted reproducing commands; its summary copy never lands in another folder ----
if command -v gnuplot >/dev/null && command -v pdftotext >/dev/null; then
  name="x y'\$(touch pwned);.h5"
  cp d.h5 "$name"
  "$TSC" analyze "$name" -o 'an 2' --layers 1 -q > /dev/null 2>&1 || bad "analyze of a crafted name failed"
  mkdir B && cp an/summary.json B/summary.json && cp an/analysis.h5 B/analysis.h5
  "$TSC" report 'an 2' --dpi 50 -o B/r.pdf -q > rep.out 2> rep.err || bad "report failed: $(cat rep.err)"
  cmp -s B/summary.json an/summary.json && ok || bad "report 'an 2' -o B/r.pdf replaced B/summary.json"
  cmp -s B/r.summary.json 'an 2/summary.json' && ok || bad "no copy B/r.summary.json of the summary it read"
  grep -qx "B/r.summary.json" rep.out && ok || bad "report does not print its summary copy: $(cat rep.out)"
  # a report inside the analysis folder writes no copy
  "$TSC" report 'an 2' --dpi 50 -o 'an 2/r.pdf' -q > /dev/null 2>&1 && [ ! -e 'an 2/r.summary.json' ] && ok ||
    bad "a report in its own analysis folder wrote a summary copy"
  pdftotext -raw B/r.pdf rep.txt
  line=$(grep -m1 '^tilescope analyze' rep.txt)
  want="tilescope analyze 'x y'\\''\$(touch pwned);.h5' -o 'an 2' --lp"
  case "$line" in "$want"*) ok ;; *) bad "analyze command not quoted: $line (want $want...)" ;; esac
  # pasted into a shell, every line passes the crafted names as single words and runs nothing else
  tilescope() { printf '%s\n' "$@" > args.txt; }
  eval "$line"
  [ "$(sed -n 2p args.txt)" = "$name" ] && [ "$(sed -n 4p args.txt)" = "an 2" ] && ok ||
    bad "pasted command splits the names: $(cat args.txt)"
  line=$(grep -m1 '^tilescope report .* -o ' rep.txt)
  eval "$line"
  [ "$(sed -n 2p args.txt)" = "an 2" ] && ok || bad "pasted report command: $(cat args.txt)"
  [ ! -e pwned ] && ok || bad "pasting the reproducing commands ran a command from a file name"
  unset -f tilescope
else
  echo "gnuplot or pdftotext missing: report checks skipped"
fi
# --- a declared n_layer of INT_MAX: size_t arithmetic, bounded by the memory budget --------------
if [ -n "$PY" ]; then
  cp d.h5 nl.h5
  "$PY" -c "import h5py, numpy as np; f = h5py.File('nl.h5', 'r+'); f.attrs['n_layer'] = np.int64(2147483647); f.close()"
  TSC_MAX_MEMORY=1G expect 1 "the replay's layer list needs 8589934592 bytes" "$TSC" replay nl.h5 --policy fp32 -o nlr.h5
  [ ! -e nlr.h5 ] && ok || bad "a refused replay left nlr.h5"
  timeout 20 "$TSC" info nl.h5 > out 2> err && ! grep -qE "Sanitizer|runtime error" err && ok || bad "info nl.h5: $(head -3 err)"
fi
# --- capture sessions: one writer per folder; pack refuses a live one and removes only its files --
loop="${TSC_BUILD:-}/capture_loop"
if [ -x "$loop" ]; then
  "$loop" s.h5 --steps 0 --select "steps=all,layers=1" --sleep-ms 20 > loop1.out 2>&1 &
  lpid=$!
  for _ in $(seq 1 200); do [ -e s.h5.capture/step_00000001.h5 ] && break; sleep 0.05; done
  expect 1 "session folder s.h5.capture is in use (locked by pid $lpid)" "$loop" s.h5 --steps 2
  expect 1 "packing s.h5.capture: session folder s.h5.capture is in use (locked by pid $lpid)" \
    "$TSC" pack s.h5.capture
  [ -f s.h5.capture/session.h5 ] && ok || bad "pack of a live session removed its session.h5"
  kill -9 $lpid; wait $lpid 2>/dev/null
  echo mine > s.h5.capture/step_notes.txt
  echo mine > s.h5.capture/step_00000999.h5.bak
  expect 1 "packed s.h5.capture into s.h5 but kept the folder" "$TSC" pack s.h5.capture
  [ -f s.h5 ] && ok || bad "pack wrote no s.h5"
  left=$(ls s.h5.capture | sort | tr '\n' ' ')
  [ "$left" = "step_00000999.h5.bak step_notes.txt " ] && ok || bad "pack left or removed the wrong files: $left"
else
  echo "capture_loop not built: session checks skipped"
fi
# --- a full disk: exit 1 naming the file, no crash at exit, nothing under the final name ----------
full="$tmp/full"
mkdir "$full"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=64k tmpfs "$full" 2>/dev/null; then
  trap 'umount "$full" 2>/dev/null; rm -rf "$tmp"' EXIT
  fill() { rm -rf "${full:?}"/*; head -c 56k /dev/zero > "$full/filler" 2>/dev/null; }
  # an import's input: 16 KiB of q, more than the filled disk has left (and, packed, less than the empty one)
  if [ -n "$PY" ]; then "$PY" -c "import numpy as np; np.savez('imp.npz', q=np.random.default_rng(0).standard_normal((1, 2, 32, 64)).astype(np.float32))"; fi
  for job in "synth -o $full/x.h5 --shape tiny -q:x.h5" "replay d.h5 --policy fp32 -o $full/x.h5:x.h5" \
             ${PY:+"import imp.npz -o $full/x.h5:x.h5"} \
             "analyze d.h5 -o $full/an --layers 1 -q:an/analysis.h5" \
             "diagnose d.h5 -o $full/an --layers 1 -q:an/analysis.h5" \
             "figure fig3 --from an -o $full/f.png:f.png" "figure fig3 --from an -o $full/f.pdf:f.pdf"; do
    fill
    # shellcheck disable=SC2086
    timeout 60 "$TSC" ${job%%:*} > out 2> err; rc=$?
    [ $rc -eq 1 ] && grep -q "$full/" err && ok || bad "full disk: '${job%%:*}' exit $rc: $(tail -2 err)"
    [ ! -e "$full/${job##*:}" ] && ok || bad "full disk: '${job%%:*}' left ${job##*:}"
    ls "$full" | grep -q '\.tmp\.' && bad "full disk: '${job%%:*}' left a temporary" || ok
  done
  # a failed import leaves nothing that blocks the next one into the same name
  if [ -n "$PY" ]; then
    rm -rf "${full:?}"/*
    "$PY" -c "import numpy as np; np.savez('imp_small.npz', q=np.ones((1, 1, 8, 8), np.float32))"
    "$TSC" import imp_small.npz -o "$full/x.h5" > out 2> err && ok || bad "import after a full-disk failure: $(tail -2 err)"
  fi
  umount "$full"
else
  echo "not root or no tmpfs: full-disk checks skipped"
fi
# --- a killed import leaves nothing that blocks the next -------------------------------------------
if [ -n "$PY" ]; then
  "$PY" -c "import numpy as np; np.savez_compressed('big.npz', q=np.zeros((1, 8, 2048, 512), np.float32))"
  for delay in 0.05 0.2; do
    "$TSC" import big.npz -o killed.h5 > /dev/null 2>&1 & pid=$!
    sleep "$delay"; kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    "$TSC" import big.npz -o killed.h5 > out 2> err && ok || bad "import after a killed one (${delay} s): $(tail -2 err)"
    rm -f killed.h5
  done
fi
finish
