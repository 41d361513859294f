#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# Fix and rerun, end to end on tiny runs. `train --fork`: a fork with the source's own policy reproduces the
# source's log, W^Q norms and batches byte for byte (the checkpoint holds everything the rest of the run depends
# on); a fork with another policy keeps the rows before the fork and changes the ones after; --ckpt-keep keeps
# ckpt-0.bin and the newest N; --resume and --fork refuse flags they would ignore. `rescue`: on a run with a
# planted dose (P-bar V and O-bar in e8m2) and a planted learning-rate spike, the diagnosis of the flight dump,
# told nothing of the run, flags heads and recommends a fix; the fix is appended to the run's policy and the
# rerun forks from the newest kept checkpoint before the dump's first step; rescue.md, loss.png and the
# commands are written. A plain BF16 run with a planted spike: nothing to fix (exit 3, not rerun), and with
# --fix given the rerun diverges too (exit 4: a learning-rate blow-up is not attention's rounding).
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
cd "$tmp" || exit 1
tiny=(--model gpt2-tiny --threads 2 --batch 2 --seq-len 32 --precision bf16 --val-every 5 --val-batches 2
      --stats-every 10)

# ---- train --fork ----
"$T" train "${tiny[@]}" --steps 40 --ckpt-every 10 --ckpt-keep 3 --attn-policy bf16-torch -o src -q >/dev/null 2>err \
  && ok || bad "source run failed: $(head -3 err)"
[ "$(cd src && ls ckpt-*.bin | sort -V | tr '\n' ' ')" = "ckpt-0.bin ckpt-20.bin ckpt-30.bin ckpt-40.bin " ] && ok \
  || bad "kept checkpoints: $(ls src)"
"$T" train --fork src@20 -o same --attn-policy bf16-torch -q >/dev/null 2>err && ok || bad "fork failed: $(head -3 err)"
for f in log.csv wq_norms.csv batches.csv; do
  cmp -s src/$f same/$f && ok || bad "a fork under the source's own policy changed $f"
done
grep -qx "fork_of = src@20" same/run.cfg && ok || bad "run.cfg does not record the fork: $(grep fork same/run.cfg)"
"$T" train --fork src@20 -o fixed --attn-policy bf16-torch+stable -q >/dev/null 2>err && ok || bad "fork failed: $(head -3 err)"
cmp -s <(awk -F, '$1 < 20' src/log.csv) <(awk -F, '$1 < 20' fixed/log.csv) && ok || bad "the rows before the fork differ"
[ "$(awk -F, '$1 >= 20' src/log.csv | cut -d, -f3 | md5sum)" != "$(awk -F, '$1 >= 20' fixed/log.csv | cut -d, -f3 | md5sum)" ] \
  && ok || bad "the stable fix changed no training loss after the fork"
[ "$(tail -1 fixed/log.csv | cut -d, -f1)" = 39 ] && ok || bad "the fork does not run to the source's last step"
grep -qx "attn_policy = bf16-torch+stable" fixed/run.cfg && ok || bad "the fork's policy: $(grep attn fixed/run.cfg)"
# a fork resumes as any run: fork to 30 steps, resume to 40 = nothing different from the 40-step rows up to 30
"$T" train --fork src@30 -o short --steps 35 -q >/dev/null 2>err && ok || bad "fork --steps failed: $(head -3 err)"
[ "$(tail -1 short/log.csv | cut -d, -f1)" = 34 ] && ok || bad "fork --steps 35 ends at $(tail -1 short/log.csv | cut -d, -f1)"
expect 1 "kept checkpoints: 0, 20, 30, 40" "$T" train --fork src@10 -o x1
expect 2 "--lr cannot change" "$T" train --fork src@20 -o x2 --lr 1
expect 2 "--attn-policy cannot change" "$T" train --resume src --attn-policy fp32
expect 1 "not its source" "$T" train --fork src@20 -o src
expect 1 "holds a run already" "$T" train --fork src@20 -o same
mkdir hostile && cp src/run.cfg src/log.csv src/wq_norms.csv src/batches.csv hostile/ && ln -s "$PWD/src/ckpt-20.bin" hostile/ckpt-20.bin
expect 1 "symbolic link" "$T" train --fork hostile@20 -o x3

# ---- rescue with a dose: the diagnosis finds the biased rounding and its fix is applied ----
dose=(--model gpt2-tiny,ctx=64 --threads 2 --batch 4 --seq-len 64 --precision bf16 --val-every 5 --val-batches 2
      --stats-every 10 --lr 1e-2 --steps 80 --ckpt-every 10 --ckpt-keep 10 --flight 4 --flight-dumps 4)
"$T" train "${dose[@]}" --attn-policy bf16-torch+e8m2:pv,oacc --lr-spike 60=1 -o dosed -q >/dev/null 2>err \
  && ok || bad "dosed run failed: $(head -3 err)"
"$T" rescue dosed -o res >out 2>err; rc=$?
[ "$rc" = 0 ] || [ "$rc" = 4 ] && ok || bad "rescue of the dosed run exit $rc: $(tail -3 err)"
grep -q "^diagnosis: biased step over the examined heads: [a-z+-]*; layer [0-9] head [0-9] carries the largest bias" out && ok || bad "no diagnosis line: $(grep -m3 diag out)"
# told nothing of the dose, the diagnosis names the dosed rounding (P-bar V and O-bar) as the biased step,
# and says so as summary.json does
step=$(sed -n 's/^diagnosis: biased step over the examined heads: \([a-z+-]*\);.*/\1/p' out)
case "+$step+" in *+pv+*|*+oacc+*) ok ;; *) bad "biased step '$step' does not name pv or oacc" ;; esac
py=$(find_py) || py=python3
[ "$step" = "$("$py" -c 'import json; print(json.load(open("res/diagnose/summary.json"))["diagnosis"]["biased_step"])')" ] \
  && ok || bad "biased step '$step' is not summary.json's"
