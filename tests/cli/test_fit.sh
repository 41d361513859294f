#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# test_fit: `tilescope fit` and the fit line of diagnose and the report.
#  - a dump whose o was computed under preset P (synth --policy P) ranks P first with 100%
#    bit-identical O, over every B*H*T*D element of every layer of the first step, for five presets
#    and for grouped-query attention (llama-gqa);
#  - o perturbed with h5py (lowest bf16 mantissa bit flipped, some elements set to NaN) shows the
#    exact lower shares, max ULP 1 and the NaN count that numpy computes from the changes;
#  - a dump without o: exit 1 and the exact message; usage errors exit 2;
#  - diagnose prints and stores the fit of its lp, and warns (text, summary.json, report) when the
#    dump's recorded policy is not the one its o was computed under.
. "$(dirname "$0")/lib.sh"
[ -n "${TSC:-}" ] && [ -x "$TSC" ] || { echo "SKIP: \$TSC not set"; exit 77; }
py=$(find_py h5py numpy) || { echo "SKIP: no python3 with h5py and numpy"; exit 77; }
cd "$tmp"

# usage errors
"$TSC" fit 2>err.txt; ok test $? -eq 2
"$TSC" fit x.h5 --policy bf16 2>err.txt; ok test $? -eq 2
ok grep -q "valid presets" err.txt
"$TSC" fit x.h5 --bogus 2>err.txt; ok test $? -eq 2
"$TSC" fit missing.h5 2>err.txt; ok test $? -eq 1
ok grep -q "missing.h5" err.txt

# each preset's own dump: that preset first, 100% identical, n = B*H*T*D*layers (tiny: 1*4*64*16*2)
for p in fp32 bf16-fa2 bf16-torch fp16-fa2 fp8-fa3; do
  "$TSC" synth -o "$p.h5" --policy "$p" --steps 0:2 --quiet || bad "synth $p"
  "$TSC" fit "$p.h5" --json >"$p.json" 2>err.txt; ok test $? -eq 0
  ok "$py" - "$p" "$p.json" <<'EOF'
import json, sys
want, r = sys.argv[1], json.load(open(sys.argv[2]))
top = r["policies"][0]
assert top["policy"] == want and top["rank"] == 1, (want, top["policy"])
o = top["o"]
assert o["n"] == 1 * 4 * 64 * 16 * 2 and o["n_identical"] == o["n"] and o["identical"] == 1.0, o
assert o["max_ulp"] == 0 and o["n_nonfinite"] == 0, o
assert r["steps"] == [0] and r["pairs"] == 2 and r["dtype"] == {"o": "bf16"} and r["warning"] is False
assert [p["rank"] for p in r["policies"]] == list(range(1, len(r["policies"]) + 1))
# every preset is checked (later presets too), each once; the other five of these fall short of 100%
six = {"fp64", "fp32", "bf16-fa2", "bf16-torch", "fp16-fa2", "fp8-fa3"}
names = [p["policy"] for p in r["policies"]]
assert len(names) == len(set(names)) >= 6 and six <= set(names)
assert all(p["o"]["identical"] < 1 for p in r["policies"] if p["policy"] in six - {want})
EOF
done
# the default tiny dump records tiles of 16 < T: tiled presets get them, materialized-softmax
# presets (untiled kernels) keep one tile of T instead of failing on a split row
"$TSC" synth -o tiled.h5 --quiet || bad "synth tiled"
"$TSC" fit tiled.h5 --json >tiled.json 2>err.txt; ok test $? -eq 0
ok "$py" - tiled.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
byname = {p["policy"]: p for p in r["policies"]}
assert r["tiles"] == {"q": 16, "k": 16}, r
assert byname["bf16-torch"]["canonical"] == "bf16-torch+tile:q=16,k=16" and byname["bf16-torch"]["rank"] == 1
assert byname["bf16-torch"]["o"]["identical"] == 1.0
for p in ("bf16-eager-cpu", "bf16-eager-cuda", "bf16-sdpa-math"):
    assert byname[p]["canonical"] == p and byname[p]["o"]["n"] > 0, byname[p]
EOF
"$TSC" fit bf16-torch.h5 >text.txt; ok test $? -eq 0
ok grep -q "^best fit: bf16-torch (O bit-identical on 100% of elements)$" text.txt
ok grep -q "^   1  bf16-torch  " text.txt
ok test "$(grep -c warning text.txt)" = 0

