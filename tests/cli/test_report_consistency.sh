#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# The report agrees with itself: report_consistency.py reads every number printed for a head (the verdict,
# the at-risk, per-head and mitigation tables, figure 1's boxes, figure 8's caption, diagnose's lines) and
# checks each against summary.json's one definition (per_head, diagnosis.at_risk), on the demo (heads at
# risk) and on a repro (none at risk). A summary altered by one number makes the checker fail.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
command -v pdftotext >/dev/null || { echo "poppler-utils missing: skip"; exit 77; }
PY=$(find_py json) || { echo "no python3: skip"; exit 77; }
cd "$tmp" || exit 1

# 1. the demo: its default shape (the tiny one in a sanitized build, where the default takes ten minutes), heads
#    at risk; diagnose's own lines too
shape=()
[ -n "${ASAN_OPTIONS:-}" ] && shape=(--shape tiny)
"$T" demo -o d "${shape[@]}" > demo.txt 2> demo.err && ok || bad "demo failed: $(tail -5 demo.err)"
"$T" diagnose d/dump.h5 -o d2 > diag.txt 2> /dev/null && ok || bad "diagnose failed"
"$T" report d2 -o d2/report.pdf -q > /dev/null 2>&1 && ok || bad "report of d2 failed"
"$PY" "$HERE/report_consistency.py" d/summary.json d/report.pdf d/report.html > c1.txt 2>&1 && ok \
    || bad "demo report: $(cat c1.txt)"
"$PY" "$HERE/report_consistency.py" d2/summary.json d2/report.pdf d2/report.html diag.txt > c2.txt 2>&1 && ok \
    || bad "diagnose + report: $(cat c2.txt)"
n=$(awk '/^ok/ {print $2}' c2.txt)
[ "${n:-0}" -ge "$([ ${#shape[@]} -eq 0 ] && echo 150 || echo 40)" ] && ok || bad "only ${n:-0} numbers checked on the demo"
grep -q '"n_at_risk": [1-9]' d2/summary.json && ok || bad "the demo should have heads at risk"

# 2. the checker fails when one printed number is not the summary's: the top head's pooled gain moved by
#    0.1 in a copy of the summary
"$PY" - d2/summary.json bad.json <<'PYEOF' || { echo "edit failed"; exit 1; }
import json, sys
s = json.load(open(sys.argv[1]))
top = s['diagnosis']['at_risk'][0]
for h in s['per_head']:
    if (h['layer'], h['head']) == (top['layer'], top['head']):
        h['accum_gain'] += 0.1
top['accum_gain'] += 0.1
json.dump(s, open(sys.argv[2], 'w'))
PYEOF
"$PY" "$HERE/report_consistency.py" bad.json d2/report.pdf d2/report.html diag.txt > c3.txt 2>&1 && bad "the checker missed a moved gain" \
    || { grep -q "gain: printed" c3.txt && ok || bad "the checker failed for another reason: $(cat c3.txt)"; }

# 3. a repro (the tiny config, with its logs): nothing at risk, and the report says so consistently
"$T" repro --config tiny -o r > repro.txt 2> repro.err && ok || bad "repro failed: $(tail -5 repro.err)"
"$PY" "$HERE/report_consistency.py" r/diagnose/summary.json r/report.pdf r/report.html > c4.txt 2>&1 && ok \
    || bad "repro report: $(cat c4.txt)"
finish
