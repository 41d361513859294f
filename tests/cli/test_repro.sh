#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# `tilescope repro --config tiny`: the experiment end to end in seconds. Structure and consistency, not the
# outcome: every run shares lp's batch order and the seed's initial weights, the diagnosis reads lp's capture,
# every figure it claims exists, the outcome table's numbers are those of the run files (recomputed here), and a
# second run gives the same figures, report and outcome.md byte for byte; a --dose reaches every bf16-torch run
# and is labelled. Bad flags: 2; an unwritable -o: 1. Both full runs pass --budget 120 (minutes, never reached):
# under the default budget a loaded machine can measure lp slow enough to drop the controls from one run only.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
command -v pdfinfo >/dev/null || { echo "poppler-utils missing: skip"; exit 77; }
cd "$tmp" || exit 1
mkdir a b

(cd a && "$T" repro --config tiny --budget 120 -o out > repro.txt 2> repro.err) && ok || bad "repro failed: $(tail -5 a/repro.err)"
o=a/out
runs="lp hp lp1 stable onetile hpdelta"
# the plan comes first, then the runs in order
[ "$(grep -n '^repro: config tiny' a/repro.txt | cut -d: -f1)" = 1 ] && ok || bad "the plan is not the first line"
grep -q '^\[train lp\] tilescope train -o out/runs/lp ' a/repro.txt && ok || bad "no lp train line"
for r in $runs; do
    [ -s $o/runs/$r/log.csv ] && ok || bad "run $r has no log.csv"
    [ "$r" = lp ] || { cmp -s $o/runs/lp/batches.csv $o/runs/$r/batches.csv && ok || bad "$r: batches.csv differs from lp's"; }
    [ "$r" = lp ] || { grep -q '^batches = out/runs/lp/batches.csv$' $o/runs/$r/run.cfg && ok || bad "$r does not replay lp's batches"; }
    # the initial weights: the step-0 rows of wq_norms.csv (every head of every layer) are the same bits
    [ "$(grep '^0,' $o/runs/$r/wq_norms.csv)" = "$(grep '^0,' $o/runs/lp/wq_norms.csv)" ] && ok \
        || bad "$r: step-0 W^Q norms differ from lp's"
done
[ "$(grep -c '^0,' $o/runs/lp/wq_norms.csv)" = 4 ] && ok || bad "wq_norms.csv step 0 should list 2 layers x 2 heads"
# the policies differ, so the runs do (hp against lp); T = 32 fits one 512 tile: onetile computes exactly lp
cmp -s $o/runs/lp/log.csv $o/runs/hp/log.csv && bad "hp and lp logs are identical" || ok
cmp -s $o/runs/lp/log.csv $o/runs/onetile/log.csv && ok || bad "onetile should equal lp at T <= 512"
grep -q '^attn_policy = bf16-torch+stable:beta=2,eps=1e-3$' $o/runs/stable/run.cfg && ok || bad "stable's policy"
grep -q '^attn_policy = 1=bf16-torch$' $o/runs/lp1/run.cfg && ok || bad "lp1's policy"
grep -q '^capture = steps=0:30:3,layers=1$' $o/runs/lp/run.cfg && ok || bad "lp's capture spec"
# checkpoints: only the latest unless asked (--keep-checkpoints, test_mpi_repro)
[ -s $o/runs/lp/ckpt.bin ] && ! ls $o/runs/lp/ckpt-*.bin >/dev/null 2>&1 && ok || bad "lp kept checkpoints unasked: $(ls $o/runs/lp)"
# the diagnosis reads lp's capture
grep -q '"dump": "out/runs/lp/capture.h5"' $o/diagnose/summary.json && ok || bad "summary.json does not name lp's capture"
grep -q '"lp": "bf16-torch"' $o/diagnose/summary.json && ok || bad "the diagnosis' lp is not bf16-torch"
# every figure is drawn or listed as not drawn with its reason; every drawn one exists
drawn=$(sed -n 's/^Drawn: \(.*\)\.$/\1/p' $o/outcome.md | tr -d ,)
[ -n "$drawn" ] && ok || bad "outcome.md lists no drawn figure"
for f in $drawn; do [ -s $o/figures/$f.png ] && ok || bad "figure $f claimed but missing"; done
for f in $("$T" figure --list | awk '$1 ~ /^fig/ {print $1}'); do
    { echo " $drawn " | grep -q " $f " || grep -q "^- $f: ." $o/outcome.md; } && ok || bad "$f neither drawn nor explained"
