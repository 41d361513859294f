#!/usr/bin/env bash
# `tilescope compare`: two diagnoses of one synth dump (lp bf16-torch and bf16-torch+stable) compared:
# every row of compare.md and compare.json carries the two summary.json biases of its head and their
# difference, and the flags of each side; the figures are valid PNGs; folders of different shapes are
# refused (exit 1, no output folder); a log that does not cover the analysed steps is warned about.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
LOGS=${TSC_SRC:?TSC_SRC must name the source tree}/tests/data/logs
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
PY=$(find_py json) || { echo "no python3: skip"; exit 77; }
cd "$tmp" || exit 1

"$T" synth -o d.h5 --shape tiny --quiet || { echo "synth failed"; exit 1; }
"$T" diagnose d.h5 -o a --lp bf16-torch+tile:q=16,k=16 -q > /dev/null 2>&1 || { echo "diagnose a failed"; exit 1; }
# b is a what-if: the fix did not run, so its replay does not reproduce the dump's O and diagnose says so with
# exit 3 (TSC_CLI_EXIT_POOR_FIT) after writing the diagnosis
"$T" diagnose d.h5 -o b --lp bf16-torch+tile:q=16,k=16+stable -q > /dev/null 2>&1; rc=$?
[ $rc -eq 3 ] && [ -f b/summary.json ] || { echo "diagnose b: exit $rc, want 3 and b/summary.json"; exit 1; }

# 1. the comparison, with labels and a log per run
"$T" compare a b -o cmp --label A=bf16 --label B=stable --log "A=$LOGS/llmc_gpt2.log" \
    --log "B=$LOGS/tensorboard_export.csv" > out.txt 2> err.txt && ok || bad "compare failed: $(cat err.txt)"
grep -q "8 heads matched" out.txt && ok || bad "compare should match the 8 heads of tiny: $(cat out.txt)"
for f in compare.md compare.json compare_bias.png compare_spectral.png compare_loss.png; do
  [ -s "cmp/$f" ] && ok || bad "cmp/$f missing or empty"
done
# valid PNGs: the signature, an IHDR chunk, a positive size, and an IEND at the end
for f in cmp/compare_bias.png cmp/compare_spectral.png cmp/compare_loss.png; do
  "$PY" - "$f" <<'PYEOF' && ok || bad "$f is not a valid PNG"
import struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n' and b[12:16] == b'IHDR' and b[-8:-4] == b'IEND'
w, h = struct.unpack('>II', b[16:24])
assert w > 100 and h > 100
assert zlib.crc32(b[12:29]) == struct.unpack('>I', b[29:33])[0]
PYEOF
done

# 2. the table against the two summaries: bias = delta.cumsum of the head's last step record (which the
#    pooled per_head record must equal),
#    change = B - A, flags = flagged at any step / at risk in the diagnosis
"$PY" - a/summary.json b/summary.json cmp/compare.md cmp/compare.json <<'PYEOF' > check.txt 2>&1 && ok || bad "table vs summaries: $(cat check.txt)"
import json, math, sys
def heads(path):
    s = json.load(open(path))
    out = {}
    for r in s['heads']:
        k = (r['layer'], r['head'])
        e = out.setdefault(k, {'step': -1, 'flagged': False, 'risk': False})
        e['flagged'] |= bool(r['flagged'])
        if r['step'] >= e['step']:
            e['step'], e['bias'] = r['step'], r['delta']['cumsum']
    for r in s.get('diagnosis', {}).get('at_risk', []):
        out[(r['layer'], r['head'])]['risk'] = True
    return out
def flags(e):
    f = [w for w, on in (('flagged', e['flagged']), ('at risk', e['risk'])) if on]
    return ', '.join(f) if f else '-'
A, B = heads(sys.argv[1]), heads(sys.argv[2])
rows = [l for l in open(sys.argv[3]) if l.startswith('| ') and not l.startswith('| layer')]
assert len(rows) == 8, rows
changed = 0
for l in rows:
    c = [x.strip() for x in l.strip().strip('|').split('|')]
    k = (int(c[0]), int(c[1]))
    a, b, d = float(c[2]), float(c[3]), float(c[4])
    close = lambda x, y: abs(x - y) <= 1e-5 * max(abs(y), 1e-12)
    assert close(a, A[k]['bias']), (k, a, A[k]['bias'])
    assert close(b, B[k]['bias']), (k, b, B[k]['bias'])
    assert close(d, B[k]['bias'] - A[k]['bias']), (k, d)
    assert c[5] == flags(A[k]) and c[6] == flags(B[k]), (k, c[5:7])
    changed += d != 0
