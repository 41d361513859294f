#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# test_kernels: `tilescope kernels`, the per-kernel bias table (analyze/tsc_kernels.h).
#  - the built-in input: every preset but fp64 once, in preset order; the paper's kernel (bf16-torch) has its most
#    biased feature on a planted (head, feature) with t < -5, a rounding event in every tied row with P-bar = 1,
#    and none under +stable, which also removes every P-bar = 1; kernels that accumulate O-bar in FP32 have no
#    rounding event; the FP8 kernel with the 2^8 offset has no P-bar = 1; +stable is refused (with the reason)
#    where the policy cannot take it;
#  - two runs print the same bytes (stable output), and docs/KERNELS.md holds exactly `--markdown`'s output;
#  - a dump given (synth tiny, with dO): the same keys, counts from the dump's geometry; --policy and
#    --no-stable; usage errors exit 2, a missing file or a dump without q exits 1 naming the file.
. "$(dirname "$0")/lib.sh"
[ -n "${TSC:-}" ] && [ -x "$TSC" ] || { echo "SKIP: \$TSC not set"; exit 77; }
py=$(find_py h5py numpy) || { echo "SKIP: no python3 with h5py and numpy"; exit 77; }
src=$(cd "$(dirname "$0")/../.." && pwd)
cd "$tmp"

"$TSC" kernels --json -q >k1.json 2>err.txt; ok test $? -eq 0
"$TSC" kernels --json -q >k2.json 2>err.txt; ok test $? -eq 0
ok cmp -s k1.json k2.json
ok "$py" - k1.json <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
names = [k["policy"] for k in r["kernels"]]
presets = ["fp32", "bf16-fa2", "bf16-torch", "fp16-fa2", "fp8-fa3", "fp16-torch", "bf16-eager-cpu",
           "bf16-eager-cuda", "fp16-eager-cuda", "bf16-sdpa-math", "fp16-sdpa-math", "bf16-flash-attn2",
           "bf16-sdpa-flash", "bf16-fa3", "fp8-fa3-scaled", "bf16-fa4", "fp16-triton", "e5m2-triton", "bf16-flex",
           "bf16-flex-prescale", "bf16-sdpa-mem-efficient", "bf16-sdpa-cpu-flash"]
assert names == presets, names
assert r["seq_len"] == 256 and r["head_dim"] == 64 and r["heads"] == 8 and r["causal"] and r["has_do"], r
by = {k["policy"]: k for k in r["kernels"]}
t = by["bf16-torch"]
w = t["worst_feature"]
# the planted heads and features of synth llama-gqa (tilescope info: planted_heads 1,2, planted_features 20,57)
assert w["head"] in (1, 2) and w["feature"] in (20, 57) and w["t"] < -5 and w["mean_ulp"] < -0.1, w
assert t["tied_rows"] > 100 and t["pbar_one_rows"] == t["tied_rows"] and t["event_rows"] == t["pbar_one_rows"], t
s = t["stable"]
assert s["pbar_one_rows"] == 0 and s["event_rows"] == 0 and s["tied_rows"] == t["tied_rows"], s
assert abs(s["worst_feature"]["mean_ulp"]) < abs(w["mean_ulp"]), (s["worst_feature"], w)
for name in ("bf16-fa2", "bf16-flash-attn2", "bf16-sdpa-flash", "bf16-fa3", "bf16-fa4", "fp32", "bf16-sdpa-math",
             "bf16-flex", "bf16-sdpa-mem-efficient"):
    k = by[name]
    assert k["event_rows"] == 0, (name, k)           # O-bar accumulated in FP32: no rounding event
    assert abs(k["worst_feature"]["t"]) < 5, (name, k["worst_feature"])
assert by["fp8-fa3-scaled"]["pbar_one_rows"] == 0 and by["fp8-fa3"]["pbar_one_rows"] > 0
assert "lazy-rescale" in by["bf16-fa4"]["stable"]["refused"], by["bf16-fa4"]["stable"]
assert "materialized" in by["bf16-eager-cpu"]["stable"]["refused"]
for k in r["kernels"]:
    assert k["o_bias"]["n"] == 8 * 256, (k["policy"], k["o_bias"])
PYEOF

# the page's table is the command's output
"$TSC" kernels --markdown -q >k.md; ok test $? -eq 0
ok "$py" - "$src/docs/KERNELS.md" k.md <<'PYEOF'
import sys
doc, out = open(sys.argv[1]).read(), open(sys.argv[2]).read()
b, e = "<!-- tilescope kernels --markdown: begin -->\n", "<!-- tilescope kernels --markdown: end -->"
assert b in doc and e in doc
assert doc.split(b, 1)[1].split(e, 1)[0] == out, "docs/KERNELS.md is not the output of tilescope kernels --markdown"
PYEOF
"$TSC" kernels -q >k.txt; ok test $? -eq 0
ok grep -q "^bf16-torch " k.txt
ok grep -q "largest |t| of 512" k.txt

# a dump given
"$TSC" synth -o tiny.h5 --steps 0:2 --quiet || bad "synth"
"$TSC" kernels tiny.h5 --policy bf16-torch --policy bf16-flash-attn2 --json -q >t.json 2>err.txt; ok test $? -eq 0
ok "$py" - t.json <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert [k["policy"] for k in r["kernels"]] == ["bf16-torch", "bf16-flash-attn2"]
assert r["steps"] == 1 and r["first_step"] == 0 and r["pairs"] == 2 and r["heads"] == 4 and r["seq_len"] == 64
assert r["kernels"][0]["o_bias"]["n"] == 2 * 4 * 64 and "delta_bias" in r["kernels"][0]
PYEOF
"$TSC" kernels tiny.h5 --policy bf16-torch --no-stable --json -q >n.json; ok test $? -eq 0
ok "$py" -c "import json; assert json.load(open('n.json'))['kernels'][0]['stable'] is None"

# errors
"$TSC" kernels --json --markdown 2>err.txt; ok test $? -eq 2
"$TSC" kernels --policy nonsense 2>err.txt; ok test $? -eq 2
ok grep -q "valid presets" err.txt
"$TSC" kernels --policy fp64 -q 2>err.txt; ok test $? -eq 1
ok grep -q "computes in FP64" err.txt
"$TSC" kernels missing.h5 -q 2>err.txt; ok test $? -eq 1
ok grep -q "missing.h5" err.txt
"$py" - <<'PYEOF'
import h5py
with h5py.File("tiny.h5", "r") as a, h5py.File("noq.h5", "w") as b:
    for k, v in a.attrs.items(): b.attrs[k] = v
    def cp(name, obj):
        if isinstance(obj, h5py.Dataset) and not name.endswith("/q"):
            a.copy(obj, b, name=name)
    a.visititems(cp)
PYEOF
"$TSC" kernels noq.h5 -q 2>err.txt; ok test $? -eq 1
ok grep -q "noq.h5" err.txt
finish
