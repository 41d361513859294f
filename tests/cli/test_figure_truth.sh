#!/usr/bin/env bash
# Figures checked against what synth planted (the right answer is known): fig5c's tallest bar is a
# planted feature; fig6c zooms onto the planted tie key (P-bar = 1) where O-bar_error jumps down;
# the evidence map's link 3 follows the mean cosine it prints (>= 0.5 supported, else amber), and
# its loss link is supported only by a diverging log that covers the analysed steps and that the
# user says is the dump's run (--log-same-run), amber with the reason otherwise; the report cites
# no file that does not ship, and shows no folder path in its captions.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
PY=$(find_py h5py json) || { echo "no python with h5py: skip"; exit 77; }
cd "$tmp" || exit 1
"$T" synth -o d.h5 --shape tiny --quiet || { echo "synth failed"; exit 1; }
"$T" analyze d.h5 -o an -q > /dev/null 2>&1 || { echo "analyze failed"; exit 1; }
read -r L HEADS F TIE STEPS <<< "$("$PY" - <<'PYEOF'
import h5py, json
f = h5py.File("d.h5", "r")
s = json.load(open("an/summary.json"))
print(int(f.attrs["planted_layers"][0]), ",".join(str(int(h)) for h in f.attrs["planted_heads"]),
      ",".join(str(int(x)) for x in f.attrs["planted_features"]),
      max(int(k) for k in f.attrs["planted_tie_keys"]),
      ",".join(str(x) for x in s["computed_over"]["step_list"]))
PYEOF
)"
[ -n "$STEPS" ] && ok || bad "reading the planted structure failed"
mark() { sed -n 's/.*"marks": *\[\([^]]*\)\].*/\1/p' "$1"; }