fix=$(grep -o '\[train\] fork dosed@[0-9]* -> res/fixed with [^ ]* appended' out)
[ -n "$fix" ] && ok || bad "no fork line: $(grep -m2 train out)"
at=$(echo "$fix" | sed 's/.*dosed@\([0-9]*\).*/\1/')
applied=$(echo "$fix" | sed 's/.* with \([^ ]*\) appended/\1/')
# the applied modifier is the recommended fix of the top head in summary.json (read independently here)
want=$("$py" -c '
import json, sys
s = json.load(open("res/diagnose/summary.json"))["diagnosis"]["at_risk"][0]
rec = [f["modifier"] for f in s["fixes"] if f["recommended"]]
print(rec[0] if rec else [f["modifier"] for f in s["fixes"] if f["modifier"].startswith("+fp32:")][0])')
[ "$applied" = "$want" ] && ok || bad "applied $applied, the summary recommends $want"
grep -qx "attn_policy = bf16-torch+e8m2:pv,oacc$want" res/fixed/run.cfg && ok || bad "the fixed run's policy: $(grep attn res/fixed/run.cfg)"
grep -qx "fork_of = dosed@$at" res/fixed/run.cfg && ok || bad "the fixed run's fork_of: $(grep fork res/fixed/run.cfg)"
# the fork point: the newest kept checkpoint at or before the first step the chosen dump holds
dump=$(sed -n 's/^  flight dump \([^:]*\):.*/\1/p' out)
fs=$("$py" -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r"); print(int(f.attrs["flight_step"]) - int(f.attrs["flight_n_steps"]) + 1)' "$dump")
best=$(cd dosed && ls ckpt-*.bin | sed 's/ckpt-\([0-9]*\).bin/\1/' | awk -v l="$fs" '$1 <= l' | sort -n | tail -1)
[ "$at" = "$best" ] && ok || bad "forked at $at; the newest kept checkpoint at or before step $fs is $best"
cmp -s <(awk -F, -v s="$at" '$1 < s' dosed/log.csv) <(awk -F, -v s="$at" '$1 < s' res/fixed/log.csv) && ok \
  || bad "the fixed run's rows before the fork differ from the run's"
[ -s res/rescue.md ] && grep -q "^| fixed | bf16-torch+e8m2:pv,oacc$want (from step $at) |" res/rescue.md && ok \
  || bad "rescue.md lacks the fixed row: $(grep '^| fixed' res/rescue.md)"
grep -q "^tilescope train --fork dosed@$at -o res/fixed --attn-policy 'bf16-torch+e8m2:pv,oacc$want'" res/rescue.md && ok \
  || bad "rescue.md lacks the fork command"
[ "$(head -c 8 res/loss.png | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] && ok || bad "loss.png is not a PNG"

# ---- --flight-keep: a dump per trigger for the whole run, the newest N kept ----
"$T" train "${dose[@]:0:${#dose[@]}-2}" --flight-keep 2 --attn-policy bf16-torch+e8m2:pv,oacc --lr-spike 60=1 -o keep \
  >out 2>err && ok || bad "the --flight-keep run failed: $(head -3 err)"
# the run said where each dump went; the two newest of them are what is left, and nothing else
wrote=$(sed -n 's/^step [0-9]*: the flight recorder wrote \([^ ]*\) .*/\1/p' out)
nw=$(echo "$wrote" | grep -c .)
[ "$nw" -ge 3 ] && ok || bad "want at least 3 triggers to see a dump deleted; got $nw"
kept=$(ls keep/flight*.h5 | sort | tr '\n' ' ')
want=$(echo "$wrote" | tail -2 | sort | tr '\n' ' ')
[ "$kept" = "$want" ] && ok || bad "kept $kept; the newest two written are $want"
grep -qx "flight_keep = 2" keep/run.cfg && ok || bad "run.cfg lacks flight_keep: $(grep flight keep/run.cfg)"
expect 1 "give one" "$T" train "${dose[@]}" --flight-keep 2 --steps 2 -o both

# ---- rescue of a learning-rate blow-up: nothing to fix ----
"$T" train "${tiny[@]}" --steps 50 --ckpt-every 10 --ckpt-keep 10 --attn-policy bf16-torch --flight 4 --flight-dumps 4 \
  --lr-spike 30=30 -o spike -q >/dev/null 2>err && ok || bad "spike run failed: $(head -3 err)"
"$T" rescue spike -o none >out 2>err; rc=$?
[ "$rc" = 3 ] && ok || bad "rescue of a learning-rate spike exit $rc (want 3: nothing to fix): $(tail -2 out)"
grep -q "^nothing to fix" out && [ ! -d none/fixed ] && ok || bad "nothing-to-fix not said, or rerun anyway"
grep -q "flight dump spike/flight.h5: trigger" out && ok || bad "not the first dump of the episode: $(grep 'flight dump' out)"
"$T" rescue spike -o forced --fix +stable:beta=2 >out 2>err; rc=$?
[ "$rc" = 4 ] && ok || bad "a forced attention fix of a learning-rate spike exit $rc (want 4: diverged too)"
grep -q "^The rerun with the fix diverged too" forced/rescue.md && ok || bad "rescue.md does not say the rerun diverged"

# ---- refusals ----
expect 2 "the run folder is required" "$T" rescue -o x
expect 2 "--fix: expected auto or a policy modifier" "$T" rescue spike -o x --fix stable
expect 1 "no flight recorder dump" "$T" rescue src -o x
expect 1 "log.csv" "$T" rescue nosuchrun -o x
finish
