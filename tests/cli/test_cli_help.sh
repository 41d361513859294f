#!/bin/bash
# A command line that helps: progress with the time left on stderr (plain lines when stderr is a
# file, a bar redrawn with \r on a terminal, nothing with -q); the per-head table cut to the top N
# unless --verbose; "did you mean" for mistyped commands and options; an empty selection names what
# the dump has; out-of-range --token/--head/... is an error naming the range; a failed job leaves
# no folder it created behind. The dump is planted (tilescope synth): steps 0, 10, 20, 2 layers,
# 4 heads, 64 tokens, head_dim 16, batch 1; those known values are what the messages must name.
. "$(dirname "$0")/lib.sh"
PY=$(find_py json) || { echo "skip: no python3"; exit 77; }

"$TSC" synth -o "$tmp/t.h5" --steps 0:30:10 -q 2> "$tmp/synth.err" || { echo "synth failed"; exit 1; }
[ ! -s "$tmp/synth.err" ] && ok || bad "synth -q wrote to stderr: $(head -3 "$tmp/synth.err")"

# ---- progress, stderr a file: plain lines, each percentage = floor(100 done / total), every phase
# ending at 100%, the time elapsed and left, no \r
"$TSC" diagnose "$tmp/t.h5" -o "$tmp/d" --max-steps 1 > "$tmp/d.out" 2> "$tmp/d.err" && ok || bad "diagnose exit $?"
grep -q $'\r' "$tmp/d.err" && bad "plain progress holds a carriage return" || ok
if "$PY" - "$tmp/d.err" <<'PYEOF'; then ok; else bad "plain progress lines"; cat "$tmp/d.err"; fi
import re, sys
lines = [l for l in open(sys.argv[1]) if re.match(r"diagnose: +\d+% \(", l)]
assert lines, "no progress line"
phases = {}
for l in lines:
    m = re.match(r"diagnose: +(\d+)% \((\d+)/(\d+) (.+?)\), elapsed \d+:\d\d(, about \d+:\d\d left)?$", l.rstrip("\n"))
    assert m, l
    pct, done, total, phase = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
    assert pct == 100 * done // total, l
    assert (m.group(5) is None) == (done == total), l  # an estimate of the time left until done
    phases.setdefault(phase, []).append(done)
# 3 steps x 2 layers x 4 heads = 24 head records; then the fit's (step, layer) pairs; then the heads examined
assert "head records analysed" in phases, phases
for phase, d in phases.items():
    assert d == sorted(d), (phase, d)
assert lines[-1].split()[1] == "100%", lines[-1]
assert any("(24/24 head records analysed)" in l for l in lines), lines
assert len([l for l in lines if "head records analysed" in l]) <= 11, "more than one line per tenth"
PYEOF

# -q: no configuration line, no progress
"$TSC" diagnose "$tmp/t.h5" -o "$tmp/dq" --max-steps 1 -q > /dev/null 2> "$tmp/dq.err" && ok || bad "diagnose -q exit"
[ ! -s "$tmp/dq.err" ] && ok || bad "diagnose -q wrote to stderr: $(head -3 "$tmp/dq.err")"
"$TSC" analyze "$tmp/t.h5" -o "$tmp/aq" --no-census --no-identity --quiet > /dev/null 2> "$tmp/aq.err" && ok || bad "analyze -q"
[ ! -s "$tmp/aq.err" ] && ok || bad "analyze --quiet wrote to stderr"

# the other long jobs: replay and fit report plain progress to 100%
"$TSC" replay "$tmp/t.h5" --policy fp32 --policy bf16-torch -o "$tmp/r.h5" > /dev/null 2> "$tmp/r.err" && ok || bad "replay"
grep -q "^replay: 100% (6/6 (step, layer) pairs replayed)" "$tmp/r.err" && ok || bad "replay progress: $(cat "$tmp/r.err")"
"$TSC" fit "$tmp/t.h5" --policy bf16-torch --all-steps > /dev/null 2> "$tmp/f.err" && ok || bad "fit"
grep -q "^fit: 100% (6/6 (step, layer) pairs fitted)" "$tmp/f.err" && ok || bad "fit progress: $(cat "$tmp/f.err")"
"$TSC" fit "$tmp/t.h5" --policy bf16-torch -q > /dev/null 2> "$tmp/fq.err"
[ ! -s "$tmp/fq.err" ] && ok || bad "fit -q wrote to stderr"

