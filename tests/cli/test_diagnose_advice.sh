#!/bin/bash
# ctest-labels: slow (over 5 s on 2 cores)
# The advice of `tilescope diagnose` holds up between runs of the same data: a llama-gqa and a
# GPT-2-small-shaped synth (planted layer only) written with 1 step and with 2 steps (same seed:
# the 2-step dump holds the 1-step dump's step 0 and one more) give every head examined in both the
# same recommended fix; the numbers in the sentences keep the sign of summary.json's ratios ("-42% left",
# "reverses the bias to -42% of its size", never "42%" for -0.42); a beta outside the studied 2-8 is
# never recommended; the stage-set jargon is kept out of the recommendation (stage_note, appendix).
. "$(dirname "$0")/lib.sh"
PY=$(find_py numpy) || { echo "skip: no python3 with numpy"; exit 77; }

for shape in llama-gqa gpt2-small; do
    for n in 1 2; do
        "$TSC" synth -o "$tmp/$shape$n.h5" --shape "$shape" --layers 1 --steps "0:$n" --seed 1 --quiet || bad "synth $shape $n"
        "$TSC" diagnose "$tmp/$shape$n.h5" -o "$tmp/$shape$n" -q --max-heads 3 > "$tmp/$shape$n.txt" || bad "diagnose $shape $n"
    done
    if "$PY" - "$tmp/${shape}1/summary.json" "$tmp/${shape}2/summary.json" "$tmp/${shape}1.txt" <<'PYEOF'; then ok; else bad "$shape advice"; fi
import json, re, sys
a, b = (json.load(open(p))["diagnosis"] for p in sys.argv[1:3])
text = open(sys.argv[3]).read()
def rec(d):
    return {(h["layer"], h["head"]): h for h in d["at_risk"] if h["fixes"]}
ra, rb = rec(a), rec(b)
common = set(ra) & set(rb)  # --max-heads examines the top heads by risk, which may differ
assert common, (sorted(ra), sorted(rb))
def first_fix(h):  # the fix the sentence recommends: the text up to the effect
    return h["recommendation"].split(":")[0]
for key in sorted(common):
    h = ra[key]
    assert first_fix(h) == first_fix(rb[key]), (key, h["recommendation"], rb[key]["recommendation"])
    assert first_fix(h).startswith("switch on the "), h["recommendation"]
    for g in (h, rb[key]):
        # signs survive: every percentage in the sentence is signed, and the recommended fix's
        # effect is its ratio with its sign
        r = g["recommendation"]
        assert not re.search(r"(?<![+\-0-9.])\d+%", r.replace("less than 1%", "")), r
        f = next(f for f in g["fixes"] if r.startswith("switch on the " + f["fix"]))
        assert [x["recommended"] for x in g["fixes"]].count(True) == 1 and f["recommended"], g["fixes"]
        pct = 100 * f["bias_ratio"]
        assert abs(pct) < 0.5 and "less than 1%" in r or ("%+.0f%%" % pct) in r, (r, f)
        assert "beta 1.5" not in r and "hold '" not in r and ("+" not in g["culprit"] or g["culprit"] not in r) and g["stage_note"], r
        for s in g["beta_sweep"]:
            assert s["in_studied_range"] == (2 <= s["beta"] <= 8), s
            assert ("outside the studied range" in s["what"]) == (not s["in_studied_range"]), s["what"]
        # the stable fix reversing the bias is said as a reversal, with its sign
        st = g["fixes"][0]
        assert st["modifier"] == "+stable:beta=2" and st["bias_ratio"] == g["stable_ratio"], st
# the printed line is the summary's sentence
for h in ra.values():
    assert ("recommendation: " + h["recommendation"]) in text, h["recommendation"]
assert "what the beta sweep did: " in text
PYEOF
done
finish