# grouped-query attention (8 heads on 2 kv heads), one layer, and a partial group
"$TSC" synth -o gqa.h5 --shape llama-gqa --steps 0 --layers 1 --quiet || bad "synth gqa"
"$TSC" fit gqa.h5 --policy bf16-torch --policy fp32 --json >gqa.json; ok test $? -eq 0
"$TSC" fit gqa.h5 --policy bf16-torch --heads 1,6 --json >gqa2.json; ok test $? -eq 0
ok "$py" - <<'EOF'
import json
r = json.load(open("gqa.json"))["policies"]
assert r[0]["policy"] == "bf16-torch" and r[0]["o"]["n_identical"] == 8 * 256 * 64 == r[0]["o"]["n"], r[0]
assert r[1]["o"]["identical"] < 0.99
r2 = json.load(open("gqa2.json"))
assert r2["heads"] == 2 and r2["policies"][0]["o"]["n"] == 2 * 256 * 64 == r2["policies"][0]["o"]["n_identical"]
EOF

# perturbed o: flip the lowest bf16 mantissa bit of 37 elements of step 0 layer 1, NaN in 3 others
cp bf16-torch.h5 pert.h5
ok "$py" - <<'EOF'
import h5py, numpy as np
with h5py.File("pert.h5", "r+") as f:
    ds = f["step_00000000/layer_001/o"]
    o = ds.astype("float32")[()]
    new = o.copy()
    flat = new.reshape(-1)
    rng = np.random.default_rng(7)
    idx = rng.choice(flat.size, 40, replace=False)
    bits = flat.view(np.uint32)
    bits[idx[:37]] ^= np.uint32(1 << 16)
    flat[idx[37:]] = np.nan
    ds[...] = new
    back = ds.astype("float32")[()]
    changed = int(np.sum(~((back == o) & (np.signbit(back) == np.signbit(o)))))
    nans = int(np.sum(np.isnan(back)))
    open("expect.txt", "w").write(f"{changed} {nans}\n")
EOF
read changed nans <expect.txt
ok test "$changed" = 40 -a "$nans" = 3
"$TSC" fit pert.h5 --policy bf16-torch --policy fp32 --json >pert.json; ok test $? -eq 0
ok "$py" - "$changed" "$nans" <<'EOF'
import json, sys
changed, nans = int(sys.argv[1]), int(sys.argv[2])
p = json.load(open("pert.json"))["policies"][0]
o = p["o"]
n = 8192
assert p["policy"] == "bf16-torch" and o["n"] == n, p
assert o["n_identical"] == n - changed and abs(o["identical"] - (n - changed) / n) < 1e-15, o
assert o["n_within1"] == n - nans and o["n_nonfinite"] == nans and o["max_ulp"] == 1.0, o
EOF
"$TSC" fit pert.h5 --policy bf16-torch >pert.txt
# 8152 of 8192 = 99.5117...%: printed rounded down
ok grep -q "^best fit: bf16-torch (O bit-identical on 99.51% of elements)$" pert.txt
ok grep -q "(3 O elements non-finite on one side)" pert.txt
# --steps 1: step 1 is untouched; --all-steps: both steps, the 40 changes among 2 * 8192
"$TSC" fit pert.h5 --policy bf16-torch --steps 1 --json >s1.json
"$TSC" fit pert.h5 --policy bf16-torch --all-steps --json >all.json
ok "$py" - <<'EOF'
import json
s1 = json.load(open("s1.json")); a = json.load(open("all.json"))
assert s1["steps"] == [1] and s1["policies"][0]["o"]["identical"] == 1.0
assert a["steps"] == [0, 1] and a["policies"][0]["o"]["n"] == 16384 and a["policies"][0]["o"]["n_identical"] == 16344
EOF

# a dump without o
cp bf16-torch.h5 noo.h5
ok "$py" - <<'EOF'
import h5py
with h5py.File("noo.h5", "r+") as f:
    for s in [k for k in f if k.startswith("step_")]:
        for l in [k for k in f[s] if k.startswith("layer_")]:
            del f[s][l]["o"]
EOF
"$TSC" fit noo.h5 >out.txt 2>err.txt; ok test $? -eq 1
ok grep -qxF "tilescope fit: noo.h5: step 0 layer 0: no dataset 'o' (the captured O the fit compares with)" err.txt