assert changed >= 1, 'stable should change the bias of some head'
# the largest change first
ds = [abs(float(l.split('|')[5])) for l in rows]
assert ds == sorted(ds, reverse=True), ds
j = json.load(open(sys.argv[4]))
assert j['a']['lp'] == 'bf16-torch+tile:q=16,k=16' and j['b']['lp'].startswith('bf16-torch+tile:q=16,k=16+stable')
assert len(j['heads']) == 8
for h in j['heads']:
    k = (h['layer'], h['head'])
    assert h['bias_a'] == A[k]['bias'] and h['bias_b'] == B[k]['bias'], k
    assert h['change'] == B[k]['bias'] - A[k]['bias'], k
print('ok')
PYEOF

# 2b. each side carries its fit and its warnings: b's replay does not reproduce the dump's O (its fit is below
#     99%), so compare.md says so in bold and compare.json has b's warning; a has none
"$PY" - a/summary.json b/summary.json cmp/compare.md cmp/compare.json <<'PYEOF' > fit.txt 2>&1 && ok || bad "fits: $(cat fit.txt)"
import json, sys
sa, sb = (json.load(open(p))['diagnosis']['fit'] for p in sys.argv[1:3])
md, j = open(sys.argv[3]).read(), json.load(open(sys.argv[4]))
assert sa['o_identical'] >= 0.99 > sb['o_identical'], (sa['o_identical'], sb['o_identical'])
assert j['a']['fit_o_identical'] == sa['o_identical'] and j['b']['fit_o_identical'] == sb['o_identical']
assert j['a']['warning'] is None and j['b']['warning'], (j['a']['warning'], j['b']['warning'])
assert '- **B warning: ' in md and '- **A warning' not in md, md
assert '- A fit: %s\n' % sa['sentence'] in md and '- B fit: %s\n' % sb['sentence'] in md, md
assert '- **B warning: below 99%' in md, md
print('ok')
PYEOF

# 2c. a flag that disappeared beside a larger |bias| is called out: c is a's summary with one flagged head's
#     flag removed and its bias doubled (what a noisier run with fewer rows can give)
rm -rf c && cp -r a c && rm -f c/.tilescope.lock
"$PY" - a/summary.json c/summary.json <<'PYEOF' > edit.txt 2>&1 || { echo "edit failed: $(cat edit.txt)"; exit 1; }
import json, sys
s = json.load(open(sys.argv[1]))
h = next(h for h in s['per_head'] if h['flagged'])
h['flagged'], h['delta_cumsum'] = False, 2 * h['delta_cumsum']
s.pop('diagnosis')
json.dump(s, open(sys.argv[2], 'w'))
print(h['layer'], h['head'])
PYEOF
"$T" compare a c -o cmp4 -q > /dev/null 2>&1 && ok || bad "compare a c failed"
read -r L H < edit.txt
grep -q "^- \*\*1 head lost its flag while its |bias| grew\*\*" cmp4/compare.md && ok || bad "no vanished-flag note: $(cat cmp4/compare.md)"
grep -q "^| $L | $H | .* !  *|$" cmp4/compare.md && ok || bad "head $L/$H not marked: $(cat cmp4/compare.md)"
[ "$(grep -c ' ! *|$' cmp4/compare.md)" = 1 ] && ok || bad "only head $L/$H should be marked"

# 3. incompatible shapes: refused, naming both folders, no output folder left
"$T" synth -o g.h5 --shape llama-gqa --steps 0 --layers 1 --quiet || { echo "synth llama-gqa failed"; exit 1; }
"$T" analyze g.h5 -o g -q > /dev/null 2>&1 || { echo "analyze g failed"; exit 1; }
expect 1 "incompatible shapes: n_head 4 vs 8" "$T" compare a g -o bad
[ ! -e bad ] && ok || bad "a failed compare left its output folder"

# 4. a log that does not cover the analysed steps (0..2): a warning on stderr
printf 'step,loss\n100,3.5\n200,3.25\n' > late.csv
"$T" compare a b -o cmp2 --log A=late.csv -q 2> warn.txt && ok || bad "compare with a late log failed: $(cat warn.txt)"
grep -q "warning: log 'late.csv'.*does not cover the analysed steps" warn.txt && ok || bad "no coverage warning: $(cat warn.txt)"
"$T" compare a b -o cmp3 -q 2> nowarn.txt && [ ! -s nowarn.txt ] && [ ! -e cmp3/compare_loss.png ] && ok \
  || bad "without logs: no warning, no loss figure: $(cat nowarn.txt)"

# 5. usage
expect 2 "two analysis folders" "$T" compare a -o x
expect 2 "expected A=... or B=..." "$T" compare a b -o x --label C=foo
expect 2 "different names" "$T" compare a b -o x --label A=same --label B=same
finish
