#!/usr/bin/env bash
# `tilescope report`: PDF passes pdfinfo; its text has the headings, the verdict and numbers of
# summary.json (formatted here independently), the rounding event's bits (derived here from the
# FP32 value); text is >= 7 pt; the HTML references no external resource; two runs give the same
# bytes; SOURCE_DATE_EPOCH sets the PDF date; errors name the file.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
command -v pdfinfo >/dev/null && command -v pdftotext >/dev/null || { echo "poppler-utils missing: skip"; exit 77; }
PY=$(find_py json) || { echo "skip: no python3"; exit 77; }
cd "$tmp" || exit 1

"$T" synth -o d.h5 --shape tiny --quiet || { echo "synth failed"; exit 1; }
"$T" diagnose d.h5 -o an --layers 1 -q > diag.txt 2>&1 || { cat diag.txt; echo "diagnose failed"; exit 1; }
printf 'step,train_loss,val_loss\n0,10.9,10.95\n1,6.1,6.2\n2,4.5,4.6\n' > a.csv
printf 'step 0: train loss 10.90, val loss 10.96\nstep 1: train loss 6.00, val loss 6.10\nstep 2: train loss 4.40, val loss 4.50\n' > b.log
mkdir out
unset SOURCE_DATE_EPOCH
"$T" report an --log bf16=a.csv --log stable=b.log --dpi 60 -o out/report.pdf -q > rep.txt 2> rep.err \
    && ok || { bad "report failed: $(cat rep.err)"; finish; exit 1; }
pdfinfo out/report.pdf > info.txt 2>&1 && ok || bad "pdfinfo rejects the report: $(cat info.txt)"
pages=$(awk '/^Pages:/ {print $2}' info.txt)
[ "${pages:-0}" -ge 5 ] && ok || bad "only ${pages:-0} pages"
grep -q "CreationDate:.*2000" info.txt && ok || bad "without SOURCE_DATE_EPOCH the date should be the fixed 2000-01-01: $(grep Date info.txt)"
pdftotext out/report.pdf rep.pdf.txt
tr '\n' ' ' < rep.pdf.txt | tr -s ' ' > flat.txt
for h in "tilescope report" "Verdict" "At-risk heads" "Evidence map" "Per layer and head" "Figures" \
         "The rounding event found in this data" "Measured effect of the mitigation" "Commands that reproduce every number"; do
    grep -qF "$h" flat.txt && ok || bad "heading '$h' missing"
done

# numbers of summary.json, formatted here
$PY - an/summary.json > want.txt <<'PYEOF'
import json, struct, sys
s = json.load(open(sys.argv[1]))
top = s["diagnosis"]["at_risk"][0]
print(top["verdict"])
print("%+.3g" % top["delta_cumsum"])
print("%.0f%%" % (100 * top["stable_ratio"]) if round(100 * top["stable_ratio"]) else "0%")
print("lp %s versus hp %s" % (s["lp"], s["hp"]))
ev = top["event"]
assert ev["found"]
u = struct.unpack("<I", struct.pack("<f", ev["sum_fp32"]))[0]
b = format(u, "032b")
# docs/MECHANISM.md section 5: sign, exponent, the 7 mantissa bits bf16 keeps | rounding bit | sticky bits
print("%s %s %s|%s|%s" % (b[0], b[1:9], b[9:16], b[16], b[17:]))
print("%.17g" % ev["sum_fp32"])
PYEOF
while IFS= read -r line; do
    grep -qF -- "$line" flat.txt && ok || bad "report text lacks '$line'"
done < want.txt
# the event is the one the diagnosis printed
grep -q "largest rounding event" diag.txt && ok || bad "diagnose printed no event"

# legibility: every text box of the PDF is at least 7 pt tall (pdftotext -bbox gives word boxes)
pdftotext -bbox out/report.pdf bbox.html
minh=$($PY -c "
import re, sys
hs = [float(m.group(2)) - float(m.group(1)) for m in re.finditer(r'yMin=\"([0-9.]+)\" xMax=\"[0-9.]+\" yMax=\"([0-9.]+)\"', open('bbox.html').read())]
print('%.2f' % min(hs))")
$PY -c "import sys; sys.exit(0 if float('$minh') >= 7.0 else 1)" && ok || bad "smallest text box is $minh pt"

# HTML: self-contained
h=out/report.html
[ -s $h ] && ok || bad "no HTML"
grep -q "data:image/png;base64," $h && ok || bad "HTML has no embedded figure"
grep -Eqi "https?://|@import|<link|url\(|<script" $h && bad "HTML references an external resource: $(grep -Eoi 'https?://[^ \"]*|@import|<link|url\(|<script' $h | head -3)" || ok
grep -Eoi "src=\"[^\"]{0,12}" $h | grep -v 'src="data:' | grep -q . && bad "an src= that is not a data URI" || ok
grep -qF "$(sed -n 1p want.txt)" $h && ok || bad "HTML lacks the verdict"
cmp -s out/report.summary.json an/summary.json && ok || bad "summary.json copy (report.summary.json) differs"
[ ! -e out/summary.json ] && ok || bad "the report wrote summary.json outside the analysis folder"

# deterministic: the same input gives the same bytes
mv out/report.pdf first.pdf; mv out/report.html first.html
"$T" report an --log bf16=a.csv --log stable=b.log --dpi 60 -o out/report.pdf -q > /dev/null 2>&1 || bad "second run"
cmp -s first.pdf out/report.pdf && ok || bad "two runs gave different PDFs"
cmp -s first.html out/report.html && ok || bad "two runs gave different HTML"

# without logs and without a diagnosis: the report says what was not measured; SOURCE_DATE_EPOCH
# sets the PDF's date; --no-html writes no HTML
"$T" analyze d.h5 -o an2 --layers 1 --no-census -q > /dev/null 2>&1 || bad "analyze"
SOURCE_DATE_EPOCH=86400 "$T" report an2 -o an2/report.pdf --no-html --dpi 50 -q > /dev/null 2> r2.err && ok \
    || bad "analysis-only report: $(cat r2.err)"
pdfinfo an2/report.pdf | grep -q "CreationDate:.*1970" && ok || bad "SOURCE_DATE_EPOCH ignored: $(pdfinfo an2/report.pdf | grep Date)"
[ ! -e an2/report.html ] && ok || bad "--no-html wrote HTML"
pdftotext an2/report.pdf - | tr '\n' ' ' | tr -s ' ' > flat2.txt
grep -q "Not measured" flat2.txt && ok || bad "no 'Not measured' for the mitigation"
grep -q "fig2: fig2 needs a training log" flat2.txt && ok || bad "the figures without data are not listed"

# errors
"$T" report an -o nodir/r.pdf 2> e1.txt; rc=$?
[ $rc -eq 1 ] && grep -q "nodir" e1.txt && ok || bad "missing folder: rc $rc $(cat e1.txt)"
"$T" report an -o r.txt 2> /dev/null; [ $? -eq 2 ] && ok || bad "-o without .pdf should exit 2"
"$T" report nowhere -o r.pdf 2> e3.txt; rc=$?
[ $rc -eq 1 ] && grep -q "nowhere/summary.json" e3.txt && ok || bad "no analysis: rc $rc $(cat e3.txt)"
printf 'step,val_loss\n1,2\n2,oops\n' > badlog.csv
"$T" report an --log badlog.csv -o r.pdf 2> e4.txt; rc=$?
[ $rc -eq 1 ] && grep -q "badlog.csv:3" e4.txt && ok || bad "bad log: rc $rc $(cat e4.txt)"

finish
