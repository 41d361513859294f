#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# Analysis folders pair their two files and have one writer: summary.json and analysis.h5 of one
# `analyze` run carry the same random run_id, and a figure refuses a folder whose files come from
# different runs (swapped summary.json; a new analysis.h5 beside an old summary.json); a folder
# written before run ids still renders; a second writer into a folder whose .tilescope.lock is held
# fails at once naming the holder's pid; a folder whose analysis.h5 is there but damaged is refused
# by every reader of folders (figure, report, view, compare), never drawn from summary.json alone,
# and so is a summary.json whose members have the wrong type.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
command -v flock >/dev/null || { echo "util-linux flock is not installed: skip"; exit 77; }
PY=$(find_py h5py json) || PY=""  # the old-folder checks are skipped without
cd "$tmp" || exit 1

"$T" synth -o d.h5 --shape tiny --quiet || { echo "synth failed"; exit 1; }
"$T" analyze d.h5 -o A --layers 1 -q > /dev/null 2>&1 || { echo "analyze A failed"; exit 1; }
"$T" analyze d.h5 -o B --layers 1 -q > /dev/null 2>&1 || { echo "analyze B failed"; exit 1; }
[ ! -e A/.tilescope.lock ] && ok || bad "analyze left its lock file A/.tilescope.lock behind"