# diagnose: the fit of its lp, printed and in summary.json, and in the report
"$TSC" diagnose bf16-torch.h5 -o d1 -q >d1.txt; ok test $? -eq 0
ok grep -qxF "replay under bf16-torch reproduces the captured O on 100% of elements" d1.txt
ok test "$(grep -c '^warning' d1.txt)" = 0
ok "$py" - <<'EOF'
import json
f = json.load(open("d1/summary.json"))["diagnosis"]["fit"]
assert f["policy"] == "bf16-torch" and f["checked"] is True and f["step"] == 0, f
assert f["o_identical"] == 1.0 and f["n"] == 8192 and f["warning"] is False and f["note"] is None, f
EOF
# o computed under fp32, recorded policy bf16-torch: the diagnosis replays the wrong kernel
cp fp32.h5 wrong.h5
ok "$py" - <<'EOF'
import h5py
with h5py.File("wrong.h5", "r+") as f:
    f.attrs["policy"] = "bf16-torch"
EOF
# ... so it ends in "the capture or the preset is wrong" with the likely causes, never "nothing at risk", exit 3
"$TSC" diagnose wrong.h5 -o d2 -q >d2.txt; ok test $? -eq 3
ok grep -q "^the capture or the preset is wrong: replay under bf16-torch reproduces .* of the captured O bit for bit" d2.txt
ok grep -q "Likely causes: .*tilescope fit wrong.h5.*expanded by tiling.*softmax_scale" d2.txt
ok test "$(grep -c 'nothing at risk' d2.txt)" = 0
ok test "$(tail -n 1 d2.txt | cut -c1-34)" = "the capture or the preset is wrong"
"$TSC" diagnose wrong.h5 -o d2j --json -q >d2.json 2>d2.err; ok test $? -eq 3
ok grep -q "^the capture or the preset is wrong" d2.err
ok "$py" -c 'import json; assert json.load(open("d2.json"))["diagnosis"]["fit"]["warning"] is True'
"$TSC" fit wrong.h5 --policy bf16-torch --keep-tiles --json >wrong.json
pc=$("$py" -c 'import json, math; o = json.load(open("wrong.json"))["policies"][0]["o"]
print("%.2f%%" % (math.floor(o["n_identical"] * 10000 // o["n"]) / 100))')
ok grep -qxF "replay under bf16-torch reproduces the captured O on $pc of elements" d2.txt
ok grep -qxF "warning: below 99%: the replay does not reproduce this run, so the diagnosis may not describe this run" d2.txt
ok "$py" - <<'EOF'
import json
f = json.load(open("d2/summary.json"))["diagnosis"]["fit"]
o = json.load(open("wrong.json"))["policies"][0]["o"]
assert f["checked"] is True and f["warning"] is True and f["o_identical"] == o["identical"] < 0.99, (f, o)
assert f["n"] == o["n"] and f["o_max_ulp"] == o["max_ulp"]
EOF
"$TSC" report d2 -o d2/r.pdf >/dev/null 2>&1; ok test $? -eq 0
ok grep -qF "Fit: replay under bf16-torch reproduces the captured O on $pc of elements." d2/r.html
ok grep -qF "the diagnosis may not describe this run" d2/r.html
"$TSC" report d1 -o d1/r.pdf >/dev/null 2>&1; ok test $? -eq 0
ok grep -qF "Fit: replay under bf16-torch reproduces the captured O on 100% of elements." d1/r.html
ok test "$(grep -c 'may not describe' d1/r.html)" = 0
# no o: diagnose still runs and says the fit could not be checked
"$TSC" diagnose noo.h5 -o d3 -q >d3.txt; ok test $? -eq 0
ok grep -qxF "no captured O: the fit of the replay could not be checked" d3.txt
"$TSC" report d3 -o d3/r.pdf >/dev/null 2>&1; ok test $? -eq 0
ok grep -qF "Fit: no captured O: the fit of the replay could not be checked." d3/r.html
ok "$py" - <<'EOF'
import json
f = json.load(open("d3/summary.json"))["diagnosis"]["fit"]
assert f["checked"] is False and f["warning"] is True and "no dataset 'o'" in f["note"], f
EOF
finish