# fig5c: in value units (the default) the tallest bar is a planted feature in every planted head and
# analysed step, but for at most one (64 rows of one step are a small sample)
H=${HEADS%%,*}
n=0 hit=0
for h in ${HEADS//,/ }; do
  for s in ${STEPS//,/ }; do
    "$T" figure fig5c --from an --layer "$L" --head "$h" --step "$s" -o c.png --json > c.json 2> err || bad "fig5c: $(cat err)"
    m=$(mark c.json)
    n=$((n + 1))
    [[ ",$F," == *",$m,"* ]] && hit=$((hit + 1)) || echo "fig5c head $h step $s: tallest bar at feature $m, planted $F"
  done
done
[ "$n" -ge 2 ] && [ "$hit" -ge $((n - 1)) ] && ok || bad "fig5c: the tallest bar is a planted feature in $hit of $n"
grep -q "value units" c.json && ok || bad "fig5c is not in value units by default: $(cat c.json)"
"$T" figure fig5c --from an --layer "$L" --head "$H" --ulp -o u.png --json > u.json 2> err &&
  grep -q "in ULPs" u.json && ok || bad "fig5c --ulp: $(cat err u.json)"

# fig6c: the zoom window holds the planted tie key, and the jump it shows is that key, downwards
"$T" figure fig6c --from an --layer "$L" --head "$H" -o z.png --json > z.json 2> err || bad "fig6c: $(cat err)"
IFS=, read -r lo hi jump <<< "$(mark z.json)"
[ -n "$jump" ] && [ "$lo" -le "$TIE" ] && [ "$TIE" -le "$hi" ] && [ "$jump" -eq "$TIE" ] && ok ||
  bad "fig6c shows keys $lo..$hi, jump at '$jump'; the planted tie key is $TIE"
grep -Eq "jump at a key where P-bar = 1: t = $TIE, -[0-9]" z.json && ok || bad "fig6c caption: $(cat z.json)"

# evidence map, link 3: its state follows the mean cosine it prints
setcos() { "$PY" - "$1" <<'PYEOF'
import json, sys
s = json.load(open("an/summary.json"))
for r in s["heads"]:
    r["rank1"]["mean_cos"] = float(sys.argv[1])
json.dump(s, open("an/summary.json", "w"))
PYEOF
}
cp an/summary.json orig.json
setcos 0.93
"$T" figure fig1 --from an -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
! grep -q "3. Similar rank-1 terms (not supported)" e.cap && ok || bad "cosine 0.93 not supported: $(cat e.cap)"
setcos 0.12
"$T" figure fig1 --from an -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
grep -q "3. Similar rank-1 terms (not supported): .*mean cosine 0.120 (not similar: < 0.50)" e.cap && ok ||
  bad "cosine 0.12 supported: $(cat e.cap)"
cp orig.json an/summary.json

# evidence map, link 1 without a rounding event (census emptied): an analysis points to diagnose; a
# diagnosis that examined no head says so, and how to make it examine one
nocensus() { "$PY" - "$1" <<'PYEOF'
import json, sys
s = json.load(open("an/summary.json"))
for r in s["heads"]:
    r["census"].update(events_neg=0, events_pos=0)
if sys.argv[1] == "diagnosed":
    s["diagnosis"] = {"n_at_risk": 0, "at_risk": []}
json.dump(s, open("an/summary.json", "w"))
PYEOF
}
nocensus analysed
"$T" figure fig1 --from an -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
grep -q "1. Rounding in P-bar V: no evidence: no rounding event traced (run tilescope diagnose)" e.cap &&
    ok || bad "analysis, link 1: $(cat e.cap)"
cp orig.json an/summary.json
nocensus diagnosed
"$T" figure fig1 --from an -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
grep -q "1. Rounding in P-bar V: no evidence: diagnose traced no rounding event (it examines flagged heads; --alpha 1 --min-ulp 0 examines the most biased)" e.cap &&
    ok || bad "diagnosis without an examined head, link 1: $(cat e.cap)"
cp orig.json an/summary.json

# evidence map, link 6: the log must cover the analysed steps and be the dump's run
last=${STEPS##*,}
{ echo "step,val_loss"; for i in $(seq 0 $((last + 4))); do echo "$i,$((3 + i * i))"; done; } > cover.csv
{ echo "step,val_loss"; for i in $(seq $((last + 10)) $((last + 20))); do echo "$i,$((3 + i * i))"; done; } > late.csv
"$T" figure fig1 --from an --log r=cover.csv -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
grep -q "6. Loss (not supported): .*diverges.*not known to be the dump's run" e.cap && ok || bad "no --log-same-run: $(cat e.cap)"
"$T" figure fig1 --from an --log r=cover.csv --log-same-run -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
! grep -q "6. Loss (not supported)" e.cap && ok || bad "covering log of the same run not supported: $(cat e.cap)"
"$T" figure fig1 --from an --log r=late.csv --log-same-run -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
grep -q "6. Loss (not supported): .*do not cover the analysed steps" e.cap && ok || bad "late log: $(cat e.cap)"
# known without the flag: the log.csv of the train run folder (run.cfg beside it) the dump was captured into
mkdir -p run1 && cp cover.csv run1/log.csv && : > run1/run.cfg
"$PY" -c "
import json; s = json.load(open('an/summary.json')); s['dump'] = 'run1/capture.h5'; json.dump(s, open('an/summary.json', 'w'))"
"$T" figure fig1 --from an --log r=run1/log.csv -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
! grep -q "6. Loss (not supported)" e.cap && ok || bad "the run folder's own log.csv is not known to be the dump's run: $(cat e.cap)"
rm run1/run.cfg  # a log.csv beside the dump but no train run folder: the flag is needed again
"$T" figure fig1 --from an --log r=run1/log.csv -o e.png 2> err | tr '\n' ' ' > e.cap || bad "fig1: $(cat err)"
grep -q "not known to be the dump's run" e.cap && ok || bad "a folder without run.cfg taken for the dump's run: $(cat e.cap)"
cp orig.json an/summary.json

# the report: no citation of a file that does not ship, no folder path in a caption
"$T" report an -o r.pdf --dpi 50 -q > /dev/null 2> err || bad "report: $(cat err)"
if command -v pdftotext > /dev/null; then
  pdftotext r.pdf r.txt
  ! grep -Eq "PAPER\.md|DESIGN\.md|STYLE\.md" r.txt && ok || bad "report.pdf cites a file that does not ship"
  ! grep -q "^fig.*$tmp" r.txt && ok || bad "a report caption shows a folder path"
  # copy-paste commands break only between options: each line is a command or an option continued
  pdftotext -layout r.pdf rl.txt
  sed -n '/Commands that reproduce/,/^ *$/p' rl.txt | sed 1d | grep -v '^ *$' > cmds.txt
  [ -s cmds.txt ] && ! grep -Ev '^ *tilescope |^ +-' cmds.txt > /dev/null && ok ||
    bad "a command wraps inside an option: $(grep -Ev '^ *tilescope |^ +-' cmds.txt)"
else
  bad "pdftotext is not installed (apt-get install poppler-utils)"
fi
for h in r.html an/report.html; do
  [ -f "$h" ] && { ! grep -Eq "PAPER\.md|DESIGN\.md|STYLE\.md" "$h" && ok || bad "$h cites a file that does not ship"; }
done
finish
