#!/bin/bash
# End-to-end: `tilescope synth` -> `tilescope diagnose` on the planted layer of a tiny dump.
# The at-risk heads are exactly the planted heads; the culprit found by substitution is a set of
# stages of the P-bar V / O-bar / O rounding chain (bf16-torch rounds the tied P-bar V sum, then
# O-bar, then O: raising one alone is undone by the next, so it is a set such as pv+oacc+o); the largest rounding
# event is an addition of a tied term (P-bar = 1) that rounds a negative sum up in magnitude
# (error < 0, docs/MECHANISM.md section 5); the mitigation is measured. A --no-plant dump has nothing at risk.
. "$(dirname "$0")/lib.sh"
PY=$(find_py h5py numpy) || { echo "skip: no python3 with h5py and numpy"; exit 77; }

"$TSC" synth -o "$tmp/p.h5" --steps 0:12 --layers 1 --quiet || { echo "synth failed"; exit 1; }
if "$TSC" diagnose "$tmp/p.h5" -o "$tmp/d" -q --max-steps 2 > "$tmp/out.txt"; then ok; else bad "diagnose exit $?"; fi
cat "$tmp/out.txt"
grep -q "^1\. layer 1 head " "$tmp/out.txt" && ok || bad "no ranked line"
grep -q "largest rounding event" "$tmp/out.txt" && ok || bad "no rounding event printed"
grep -q "kept | rounding bit | sticky" "$tmp/out.txt" && ok || bad "no bit split printed"
if "$PY" - "$tmp/p.h5" "$tmp/d/summary.json" <<'PYEOF'; then ok; else bad "diagnosis content"; fi
import sys, json, math, h5py
f = h5py.File(sys.argv[1], "r")
s = json.load(open(sys.argv[2]))
d = s["diagnosis"]
H, F = sorted(int(h) for h in f.attrs["planted_heads"]), sorted(int(x) for x in f.attrs["planted_features"])
got = sorted(h["head"] for h in d["at_risk"])
assert got == H, (got, H)
for h in d["at_risk"]:
    assert sorted(h["features"]) == F, h["features"]
    assert h["bias_lp"] > 0, h["bias_lp"]          # dO < 0 and O_lp < O_hp: delta_lp > delta_hp
    # bf16-torch rounds P-bar, the tile P-bar V sum, O-bar and O in a chain, so no single stage
    # removes the bias and the smallest removing set is not unique (pv+oacc+o, scores+pbar-pv+l,
    # ... depending on the data); it must include a stage of the P-bar V / O-bar / O chain.
    assert h["culprit"] != "none", h
    assert set(h["culprit"].split("+")) & {"pbar-pv", "pv", "oacc", "l", "o"}, h["culprit"]
    assert abs(h["culprit_ratio"]) <= d["removed_frac"]
    # other removing sets of the same size, smallest |ratio| first, none better than the culprit
    alts = h["culprit_alternatives"]
    size = len(h["culprit"].split("+"))
    for a in alts:
        assert len(a["stage"].split("+")) == size and a["stage"] != h["culprit"], (h["culprit"], a)
        assert abs(h["culprit_ratio"]) <= abs(a["bias_ratio"]) <= d["removed_frac"], (h["culprit_ratio"], a)
    assert [abs(a["bias_ratio"]) for a in alts] == sorted(abs(a["bias_ratio"]) for a in alts)
    assert abs(h["delta_src_ratio"]) < 0.01, h["delta_src_ratio"]
    e = h["event"]
    assert e["found"] and e["pbar"] == 1.0 and e["error"] < 0 and e["feature"] in F, e
    assert math.isfinite(h["stable_ratio"]) and len(h["beta_ratios"]) == len(d["betas"])
    # the planted heads' tied rows share PK and the biased coefficients add up along it
    assert h["verdict"] == "accumulates" and h["accum_gain"] >= 2.0, (h["verdict"], h["accum_gain"])
PYEOF

# Every key of summary.json is documented in docs/FORMAT.md section 3.
if "$PY" - "$tmp/d/summary.json" "$TSC_SRC/docs/FORMAT.md" <<'PYEOF'; then ok; else bad "undocumented summary.json keys"; fi
import sys, json
doc = open(sys.argv[2], encoding="utf-8").read()
sec = doc[doc.index("## 3."):]
sec = sec[:sec.index("\n## ", 4)] if "\n## " in sec[4:] else sec
keys = set()
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            keys.add(k)
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(json.load(open(sys.argv[1])))
missing = sorted(k for k in keys if "`%s`" % k not in sec)
print("undocumented:", missing)
assert not missing
PYEOF

# fp8-fa3 rounds the BF16 dump's Q, K, V to E4M3: those inputs are substitution candidates, and the
# E4M3 quantisation of V is in every culprit set (the planted V values are not E4M3 numbers). Its replay
# does not reproduce the BF16 dump's O, so diagnose says the preset is wrong and exits 3.
"$TSC" diagnose "$tmp/p.h5" -o "$tmp/f8" -q --lp fp8-fa3 --max-steps 2 > "$tmp/f8.txt"; rc=$?
[ $rc -eq 3 ] && grep -q "^the capture or the preset is wrong: replay under fp8-fa3" "$tmp/f8.txt" && ok || bad "fp8-fa3 exit $rc"
if "$PY" - "$tmp/f8/summary.json" <<'PYEOF'; then ok; else bad "fp8-fa3 culprit"; fi
import sys, json
d = json.load(open(sys.argv[1]))["diagnosis"]
assert d["n_at_risk"] >= 1
for h in d["at_risk"]:
    stages = [x["stage"] for x in h["substitutions"]]
    assert {"q", "k", "v"} <= set(stages), stages
    assert "v" in h["culprit"].split("+") and abs(h["culprit_ratio"]) <= d["removed_frac"], (h["culprit"], h["culprit_ratio"])
