#!/usr/bin/env bash
# `tilescope figure`: every recipe draws a non-empty file of the requested size from a synth analysis;
# SVG parses as XML, PDF passes pdfinfo; the evidence map carries summary.json's numbers; a figure
# whose data is absent fails (exit 1) naming what is missing; bad usage exits 2.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
command -v pdfinfo >/dev/null && command -v pdftotext >/dev/null || { echo "poppler-utils missing: skip"; exit 77; }
PY=$(find_py json) || PY=""  # the checks that need it are skipped without
cd "$tmp" || exit 1

# PNG width and height from the IHDR chunk (bytes 16..23, big-endian).
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{printf "%d %d", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}'; }

"$T" synth -o d.h5 --shape tiny --quiet || { echo "synth failed"; exit 1; }
"$T" diagnose d.h5 -o an --layers 1 -q > diag.txt 2>&1 || { cat diag.txt; echo "diagnose failed"; exit 1; }
printf 'step,train_loss,val_loss\n0,10.9,10.95\n100,6.1,6.2\n200,4.5,4.6\n' > a.csv
printf 'step 0: train loss 10.90, val loss 10.96\nstep 100: train loss 6.00, val loss 6.10\nstep 200: train loss 4.40, val loss 4.50\n' > b.log

# 1. every recipe, at an explicit size: 3.5 x 2.5 in at 100 dpi is 350 x 250 pixels
for f in fig1 fig2 fig3 fig4 fig5a fig5b fig5c fig6a fig6b fig6c fig7 fig8 fig9 fig10 fig11 fig12 fig13; do
    if "$T" figure "$f" --from an --log bf16=a.csv --log stable=b.log --width 3.5 --height 2.5 --dpi 100 \
        -o "$f.png" > "$f.cap" 2> "$f.err"; then
        size=$(png_size "$f.png")
        [ "$size" = "350 250" ] && ok || bad "$f.png is $size pixels, expected 350 250"
        [ "$(stat -c %s "$f.png")" -gt 2000 ] && ok || bad "$f.png is nearly empty"
        grep -Eq "(analysis.h5|summary.json)|d\.h5|a\.csv" "$f.cap" && ok || bad "$f caption does not name its source file: $(cat "$f.cap")"
        # by its name, not by the folders it sits in (captions sit beside the files; no machine's paths)
        ! grep -q "$tmp\|an/" "$f.cap" && ok || bad "$f caption shows a folder path: $(cat "$f.cap")"
    else
        bad "$f failed: $(cat "$f.err")"
    fi
done
# the loss figures: a linear axis unless --log-y, --ylim LO:HI checked (fig7 is log-log by design)
grep -q "linear loss axis" fig2.cap && grep -q "linear loss axis" fig10.cap && ok || bad "fig2/fig10 not linear by default: $(cat fig2.cap)"
"$T" figure fig2 --log bf16=a.csv --log-y --ylim 4:12 -o ly.png > ly.cap 2>&1 && grep -q "logarithmic loss axis" ly.cap && ok ||
    bad "fig2 --log-y --ylim: $(cat ly.cap)"
expect 2 "--ylim expects LO:HI with LO < HI" "$T" figure fig2 --log bf16=a.csv --ylim 6:2 -o bad.png
expect 2 "a logarithmic axis needs LO > 0" "$T" figure fig2 --log bf16=a.csv --log-y --ylim 0:2 -o bad.png
# a W&B export of two runs draws both, each named by its run; a chosen column draws that one
printf '"Step","runA - val/loss","runA - val/loss__MIN","runA - val/loss__MAX","runB - val/loss"\n0,5,5,5,5.1\n100,4,4,4,4.2\n200,3,3,3,3.5\n' > wb.csv
"$T" figure fig2 --log wb=wb.csv -o wb.png > wb.cap 2>&1 &&
    grep -q "'runA' = column runA - val/loss of wb.csv (3 points); 'runB' = column runB - val/loss of wb.csv (3 points);" wb.cap &&
    ok || bad "a two-run W&B export: $(cat wb.cap)"