done
[ "$(ls $o/figures | wc -l)" = "$(echo $drawn | wc -w)" ] && ok || bad "figures/ holds files outcome.md does not list"
pdfinfo $o/report.pdf > /dev/null 2>&1 && ok || bad "pdfinfo rejects report.pdf"
[ -s $o/report.html ] && ok || bad "no report.html"
# the table: one row per run, its numbers recomputed from the run files
for r in $runs; do
    row=$(grep "^| $r | " $o/outcome.md)
    [ -n "$row" ] && ok || { bad "no table row for $r"; continue; }
    val=$(awk -F, 'NR > 1 && $4 != "" {v = $4} END {printf "%.5f", v}' $o/runs/$r/log.csv)
    echo "$row" | grep -qF "| $val |" && ok || bad "$r: final val loss $val not in '$row'"
    wq=$(awk -F, 'NR > 1 {if ($1 != s) {s = $1; m = 0} if ($4 + 0 > m) m = $4 + 0} END {printf "%.4f", m}' $o/runs/$r/wq_norms.csv)
    echo "$row" | grep -qF -- "-> $wq (" && ok || bad "$r: last largest W^Q norm $wq not in '$row'"
done
PY=$(find_py json) || { echo "no python3: skip"; exit 77; }
want=$("$PY" - "$o/diagnose/summary.json" <<'EOF'
import json, sys
hs = [h for h in json.load(open(sys.argv[1]))["heads"] if h["layer"] == 1]
last = max(h["step"] for h in hs)
h = max((h for h in hs if h["step"] == last), key=lambda h: abs(h["delta"]["cumsum"]))
print("%+.3g (head %d, steps 0..%d)" % (h["delta"]["cumsum"], h["head"], last))
EOF
)
grep "^| lp | " $o/outcome.md | grep -qF "| $want |" && ok || bad "lp's delta bias '$want' not in the table"
grep -q '^tilescope diagnose out/runs/lp/capture.h5 -o out/diagnose' $o/outcome.md && ok || bad "outcome.md lacks the commands"

# the same seed again: the same bytes
(cd b && "$T" repro --config tiny --budget 120 -o out > repro.txt 2> repro.err) && ok || bad "second repro failed"
for f in outcome.md report.pdf report.html $(cd $o && ls figures/*.png); do
    cmp -s $o/$f b/out/$f && ok || bad "$f differs between two runs with the same seed"
done

# overrides and a dose: the trainer gets them and outcome.md labels them
(cd b && "$T" repro --config tiny --steps 10 --lr 2e-3 --batch 2 --seq-len 16 --dose e8m4 -o over > over.txt 2> over.err) &&
    ok || bad "repro with overrides failed: $(tail -3 b/over.err)"
grep -q '^lr = 0.002$' b/over/runs/hp/run.cfg && grep -q '^batch = 2$' b/over/runs/hp/run.cfg &&
    grep -q '^seq_len = 16$' b/over/runs/hp/run.cfg && ok || bad "the overrides did not reach the trainer: $(cat b/over/runs/hp/run.cfg)"
grep -q 'overridden: peak lr 0.002, batch 2, context 16' b/over/outcome.md && ok || bad "outcome.md does not label the overrides"
# the dose: P-bar V and O-bar of every bf16-torch run in e8m4, hp untouched, labelled in outcome.md and the report
for r in lp lp1 stable onetile hpdelta; do
    grep -q '^attn_policy = .*bf16-torch+e8m4:pv,oacc' b/over/runs/$r/run.cfg 2>/dev/null && ok ||
        bad "$r does not carry the dose: $(grep attn_policy b/over/runs/$r/run.cfg 2>/dev/null)"
done
grep -q 'e8m4' b/over/runs/hp/run.cfg && bad "hp carries the dose" || ok
grep -q 'accelerating dose: P-bar V and O-bar rounded to e8m4 (4 mantissa bits; BF16 has 7)' b/over/outcome.md && ok ||
    bad "outcome.md does not label the dose"
grep -q 'bf16-torch+e8m4:pv,oacc' b/over/report.html && ok || bad "the report does not name the dosed lp"

# usage errors: 2; an output folder that cannot be made: 1 with a message
for args in "--config huge -o x" "--budget -1 -o x" "--budget abc -o x" "--seed -3 -o x" "--steps 5 -o x" \
            "--config tiny --layer 2 -o x" "--nope -o x" "extra -o x" "--config tiny" \
            "--config tiny --seq-len 64 -o x" "--config tiny --lr 0 -o x" "--config tiny --lr 2 -o x" \
            "--config tiny --batch 0 -o x" "--config tiny --model nosuch -o x" "--config tiny --dose fp16 -o x" \
            "--config tiny --dose e8m9 -o x" "--config tiny --dose fp32 -o x"; do
    "$T" repro $args > /dev/null 2>&1; [ $? -eq 2 ] && ok || bad "repro $args should exit 2"
done
[ ! -e x ] && ok || bad "a usage error created the output folder"
touch file
cd a && expect 1 "holds a run already" "$T" repro --config tiny -o out; cd "$tmp" || exit 1
expect 1 "cannot create the folder" "$T" repro --config tiny -o file/out
finish