# stderr a terminal (a pty from script(1)): the bar is redrawn in place with \r and reaches 100%
if command -v script > /dev/null; then
  script -q -c "'$TSC' diagnose '$tmp/t.h5' -o '$tmp/dt' --max-steps 1 > /dev/null" /dev/null > "$tmp/tty.txt" 2>&1
  grep -q $'\rdiagnose: \[#*\.*\] *[0-9]*% ' "$tmp/tty.txt" && ok || bad "no \\r bar on a terminal: $(head -c 400 "$tmp/tty.txt")"
  grep -q $'\rdiagnose: \[########################\] 100% 24/24 head records analysed' "$tmp/tty.txt" && ok ||
    bad "the bar does not reach 100%"
  [ "$(grep -c 'diagnose: \[' "$tmp/tty.txt")" -le 3 ] && ok || bad "the bar was not redrawn in place (one line per phase)"
else
  echo "note: no script(1): the terminal bar is not checked"
fi

# ---- the per-head table: every record with --verbose, else the top N by (skipped, flagged, |delta sum|)
"$TSC" analyze "$tmp/t.h5" -o "$tmp/a" --no-census --no-identity --verbose > "$tmp/av.out" 2> /dev/null && ok || bad "analyze -v"
"$TSC" analyze "$tmp/t.h5" -o "$tmp/a" --no-census --no-identity --top 3 > "$tmp/a3.out" 2> /dev/null && ok || bad "analyze --top 3"
"$TSC" analyze "$tmp/t.h5" -o "$tmp/a" --no-census --no-identity > "$tmp/a10.out" 2> /dev/null && ok || bad "analyze"
if "$PY" - "$tmp/a/summary.json" "$tmp/av.out" "$tmp/a3.out" "$tmp/a10.out" <<'PYEOF'; then ok; else bad "table rows"; fi
import json, re, sys
s = json.load(open(sys.argv[1]))
def rows(path):
    return [tuple(int(x) for x in l.split()[:3]) for l in open(path) if re.match(r"^\d+ +\d+ +\d+ ", l)]
heads = s["heads"]
assert len(heads) == 3 * 2 * 4, len(heads)
every = rows(sys.argv[2])
assert sorted(every) == sorted((h["step"], h["layer"], h["head"]) for h in heads), every
assert "omitted" not in open(sys.argv[2]).read()
key = lambda h: (-int(h["skipped"]), -int(h["flagged"]), -abs(h["delta"]["sum"]))
ranked = [(h["step"], h["layer"], h["head"]) for h in sorted(heads, key=key)]
for path, n in ((sys.argv[3], 3), (sys.argv[4], 10)):
    got = rows(path)
    assert got == ranked[:n], (n, got, ranked[:n])
    text = open(path).read()
    assert "(%d of 24 head records shown" % n in text and "%d omitted: --verbose prints all" % (24 - n) in text, text
PYEOF

# diagnose: the at-risk heads (the planted heads 1 and 3 of layer 1) cut to --top N
"$TSC" synth -o "$tmp/p.h5" --steps 0:12 --layers 1 -q || bad "synth p"
"$TSC" diagnose "$tmp/p.h5" -o "$tmp/p1" -q --max-steps 1 --top 1 > "$tmp/p1.out" && ok || bad "diagnose --top 1"
"$TSC" diagnose "$tmp/p.h5" -o "$tmp/p2" -q --max-steps 1 --verbose > "$tmp/p2.out" && ok || bad "diagnose --verbose"
[ "$(grep -c '^[0-9]*\. layer 1 head' "$tmp/p1.out")" = 1 ] && ok || bad "--top 1 printed $(grep -c '^[0-9]*\. layer' "$tmp/p1.out") heads"
grep -q "(1 of 2 at-risk heads shown, most at risk first; 1 omitted: --verbose prints all" "$tmp/p1.out" && ok || bad "no omitted line"
[ "$(grep -c '^[0-9]*\. layer 1 head' "$tmp/p2.out")" = 2 ] && ok || bad "--verbose did not print both planted heads"
grep -q "omitted" "$tmp/p2.out" && bad "--verbose says something was omitted" || ok