"$T" figure fig2 --log 'wb=wb.csv:runB - val/loss' -o wb.png > wb.cap 2>&1 && grep -q "'wb' = column runB - val/loss" wb.cap &&
    ! grep -q runA wb.cap && ok || bad "a chosen W&B column: $(cat wb.cap)"
# fig3's largest W^Q norm is a planted head (1 or 3 in the tiny shape, docs/FORMAT.md 1.6)
grep -Eq "Largest: head (1|3) " fig3.cap && ok || bad "fig3 caption: $(cat fig3.cap)"

# 2. SVG parses as XML; PDF passes pdfinfo with the requested page size (3.5 x 2.5 in = 252 x 180 pt)
for f in fig1 fig3 fig12; do
    "$T" figure $f --from an --width 3.5 --height 2.5 -o $f.svg > /dev/null 2>&1 || bad "$f.svg failed"
    if [ -x "$PY" ]; then
        $PY -c "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith('svg')" \
            $f.svg && ok || bad "$f.svg does not parse as SVG"
    fi
    "$T" figure $f --from an --width 3.5 --height 2.5 -o $f.pdf > /dev/null 2>&1 || bad "$f.pdf failed"
    pdfinfo $f.pdf > $f.info 2>&1 && ok || bad "pdfinfo rejects $f.pdf"
    grep -Eq "Page size: +252 x 180 pts" $f.info && ok || bad "$f.pdf page size: $(grep 'Page size' $f.info)"
done

# 3. the evidence map states this run's numbers (formatted here from summary.json)
"$T" figure fig1 --from an -o ev.pdf > /dev/null 2>&1 || bad "fig1 pdf"
pdftotext ev.pdf ev.txt
if [ -x "$PY" ]; then
    $PY - an/summary.json > want.txt <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
top = s["diagnosis"]["at_risk"][0]
rec = [h for h in s["heads"] if h["step"] == top["step"] and h["layer"] == top["layer"] and h["head"] == top["head"]][0]
print("mean cosine %.3f" % rec["rank1"]["mean_cos"])
print("error %.3g" % top["event"]["error"])
print("accumulated: %+.3g" % top["delta_cumsum"])
# the similarity link is marked unsupported exactly when no common direction was found
similar = top["verdict"] == "accumulates" or rec["rank1"]["top_energy"] >= 0.5 or rec["rank1"]["mean_cos"] >= 0.5
print("supported by this run's data" if similar else "not similar: no common direction")
PYEOF
    while read -r line; do
        tr '\n' ' ' < ev.txt | grep -qF -- "$line" && ok || bad "evidence map lacks '$line'"
    done < want.txt
fi
grep -q "no evidence: no training log" ev.txt && ok || bad "evidence map without logs should say so"

# 4. absent data: exit 1 and a message naming what is missing
"$T" figure fig2 --from an -o x.png 2> e2.txt; rc=$?
[ $rc -eq 1 ] && grep -q "training log" e2.txt && ok || bad "fig2 without --log: rc $rc, $(cat e2.txt)"
"$T" figure fig7 --from an --log a.csv -o x.png 2> e7.txt; rc=$?
[ $rc -eq 1 ] && grep -q "at least two" e7.txt && ok || bad "fig7 with one log: rc $rc, $(cat e7.txt)"
[ ! -e x.png ] && ok || bad "a failed figure left x.png behind"
if [ -x "$PY" ] && $PY -c "import h5py" 2>/dev/null; then
    cp d.h5 nox.h5
    $PY -c "
import h5py, sys
f = h5py.File('nox.h5', 'r+')
for s in list(f):
    for l in list(f[s]):
        if 'x' in f[s][l]: del f[s][l]['x']
