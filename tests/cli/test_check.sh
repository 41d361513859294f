#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# test_check: `tilescope check` end to end (the bounds themselves: tests/analyze/test_check.c).
#  - a synthetic dump (o and lse under bf16-torch, the default) is consistent: exit 0, every head "ok";
#  - o of rows 5 and 40 of (step 0, layer 1, head 2) scaled by 1.3 with h5py (lse untouched): exit 4,
#    that head alone "O inconsistent", exactly those rows, their query tiles (16-row tiles: 0 and 2);
#  - lse of (layer 0, head 1, row 9) plus 0.5: exit 4, "LSE inconsistent", row 9;
#  - the reported O and LSE errors equal numpy's float64 recomputation;
#  - a NaN in o of (layer 0, head 3, row 33): that tile (2) of o named, "non-finite";
#  - diagnose prints the check, stores it as summary.json diagnosis.check and the report shows it;
#  - without lse: exit 0, "absent (O checked alone)"; without o: exit 1 naming 'o'; a missing file: exit 1
#    naming it (likewise an empty file, a text file, a directory); usage errors: exit 2.
. "$(dirname "$0")/lib.sh"
[ -n "${TSC:-}" ] && [ -x "$TSC" ] || { echo "SKIP: \$TSC not set"; exit 77; }
py=$(find_py h5py numpy) || { echo "SKIP: no python3 with h5py and numpy"; exit 77; }
cd "$tmp"

expect 2 "no DUMP given" "$TSC" check
expect 2 "unknown option '--bogus'" "$TSC" check x.h5 --bogus
expect 1 "missing.h5" "$TSC" check missing.h5
: > empty.h5; echo "not hdf5" > text.h5; mkdir dir.h5
for f in empty.h5 text.h5 dir.h5; do expect 1 "$f" "$TSC" check "$f" -q; done

"$TSC" synth -o s.h5 --steps 0 --quiet || bad "synth"
"$TSC" check s.h5 -q >ok.txt; ok test $? -eq 0
ok grep -q "^consistent: 8 heads, 512 rows" ok.txt
ok test "$(grep -cE '^ +0 +[01] +[0-3]  (ok|saturated) ' ok.txt)" = 8
ok grep -q "^    saturated rows (1): b0 t1 (1-Pmax [0-9.e-]*)$" ok.txt
"$TSC" check s.h5 --layers 1 --heads 2 --json -q >ok.json; ok test $? -eq 0
ok "$py" - ok.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["consistent"] is True and r["heads"] == 1 and r["rows"] == 64 and r["pairs"] == 1, r
assert r["formats"] == {"qkv": "bf16", "o": "bf16", "lse": "fp32", "p": "bf16", "u_in": 2**-8, "u_s": 2**-8,
                        "u_o": 2**-8, "u_lse": 2**-24}, r["formats"]
assert r["tiles"] == {"q": 16, "k": 16, "source": "the dump's tile_q, tile_k"}, r["tiles"]
h = r["per_head"][0]
assert (h["step"], h["layer"], h["head"], h["verdict"]) == (0, 1, 2, "ok") and 0 < h["o_worst_ratio"] < 1, h
PY

cp s.h5 bad.h5
ok "$py" - <<'PY'
import h5py, numpy as np
def bf16(a):  # round to nearest even, as docs/FORMAT.md section 1.4 shows
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
with h5py.File("bad.h5", "r+") as f:
    o = f["step_00000000/layer_001/o"]
    x = o.astype("float32")[()]
    x[0, 2, [5, 40], :] *= 1.3
    o.id.write(h5py.h5s.ALL, h5py.h5s.ALL, bf16(x), mtype=o.id.get_type())
    l = f["step_00000000/layer_000/lse"]
    y = l[()]
    y[0, 1, 9] += 0.5
    l[...] = y
    o0 = f["step_00000000/layer_000/o"]
    z = o0.astype("float32")[()]
    z[0, 3, 33, 4] = np.nan
    b = bf16(z); b[0, 3, 33, 4] = 0x7FC0
    o0.id.write(h5py.h5s.ALL, h5py.h5s.ALL, b, mtype=o0.id.get_type())