# ---- did you mean
expect 2 "unknown command 'diagnos'; did you mean 'diagnose'?" "$TSC" diagnos "$tmp/t.h5"
expect 2 "unknown command 'analyse'; did you mean 'analyze'?" "$TSC" analyse "$tmp/t.h5"
expect 2 "unknown command 'repaly'; did you mean 'replay'?" "$TSC" repaly "$tmp/t.h5"
expect 2 "unknown command 'diag'; did you mean 'diagnose'?" "$TSC" diag
expect 2 "unknown command 'figur'; did you mean 'figure'?" "$TSC" help figur
expect 2 "unknown option '--verison'; did you mean '--version'?" "$TSC" --verison
expect 2 "unknown option '--step'; did you mean '--steps'?" "$TSC" diagnose "$tmp/t.h5" -o "$tmp/x" --step 1
expect 2 "unknown option '--layer'; did you mean '--layers'?" "$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --layer 1
expect 2 "unknown option '--qiuet'; did you mean '--quiet'?" "$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --qiuet
expect 2 "unknown option '--toekn'; did you mean '--token'?" "$TSC" figure fig6a --from "$tmp/a" -o "$tmp/x.png" --toekn 3
expect 2 "unknown option '--seqlen'; did you mean '--seq-len'?" "$TSC" synth -o "$tmp/x.h5" --seqlen 8
expect 2 "unknown option '--polcy'; did you mean '--policy'?" "$TSC" replay "$tmp/t.h5" --polcy fp32
expect 2 "unknown option '--all-step'; did you mean '--all-steps'?" "$TSC" fit "$tmp/t.h5" --all-step
expect 2 "unknown option '--steps=1': write '--steps 1'" "$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --steps=1
# an option carried over from another command: the name this one uses
expect 2 "unknown option '--policy': diagnose takes the run's low-precision policy as --lp P" "$TSC" diagnose "$tmp/t.h5" -o "$tmp/x" --policy bf16-fa2
expect 2 "unknown option '--policy=bf16-fa2': analyze takes" "$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --policy=bf16-fa2
expect 2 "unknown option '--policy': train takes the attention policy as --attn-policy" "$TSC" train -o "$tmp/r" --policy fp32
expect 2 "unknown option '--frobnicate'" "$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --frobnicate
grep -q "did you mean" "$tmp/err" && bad "a suggestion for a word near no option" || ok
expect 2 "unknown option '-x'" "$TSC" analyze "$tmp/t.h5" -o "$tmp/x" -x
grep -q "did you mean" "$tmp/err" && bad "a suggestion for a one-letter option" || ok
[ ! -e "$tmp/x" ] && ok || bad "a usage error created the output folder"

# ---- an empty selection names what the dump has; the fresh output folder does not stay
expect 1 "matches none of the dump's steps (steps=99); the dump has steps 0, 10, 20; layers 0, 1; heads 0-3; batch rows 0" \
  "$TSC" diagnose "$tmp/t.h5" -o "$tmp/fresh" --steps 99
[ ! -e "$tmp/fresh" ] && ok || bad "the failed diagnose left $tmp/fresh: $(ls -a "$tmp/fresh")"
expect 1 "matches none of the dump's layers (layers=7)" "$TSC" analyze "$tmp/t.h5" -o "$tmp/fresh2" --layers 7
[ ! -e "$tmp/fresh2" ] && ok || bad "the failed analyze left $tmp/fresh2"
expect 1 "matches none of the dump's heads (heads=4:8), nor of its batch rows (batches=2)" \
  "$TSC" replay "$tmp/t.h5" --policy fp32 -o "$tmp/x.h5" --heads 4:8 --batches 2