PYEOF
# bf16-torch on the BF16 dump: the inputs are not narrowed, so they are not replayed
if "$PY" - "$tmp/d/summary.json" <<'PYEOF'; then ok; else bad "bf16 inputs replayed"; fi
import sys, json
for h in json.load(open(sys.argv[1]))["diagnosis"]["at_risk"]:
    assert not {"q", "k", "v"} & {x["stage"] for x in h["substitutions"]}, h["substitutions"]
PYEOF

# One head examined on two threads: the spare thread replays its substitution sets and fixes beside
# it (bias_many); the diagnosis is the one thread's, byte for byte (the same --run-id).
for t in 1 2; do
    OMP_NUM_THREADS=$t "$TSC" diagnose "$tmp/p.h5" -o "$tmp/t$t" -q --max-steps 2 --max-heads 1 \
        --run-id 0123456789abcdef0123456789abcdef > /dev/null || bad "diagnose on $t threads"
done
cmp -s "$tmp/t1/summary.json" "$tmp/t2/summary.json" && grep -q '"culprit": "[a-z]' "$tmp/t1/summary.json" \
    && ok || bad "one head on 1 and 2 threads: $(cmp "$tmp/t1/summary.json" "$tmp/t2/summary.json")"

# Inputs stored in FP32 whose values are all BF16 numbers (BF16 tensors saved in FP32, then imported):
# bf16-torch's rounding of them is the identity, so they are no substitution candidates (each would
# replay lp itself, and pairs and triples grow with the candidates); a q that is not BF16-valued is.
"$PY" - "$tmp" <<'PYEOF' || bad "npz"
import sys
import numpy as np
rng = np.random.default_rng(5)
for name, exact_q in (("a", True), ("b", False)):
    t = {}
    for nm, h in (("q", 2), ("k", 1), ("v", 1), ("do", 2)):
        x = rng.standard_normal((1, h, 256, 64), dtype=np.float32)
        if nm != "q" or exact_q:
            x = (x.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
        t[nm] = x
    np.savez("%s/s%s.npz" % (sys.argv[1], name), **t)
PYEOF
for n in a b; do
    TSC_PYTHON=$PY "$TSC" import "$tmp/s$n.npz" -o "$tmp/s$n.h5" --policy bf16-torch > /dev/null &&
        "$TSC" diagnose "$tmp/s$n.h5" -o "$tmp/ds$n" -q --alpha 1 --min-ulp 0 --max-heads 1 > /dev/null ||
        bad "import and diagnose $n"
done
if "$PY" - "$tmp/dsa/summary.json" "$tmp/dsb/summary.json" <<'PYEOF'; then ok; else bad "exact inputs replayed"; fi
import sys, json
st = [[x["stage"] for x in json.load(open(f))["diagnosis"]["at_risk"][0]["substitutions"]] for f in sys.argv[1:]]
assert not {"q", "k", "v"} & set(st[0]) and "scores" in st[0], st[0]
assert "q" in st[1] and not {"k", "v"} & set(st[1]), st[1]
PYEOF
# Random inputs carry no bias. With q not BF16-valued (b), B(lp) of the head opened to examination by
# --alpha 1 --min-ulp 0 is inside one standard error of 0: noise, so only single stages are replayed (no
# pair or triple: 9 + 36 + 84 replays would be 9). The planted heads' B stands out, and their search
# went as far as their culprit's size.
if "$PY" - "$tmp/dsb/summary.json" "$tmp/d/summary.json" <<'PYEOF'; then ok; else bad "search bound"; fi
import sys, json
for h in json.load(open(sys.argv[1]))["diagnosis"]["at_risk"]:
    assert abs(h["bias_lp"]) < h["bias_lp_se"], (h["bias_lp"], h["bias_lp_se"])
    assert h["search_size"] == 1 and h["culprit"] == "none", (h["search_size"], h["culprit"])
    assert len(h["substitutions"]) > 1 and all("+" not in x["stage"] for x in h["substitutions"]), h["substitutions"]
for h in json.load(open(sys.argv[2]))["diagnosis"]["at_risk"]:
    assert abs(h["bias_lp"]) >= h["bias_lp_se"], (h["bias_lp"], h["bias_lp_se"])
    assert h["search_size"] == len(h["culprit"].split("+")), (h["search_size"], h["culprit"])
PYEOF

"$TSC" synth -o "$tmp/n.h5" --steps 0:12 --layers 1 --no-plant --quiet || exit 1
"$TSC" diagnose "$tmp/n.h5" -o "$tmp/n" -q > "$tmp/n.txt"; rc=$?
[ $rc -eq 0 ] && grep -q "nothing at risk" "$tmp/n.txt" && ok || bad "no-plant: exit $rc, $(cat "$tmp/n.txt")"
"$TSC" diagnose "$tmp/p.h5" -o "$tmp/x" --betas 0.5 > /dev/null 2>&1; rc=$?; [ $rc -eq 2 ] && ok || bad "beta out of range: exit $rc"
"$TSC" diagnose "$tmp/nope.h5" -o "$tmp/x" -q > /dev/null 2>&1; rc=$?; [ $rc -eq 1 ] && ok || bad "missing dump: exit $rc"
finish