# the id: 32 hex digits, the same in both files of a run, different between runs
ida=$(sed -n 's/.*"run_id": *"\([0-9a-f]*\)".*/\1/p' A/summary.json | head -1)
idb=$(sed -n 's/.*"run_id": *"\([0-9a-f]*\)".*/\1/p' B/summary.json | head -1)
[ ${#ida} -eq 32 ] && [ ${#idb} -eq 32 ] && ok || bad "run ids '$ida' '$idb' are not 32 hex digits"
[ "$ida" != "$idb" ] && ok || bad "two runs drew the same run id $ida"
"$T" figure fig3 --from A -o a.png > /dev/null 2> err && [ -s a.png ] && ok || bad "fig3 of A: $(cat err)"

# (a) summary.json swapped between A and B: refused, naming both ids, before drawing anything
mv A/summary.json sa.json && mv B/summary.json A/summary.json && mv sa.json B/summary.json
want="A/analysis.h5 and A/summary.json come from different runs (run ids $ida and $idb): run analyze again"
"$T" figure fig3 --from A -o x.png > /dev/null 2> err; rc=$?
[ $rc -eq 1 ] && grep -qF -- "$want" err && ok || bad "swapped pair: exit $rc, stderr: $(cat err)"
[ ! -e x.png ] && ok || bad "a refused figure left x.png"
"$T" report B --dpi 50 -o r.pdf -q > /dev/null 2> err && bad "report of a mismatched B succeeded" ||
  { grep -qF "B/analysis.h5 and B/summary.json come from different runs (run ids $idb and $ida)" err && ok ||
    bad "report of a mismatched B: $(cat err)"; }

# (b) a held lock: analyze into that folder fails promptly, naming the holder's pid
mkdir L && flock L/.tilescope.lock sleep 5 &
holder=$!
for _ in $(seq 50); do [ -e L/.tilescope.lock ] && break; sleep 0.1; done
sleep 0.3
echo "$holder" > L/.tilescope.lock  # what a tilescope writer holding it would have written
start=$(date +%s)
timeout 4 "$T" analyze d.h5 -o L --layers 1 -q > /dev/null 2> err; rc=$?
[ $rc -eq 1 ] && grep -qF "L is being written by another tilescope analysis (pid $holder)" err && ok ||
  bad "analyze into a locked folder: exit $rc, stderr: $(cat err)"
[ $(( $(date +%s) - start )) -le 2 ] && ok || bad "analyze waited for the lock"
[ ! -e L/analysis.h5 ] && [ ! -e L/summary.json ] && ok || bad "the refused writer wrote into L"
timeout 4 "$T" diagnose d.h5 -o L --layers 1 -q > /dev/null 2> err; rc=$?
[ $rc -eq 1 ] && grep -qF "L is being written by another tilescope analysis" err && ok ||
  bad "diagnose into a locked folder: exit $rc, stderr: $(cat err)"
wait "$holder"
"$T" analyze d.h5 -o L --layers 1 -q > /dev/null 2> err && [ -f L/summary.json ] && ok ||
  bad "analyze after the lock was released: $(cat err)"

# (c) a folder from before run ids (neither file has one) renders; one id without the other is refused
if [ -n "$PY" ]; then
  "$T" analyze d.h5 -o O --layers 1 -q > /dev/null 2>&1 || bad "analyze O failed"
  cp O/summary.json new_summary.json
  "$PY" - <<'PYEOF' || bad "stripping run_id failed"
import json, h5py
with open("O/summary.json") as f: s = json.load(f)
del s["run_id"]
with open("O/summary.json", "w") as f: json.dump(s, f)
with h5py.File("O/analysis.h5", "r+") as f: del f.attrs["run_id"]
PYEOF
  grep -q run_id O/summary.json && bad "O/summary.json still has run_id" || ok
  "$T" figure fig3 --from O -o o.png > /dev/null 2> err && [ -s o.png ] && ok || bad "old folder O: $(cat err)"
  idn=$(sed -n 's/.*"run_id": *"\([0-9a-f]*\)".*/\1/p' new_summary.json | head -1)
  cp new_summary.json O/summary.json
  "$T" figure fig3 --from O -o p.png > /dev/null 2> err; rc=$?
  [ $rc -eq 1 ] && grep -qF "O/analysis.h5 and O/summary.json come from different runs (run ids (none) and $idn)" err &&
    ok || bad "an id-less analysis.h5 beside a new summary.json: exit $rc, stderr: $(cat err)"
fi
# (d) analysis.h5 present but damaged (not HDF5; cut short): every reader of folders refuses it,
# naming the file, and writes nothing
for kind in text cut; do
  rm -rf D && cp -r B D
  if [ $kind = text ]; then echo "not an analysis" > D/analysis.h5
  else head -c 2000 B/analysis.h5 > D/analysis.h5; fi
  for cmd in "figure fig3 --from D -o d.png" "figure fig1 --from D -o d.png" "report D -o d.pdf" \
             "view D -o d.html" "compare D B -o dc"; do
    # shellcheck disable=SC2086
    "$T" $cmd > /dev/null 2> err; rc=$?
    [ $rc -eq 1 ] && grep -qF "the analysis folder D is damaged (run analyze again): D/analysis.h5: " err && ok ||
      bad "$kind analysis.h5, $cmd: exit $rc, stderr: $(cat err)"
  done
  [ ! -e d.png ] && [ ! -e d.pdf ] && [ ! -e d.html ] && [ ! -e dc ] && ok || bad "a refused reader wrote output ($kind)"
done
# (e) summary.json of the right format but with a member of the wrong type or missing: refused,
# naming the file and the member, never read as "no heads" or "no steps"
if [ -n "$PY" ]; then
  for case in "heads=5:'heads' is a number, expected an array of head records" \
              "noheads:'heads' is missing, expected an array of head records" \
              "head0:'heads[0]' is not a head record" \
              "computed_over=x:'computed_over' is a string, expected an object" \
              "step_list={}:'computed_over.step_list' is an object, expected an array" \
              "diagnosis=[]:'diagnosis' is an array, expected an object"; do
    what=${case%%:*} want=${case#*:}
    rm -rf E && mkdir E && cp B/analysis.h5 E/ && cp A/summary.json E/  # B's pair after the swap in (a)
    "$PY" - "$what" <<'PYEOF' || bad "editing summary.json for $what failed"
import json, sys
with open("E/summary.json") as f: s = json.load(f)
w = sys.argv[1]
if w == "heads=5": s["heads"] = 5
elif w == "noheads": del s["heads"]
elif w == "head0": s["heads"][0]["layer"] = "x"
elif w == "computed_over=x": s["computed_over"] = "x"
elif w == "step_list={}": s["computed_over"]["step_list"] = {}
elif w == "diagnosis=[]": s["diagnosis"] = []
with open("E/summary.json", "w") as f: json.dump(s, f)
PYEOF
    for cmd in "figure fig3 --from E -o e.png" "report E -o e.pdf" "compare E B -o ec"; do
      # shellcheck disable=SC2086
      "$T" $cmd > /dev/null 2> err; rc=$?
      [ $rc -eq 1 ] && grep -qF "E/summary.json: $want" err && grep -qF "the file is damaged" err && ok ||
        bad "summary.json $what, $cmd: exit $rc, stderr: $(cat err)"
    done
    [ ! -e e.png ] && [ ! -e e.pdf ] && [ ! -e ec ] && ok || bad "a refused reader wrote output ($what)"
  done
fi
finish
