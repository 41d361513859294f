#!/usr/bin/env bash
# `tilescope demo`: the whole pipeline (synth -> diagnose -> figures -> report) on the tiny shape
# (the default GPT-2-small shape takes longer than a test should; README shows its result).
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
command -v pdfinfo >/dev/null || { echo "poppler-utils missing: skip"; exit 77; }
cd "$tmp" || exit 1

"$T" demo -o out --shape tiny --max-heads 1 > demo.txt 2> demo.err && ok || bad "demo failed: $(tail -5 demo.err)"
for f in out/dump.h5 out/analysis.h5 out/summary.json out/report.pdf out/report.html out/figures/fig1.png out/figures/fig3.png; do
    [ -s "$f" ] && ok || bad "$f missing or empty"
done
pdfinfo out/report.pdf > /dev/null 2>&1 && ok || bad "pdfinfo rejects the demo report"
for s in "[1/4] tilescope synth" "[2/4] tilescope diagnose" "[3/4] tilescope figure" "[4/4] tilescope report" \
         "out/report.pdf" "out/report.html"; do
    grep -qF "$s" demo.txt && ok || bad "demo output lacks '$s'"
done
# the planted layer is found
grep -q '"layer": 1' out/summary.json && ok || bad "summary.json has no layer 1"
"$T" demo --shape nope 2> /dev/null; [ $? -eq 2 ] && ok || bad "bad --shape should exit 2"
finish