f.close()"
    "$T" figure fig4 --from an --dump nox.h5 -o x.png 2> e4.txt; rc=$?
    [ $rc -eq 1 ] && grep -q "x" e4.txt && grep -q "not captured" e4.txt && ok || bad "fig4 without x: rc $rc, $(cat e4.txt)"
    "$T" analyze nox.h5 -o anx --layers 1 -q > /dev/null 2>&1 || bad "analyze nox.h5"
    "$T" figure fig8 --from anx -o x.png 2> e8.txt; rc=$?
    [ $rc -eq 1 ] && grep -q "x" e8.txt && ok || bad "fig8 without x: rc $rc, $(cat e8.txt)"
    "$T" figure fig1 --from anx -o evx.pdf > /dev/null 2>&1 || bad "fig1 without x"
    pdftotext evx.pdf - | tr '\n' ' ' | grep -q "no evidence: x not captured" && ok || bad "evidence map without x"
fi
"$T" figure fig5b --from an --dump missing.h5 -o x.png 2> e5.txt; rc=$?
[ $rc -eq 1 ] && grep -q "missing.h5" e5.txt && ok || bad "fig5b with a missing dump: rc $rc, $(cat e5.txt)"

# 5. a hostile run name reaches gnuplot as text and runs nothing
"$T" figure fig2 --from an --log "x'; system('touch pwned'); print '\`touch pwned2\`=a.csv" -o hostile.png > /dev/null 2> eh.txt \
    && ok || bad "hostile log name: $(cat eh.txt)"
[ ! -e pwned ] && [ ! -e pwned2 ] && ok || bad "a log name ran a command"
# --json gives the caption and the resolved selection
"$T" figure fig3 --from an -o j.png --json > j.json 2>&1 || bad "--json"
[ -x "$PY" ] && $PY -c "
import json; d = json.load(open('j.json'))
assert d['id'] == 'fig3' and d['file'] == 'j.png' and d['layer'] == 1 and 'wq_head_norm' in d['caption'], d" \
    && ok || bad "--json output: $(cat j.json)"

# 6. corrupt inputs: a clear message naming the file, exit 1, no crash
mkdir bad
head -c 700 an/summary.json > bad/summary.json
"$T" figure fig1 --from bad -o x.png 2> eb1.txt; rc=$?
[ $rc -eq 1 ] && grep -q "bad/summary.json:[0-9]" eb1.txt && ok || bad "truncated summary.json: rc $rc $(cat eb1.txt)"
cp an/summary.json bad/summary.json
echo "not hdf5" > bad/analysis.h5
"$T" figure fig3 --from bad -o x.png 2> eb2.txt; rc=$?
[ $rc -eq 1 ] && grep -q "bad/analysis.h5" eb2.txt && ok || bad "garbage analysis.h5: rc $rc $(cat eb2.txt)"
# even the evidence map, which could draw from summary.json alone, refuses a damaged analysis.h5
# (drawing would hide the damage); without an analysis.h5 at all it draws (no W^Q evidence)
"$T" figure fig1 --from bad -o evbad.png > /dev/null 2> eb3.txt; rc=$?
[ $rc -eq 1 ] && grep -q "bad/analysis.h5" eb3.txt && [ ! -e evbad.png ] && ok || bad "fig1 of a damaged analysis.h5: rc $rc $(cat eb3.txt)"
rm bad/analysis.h5
"$T" figure fig1 --from bad -o evbad.png > /dev/null 2> eb3.txt && [ -s evbad.png ] && ok || bad "fig1 should still draw (no W^Q evidence): $(cat eb3.txt)"

# 7. usage errors
"$T" figure fig99 --from an -o x.png 2> /dev/null; [ $? -eq 2 ] && ok || bad "unknown figure should exit 2"
"$T" figure fig3 -o x.png 2> /dev/null; [ $? -eq 2 ] && ok || bad "missing --from should exit 2"
"$T" figure fig3 --from an -o x.gif 2> /dev/null; [ $? -eq 2 ] && ok || bad "bad extension should exit 2"
"$T" figure fig3 --from nowhere -o x.png 2> en.txt; [ $? -eq 1 ] && grep -q "summary.json" en.txt && ok || bad "no analysis: $(cat en.txt)"
"$T" figure --list | grep -q fig13 && ok || bad "--list"
"$T" figure --list | grep -q "^  attn-grid " && ok || bad "--list names attn-grid"

finish