PY
"$TSC" check bad.h5 -q >bad.txt; ok test $? -eq 4
ok grep -qE "^ +0 +1 +2  O inconsistent " bad.txt
ok grep -q "^    O rows (2): b0 t[45]0* (x" bad.txt
ok grep -q "^    O rows by query tile: o b0 tile [02] (1) o b0 tile [02] (1)$" bad.txt
ok grep -qE "^ +0 +0 +1  LSE inconsistent " bad.txt
ok grep -q "^    LSE rows (1): b0 t9 (x" bad.txt
ok grep -qE "^ +0 +0 +3  non-finite " bad.txt
ok grep -q "^    non-finite by tile: o b0 tile 2 (1)$" bad.txt
ok test "$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+  (ok|saturated) ' bad.txt)" = 5
ok grep -q "^inconsistent: 3 of 8 heads (O in 1, 2 rows; LSE in 1, 1 rows; non-finite in 1)$" bad.txt
"$TSC" check bad.h5 --json -q >bad.json; ok test $? -eq 4
ok "$py" - bad.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
by = {(h["layer"], h["head"]): h for h in r["per_head"]}
assert r["consistent"] is False and r["inconsistent_heads"] == 3 and r["o_bad_rows"] == 2 and r["lse_bad_rows"] == 1
h = by[(1, 2)]
assert h["verdict"] == "O inconsistent" and sorted(x["row"] for x in h["o_rows"]) == [5, 40], h
assert sorted(t["tile"] for t in h["o_tiles"]) == [0, 2] and all(x["ratio"] > 1 for x in h["o_rows"])
h = by[(0, 1)]
assert h["verdict"] == "LSE inconsistent" and [x["row"] for x in h["lse_rows"]] == [9], h
assert abs(h["lse_rows"][0]["error"] + 0.5) < 1e-2  # the planted 0.5 and bf16-torch's own LSE error
h = by[(0, 3)]
assert h["verdict"] == "non-finite" and h["nonfinite_tiles"] == [{"tensor": "o", "batch": 0, "tile": 2, "count": 1}]
assert h["nonfinite_rows"] == 1
PY
# the reference, recomputed independently with numpy in float64: the reported errors are its
ok "$py" - bad.json <<'PY'
import json, sys, h5py, numpy as np
r = json.load(open(sys.argv[1]))
by = {(h["layer"], h["head"]): h for h in r["per_head"]}
f = h5py.File("bad.h5", "r")
H, Hkv, a = f.attrs["n_head"], f.attrs["n_kv_head"], f.attrs["softmax_scale"]
def ref(L, h, t):
    g = f["step_00000000/layer_%03d" % L]
    q = g["q"].astype("float64")[0, h, t]
    k = g["k"].astype("float64")[0, h // (H // Hkv), : t + 1]
    v = g["v"].astype("float64")[0, h // (H // Hkv), : t + 1]
    s = a * (k @ q)
    lse = s.max() + np.log(np.exp(s - s.max()).sum())
    return lse, np.exp(s - lse) @ v, g
lse, _, g = ref(0, 1, 9)
e = by[(0, 1)]["lse_rows"][0]["error"]
assert abs(e - (lse - float(g["lse"][0, 1, 9]))) < 1e-9, (e, lse)
for x in by[(1, 2)]["o_rows"]:
    _, o_ref, g = ref(1, 2, x["row"])
    want = np.abs(g["o"].astype("float64")[0, 2, x["row"]] - o_ref).max()
    assert abs(x["error"] - want) <= 1e-9 * want, (x, want)
PY

# diagnose runs the check on its first step: printed, in summary.json's diagnosis.check, on the report's page 1
"$TSC" diagnose bad.h5 -o dg -q >dg.txt; ok test $? -eq 0
ok grep -q "^check of O and LSE (step 0): inconsistent: 3 of 8 heads (O in 1, 2 rows; LSE in 1, 1 rows; non-finite in 1)$" dg.txt
ok "$py" - dg/summary.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["diagnosis"]["check"]
assert c["checked"] is True and c["first_step"] == 0 and c["steps"] == 1 and c["consistent"] is False, c
assert c["inconsistent_heads"] == 3 and c["o_bad_rows"] == 2 and c["lse_bad_rows"] == 1 and c["nonfinite"] == 1, c
assert [(h["layer"], h["head"], h["verdict"]) for h in c["inconsistent"]] == \
    [(0, 1, "LSE inconsistent"), (0, 3, "non-finite"), (1, 2, "O inconsistent")], c["inconsistent"]
PY
"$TSC" report dg -o rep.pdf -q; ok test $? -eq 0
ok grep -q "Consistency check of O and LSE (step 0): inconsistent: 3 of 8 heads" rep.html

# without lse: O alone; without o: exit 1
cp s.h5 nolse.h5
"$py" -c "import h5py; f = h5py.File('nolse.h5', 'r+'); [f['step_00000000/layer_%03d' % L].pop('lse') for L in (0, 1)]"
"$TSC" check nolse.h5 -q >nolse.txt; ok test $? -eq 0
ok grep -q "lse absent (O checked alone)" nolse.txt
ok grep -q "(no lse: O only)" nolse.txt
cp s.h5 noo.h5
"$py" -c "import h5py; f = h5py.File('noo.h5', 'r+'); f['step_00000000/layer_001'].pop('o')"
expect 1 "noo.h5: step 0 layer 1: no dataset 'o'" "$TSC" check noo.h5 -q
finish
