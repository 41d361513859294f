#!/usr/bin/env bash
# test_replay_nonfinite: a policy whose O overflows to NaN. One column of v in one head is set to
# 1000: fp8-fa3 rounds P-bar V into E4M3 (largest finite 448, no Inf), so O and delta hold NaN for
# every row of that head. replay --json must stay valid JSON (NaN written as null, never `nan`),
# count the non-finite elements, keep the errors over the finite elements, and the table must
# name the non-finite elements instead of showing a clean max.
. "$(dirname "$0")/lib.sh"
[ -n "${TSC:-}" ] && [ -x "$TSC" ] || { echo "SKIP: \$TSC not set"; exit 77; }
py=$(find_py h5py numpy) || { echo "SKIP: no python3 with h5py and numpy to craft the dump"; exit 77; }
cd "$tmp"

"$TSC" synth --shape tiny -o d.h5 --quiet || { echo "FAIL: synth"; exit 1; }
# v is bf16 on disk (docs/FORMAT.md 1.4): h5py converts float32 to the stored type on write;
# 1000 is exact in bf16.
"$py" - <<'PY' || { echo "FAIL: crafting the dump"; exit 1; }
import h5py
with h5py.File("d.h5", "a") as f:
    for s in [k for k in f if k.startswith("step_")]:
        for l in f[s]:
            ds = f[s][l]["v"]
            a = ds.astype("float32")[()]
            a[0, 1, :, 5] = 1000.0
            ds[...] = a
    assert f["step_00000000/layer_000/v"].astype("float32")[0, 1, 7, 5] == 1000.0
PY

"$TSC" replay d.h5 --policy fp32 --policy fp8-fa3 --steps 0 --layers 0 --json -o r.h5 >j.json 2>err.txt
ok test $? -eq 0
# strict JSON: NaN/Infinity literals are an error, not a number
"$py" - <<'PY'
import json, sys
import h5py, numpy as np
def no_constants(name):
    raise ValueError("non-standard JSON constant %s" % name)
fails = 0
def check(cond, msg):
    global fails
    if not cond:
        print("FAIL:", msg); fails += 1
try:
    d = json.loads(open("j.json").read(), parse_constant=no_constants)
except ValueError as e:
    print("FAIL: replay --json is not valid JSON:", e); sys.exit(1)
ref, fp8 = d["policies"]
check(ref["reference"] and ref["o"]["n_nonfinite"] == 0, "the fp32 reference is finite")
# the expected numbers, computed here from the replay file itself
with h5py.File("r.h5", "r") as r:
    o0 = r["step_00000000/layer_000/policy_0/o"][()].astype("float64")
    o1 = r["step_00000000/layer_000/policy_1/o"][()].astype("float64")
    d1 = r["step_00000000/layer_000/policy_1/delta"][()]
    attr_nf = int(r["policy_1"].attrs["o_n_nonfinite"])
nf = int((~np.isfinite(o1)).sum())
both = np.isfinite(o1) & np.isfinite(o0)
err = np.abs(o1 - o0)[both]
check(nf > 0, "fp8-fa3's O should overflow to NaN in head 1 (got %d non-finite)" % nf)
check(fp8["o"]["n_nonfinite"] == nf, "o.n_nonfinite %s, the file holds %d" % (fp8["o"]["n_nonfinite"], nf))
check(attr_nf == nf, "policy_1 attribute o_n_nonfinite %d, expected %d" % (attr_nf, nf))
check(fp8["delta"]["n_nonfinite"] == int((~np.isfinite(d1)).sum()) > 0, "delta.n_nonfinite")
check(fp8["o"]["n"] == o1.size and fp8["o"]["n_compared"] == int(both.sum()), "o.n / o.n_compared")
check(fp8["o"]["max_abs"] == err.max(), "o.max_abs %r vs %r over the finite elements" % (fp8["o"]["max_abs"], err.max()))
check(abs(fp8["o"]["mean_abs"] - err.mean()) <= 1e-12 * err.mean(), "o.mean_abs over the finite elements")
check(d["n_nonfinite"] == fp8["o"]["n_nonfinite"] + fp8["delta"]["n_nonfinite"], "total n_nonfinite")
sys.exit(1 if fails else 0)
PY
ok test $? -eq 0

# the table: a non-finite column with the count, and a warning line naming the policy
"$TSC" replay d.h5 --policy fp32 --policy fp8-fa3 --steps 0 --layers 0 -o t.h5 >t.txt 2>err.txt
ok test $? -eq 0
ok grep -q "non-finite" t.txt
nf=$(awk '$1 == "fp8-fa3" {print $NF}' t.txt)
ok test "${nf:-0}" -gt 0
ok grep -q "^warning: fp8-fa3: O holds [1-9][0-9]* non-finite (NaN/Inf) elements" t.txt
# a finite policy gets no warning
"$TSC" replay d.h5 --policy fp32 --policy bf16-fa2 --steps 0 --layers 0 -o u.h5 >u.txt
ok test "$(grep -c '^warning' u.txt)" = 0
ok test "$(awk '$1 == "bf16-fa2" {print $NF}' u.txt)" = 0
finish