expect 1 "the dump has steps 0, 10, 20; layers 0, 1" "$TSC" fit "$tmp/t.h5" --layers 5
# a folder that existed stays, empty or not, and so do its files
mkdir "$tmp/mine" "$tmp/mine2" && echo keep > "$tmp/mine2/notes.txt"
expect 1 "matches none of the dump's steps" "$TSC" diagnose "$tmp/t.h5" -o "$tmp/mine" --steps 99
expect 1 "matches none of the dump's steps" "$TSC" diagnose "$tmp/t.h5" -o "$tmp/mine2" --steps 99
[ -d "$tmp/mine" ] && [ "$(cat "$tmp/mine2/notes.txt")" = keep ] && ok || bad "a pre-existing folder or file was removed"
# a nested fresh folder goes, its existing parent stays
expect 1 "matches none" "$TSC" analyze "$tmp/t.h5" -o "$tmp/mine/new" --steps 5
[ ! -e "$tmp/mine/new" ] && [ -d "$tmp/mine" ] && ok || bad "nested fresh folder"

# ---- out-of-range indices are errors naming the range, never clamped
expect 2 "--token 64 is out of range: the analysis in $tmp/a has 64 tokens per sequence (--token 0 to 63)" \
  "$TSC" figure fig6a --from "$tmp/a" -o "$tmp/x.png" --token 64
expect 2 "--head 4 is out of range: the analysis in $tmp/a has 4 query heads (--head 0 to 3)" \
  "$TSC" figure fig6a --from "$tmp/a" -o "$tmp/x.png" --head 4
expect 2 "--feature 16 is out of range" "$TSC" figure fig6a --from "$tmp/a" -o "$tmp/x.png" --feature 16
expect 2 "--batch 1 is out of range" "$TSC" figure fig5b --from "$tmp/a" -o "$tmp/x.png" --batch 1
expect 2 "--layer 2 was not analysed: the analysis in $tmp/a covers layers 0, 1" \
  "$TSC" figure fig3 --from "$tmp/a" -o "$tmp/x.png" --layer 2
expect 2 "--step 5 was not analysed: the analysis in $tmp/a covers steps 0, 10, 20" \
  "$TSC" figure fig3 --from "$tmp/a" -o "$tmp/x.png" --step 5
[ ! -e "$tmp/x.png" ] && ok || bad "an out-of-range figure was written"
"$TSC" figure fig6a --from "$tmp/a" -o "$tmp/ok.png" --token 63 --head 3 --layer 1 > "$tmp/fig.out" && ok || bad "in-range figure"
grep -q "at T = 63, I = " "$tmp/fig.out" && ok || bad "fig6a did not use token 63: $(cat "$tmp/fig.out")"
expect 1 "head 4 is out of range: the dump has 4 query heads (0 to 3)" \
  "$TSC" explain "$tmp/t.h5" --layer 1 --head 4 --row 0 --feature 0
expect 1 "row 64 is out of range: the dump has 64 rows (tokens) (0 to 63)" \
  "$TSC" explain "$tmp/t.h5" --layer 1 --head 0 --row 64 --feature 0
expect 1 "the probe's row 64 is out of range: the dump has 64 rows (tokens) (0 to 63)" \
  "$TSC" analyze "$tmp/t.h5" -o "$tmp/fresh3" --probe 0,64,0
expect 1 "the probe's feature 16 is out of range: the dump has 16 features per head (0 to 15)" \
  "$TSC" analyze "$tmp/t.h5" -o "$tmp/fresh3" --probe 0,3,16
[ ! -e "$tmp/fresh3" ] && ok || bad "the refused analyze left its folder"
expect 1 "no step 5 in the dump; it has 3 steps: 0, 10, 20" \
  "$TSC" explain "$tmp/t.h5" --step 5 --layer 1 --head 0 --row 0 --feature 0

# ---- every command documents the flags
for c in analyze diagnose; do
  "$TSC" help $c | grep -q -- "-v, --verbose" && "$TSC" help $c | grep -q -- "--top N" && ok || bad "$c --help lacks --verbose/--top"
done
for c in analyze diagnose replay fit synth report; do
  "$TSC" help $c | grep -q -- "-q, --quiet" && ok || bad "$c --help lacks -q, --quiet"
done
finish
