#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# test_diff: `tilescope diff A B` end to end (docs/DIFF.md). Every expected number comes from numpy reading
# the stored bits with h5py, never from tilescope:
#  - two synth dumps of one seed: exit 0, every record bit-identical, the element count numpy counts;
#  - a copy with o of (step 0, layer 1, head 2) moved 1 ULP at (b0, t5, d3) and 3 ULP at (b0, t40, d7) and q
#    of (step 2, layer 0, head 3) 2 ULP at (b0, t10, d0): exit 3; the first differing element, both values
#    and bit patterns, max ULP, identical counts and the mean b - a equal numpy's (ULP distance from the
#    sign-magnitude order of the bit patterns); the totals over every dataset equal numpy's; --max-ulp 3:
#    exit 0; --max-ulp 2.5: exit 3 with one record beyond; a selection without the changed heads: exit 0;
#  - --json parses and holds every documented key; --html writes an offline page naming the changed
#    datasets and heads, which headless chromium loads with no console error;
#  - a NaN planted against a number counts as a non-finite mismatch (exit 3 whatever --max-ulp); NaN
#    against NaN (another payload) is identical;
#  - o stored as fp32 on one side (the bf16 values, one moved by a quarter of a bf16 ULP): ULPs of the
#    coarser format, 0.25;
#  - what one dump lacks (a step, a layer) is listed, not compared; a run of 2 data-parallel ranks equals
#    the one dump; k and v go by kv head under --heads (llama-gqa);
#  - missing, empty, non-HDF5 and truncated files: exit 1 naming the file; another geometry (T, heads):
#    exit 1 naming both files; usage errors: exit 2.
. "$(dirname "$0")/lib.sh"
[ -n "${TSC:-}" ] && [ -x "$TSC" ] || { echo "SKIP: \$TSC not set"; exit 77; }
py=$(find_py h5py numpy) || { echo "SKIP: no python3 with h5py and numpy"; exit 77; }
cd "$tmp" || exit 1
san() { ! grep -qE "Sanitizer|runtime error" "$@"; }

# usage
expect 2 "two dumps are needed" "$TSC" diff
expect 2 "two dumps are needed" "$TSC" diff a.h5
expect 2 "unexpected argument" "$TSC" diff a.h5 b.h5 c.h5
expect 2 "unknown option '--bogus'" "$TSC" diff a.h5 b.h5 --bogus
expect 2 "--max-ulp" "$TSC" diff a.h5 b.h5 --max-ulp -1
expect 2 "--max-ulp" "$TSC" diff a.h5 b.h5 --max-ulp many
expect 2 "--steps" "$TSC" diff a.h5 b.h5 --steps 5:2
expect 2 "--html" "$TSC" diff a.h5 b.h5 --html

"$TSC" synth -o a.h5 --seed 7 -q && "$TSC" synth -o b.h5 --seed 7 -q || { echo "synth failed"; exit 1; }

# 1. the same seed twice: bit-identical
"$TSC" diff a.h5 b.h5 -q > same.txt 2> err.txt; rc=$?
[ $rc -eq 0 ] && [ ! -s err.txt ] && ok || bad "same seed: exit $rc (want 0, nothing on stderr with -q): $(cat err.txt)"
ok grep -q "^diff a.h5 (bf16-torch+tile:q=16,k=16) vs b.h5 (bf16-torch+tile:q=16,k=16): batch 1, 4 heads (4 kv), T 64, D 16, C 64; 3 steps, 174 records$" same.txt
ok grep -qE "^o +24 +0 +100.0000% +0 +\+0  -$" same.txt
ok grep -qE "^all +174 +0 +100.0000% +0 +\+0  -$" same.txt
"$TSC" diff a.h5 b.h5 > /dev/null 2> prog.txt
grep -q "layers compared" prog.txt && san prog.txt && ok || bad "no progress on stderr without -q: $(cat prog.txt)"
"$TSC" diff a.h5 b.h5 --json -q > same.json; ok test $? -eq 0
ok "$py" - a.h5 same.json same.txt <<'PY'
import h5py, json, sys, numpy as np
n = 0
with h5py.File(sys.argv[1], "r") as f:
    def visit(name, obj):
        global n
        if isinstance(obj, h5py.Dataset) and name.startswith("step_"):
            n += obj.size
    f.visititems(visit)
r = json.load(open(sys.argv[2]))
t = r["total"]
assert r["agree"] is True and r["records"] == 174 and r["records_disagreeing"] == 0 and r["steps"] == 3, r
assert t["n"] == n and t["identical"] == n and t["identical_share"] == 1 and t["max_ulp"] == 0, (t, n)
assert t["first_difference"] is None and t["first_record"] is None and t["worst_record"] is None, t
assert open(sys.argv[3]).read().splitlines()[-1] == "agree: 174 records bit-identical (%d elements)" % n
PY

# 2. a few elements moved by known ULPs
cp a.h5 p.h5
ok "$py" - p.h5 <<'PY'
import h5py, numpy as np, sys
def raw(ds):
    t = ds.id.get_type()
    buf = np.empty(ds.shape, {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[t.get_size()])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=t)
    return buf, t
def bump(f, path, where, ulps):  # move |value| away from 0 by ulps representable values (the magnitude bits)
    ds = f[path]
    bits, t = raw(ds)
    assert bits[where] & 0x7FFF != 0, "a zero"
    bits[where] += ulps
    ds.id.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
with h5py.File(sys.argv[1], "r+") as f:
    bump(f, "step_00000000/layer_001/o", (0, 2, 5, 3), 1)
    bump(f, "step_00000000/layer_001/o", (0, 2, 40, 7), 3)
    bump(f, "step_00000002/layer_000/q", (0, 3, 10, 0), 2)
PY
"$TSC" diff a.h5 p.h5 -q > p.txt 2> err.txt; ok test $? -eq 3
"$TSC" diff a.h5 p.h5 -q --json > p.json; ok test $? -eq 3
ok "$py" - a.h5 p.h5 p.json p.txt <<'PY'
import h5py, json, sys, numpy as np
def raw(ds):
    t = ds.id.get_type()
    buf = np.empty(ds.shape, {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[t.get_size()])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=t)
    return buf, 8 * t.get_size()
def order(u, bits):  # sign-magnitude bit patterns to a monotone integer order (+0 and -0 both 0)
    u = u.astype(np.int64)
    mag = u & ((1 << (bits - 1)) - 1)
    return np.where((u >> (bits - 1)) & 1 == 1, -mag, mag)
A, B = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
r = json.load(open(sys.argv[3]))
text = open(sys.argv[4]).read()
recs = {(x["step"], x["layer"], x["dataset"], x["head"]): x for x in r["per_record"]}
# totals over every dataset of both files, from the bits
n = ident = 0
def visit(name, obj):
    global n, ident
    if isinstance(obj, h5py.Dataset) and name.startswith("step_"):
        a, _ = raw(obj); b, _ = raw(B[name])
        n += a.size; ident += int((a == b).sum())
A.visititems(visit)
t = r["total"]
assert (t["n"], t["identical"]) == (n, ident) and n - ident == 3, (t, n, ident)
assert t["max_ulp"] == 3 and t["nonfinite_mismatch"] == 0, t
assert r["agree"] is False and r["records_disagreeing"] == 2 and r["records"] == 174, r
assert t["first_record"] == {"step": 0, "layer": 1, "dataset": "o", "head": 2}, t["first_record"]
assert t["worst_record"] == {"step": 0, "layer": 1, "dataset": "o", "head": 2}, t["worst_record"]
for (path, key, fmt) in (("step_00000000/layer_001/o", (0, 1, "o", 2), "bf16"),
                         ("step_00000002/layer_000/q", (2, 0, "q", 3), "bf16")):
    head = key[3]
    a, bits = raw(A[path]); b, _ = raw(B[path])
    a, b = a[:, head], b[:, head]                                   # [B, T, D]
    va = A[path].astype("float32")[()][:, head].astype(np.float64)
    vb = B[path].astype("float32")[()][:, head].astype(np.float64)
    ulp = np.abs(order(b, bits) - order(a, bits))
    diff = np.argwhere(a != b)                                      # row-major: (batch, token, feature)
    x = recs[key]
    bi, ti, di = (int(v) for v in diff[0])
    fd = x["first_difference"]
    assert (fd["batch"], fd["token"], fd["feature"]) == (bi, ti, di), (fd, diff[0])
    assert fd["a"] == va[bi, ti, di] and fd["b"] == vb[bi, ti, di], fd
    assert fd["a_bits"] == "0x%04x" % a[bi, ti, di] and fd["b_bits"] == "0x%04x" % b[bi, ti, di], fd
    assert x["max_ulp"] == ulp.max() and x["n"] == a.size and x["identical"] == int((a == b).sum()), x
    assert x["finite_pairs"] == a.size and x["nonfinite_mismatch"] == 0 and x["agrees"] is False, x
    assert abs(x["mean_diff"] - (vb - va).mean()) <= 1e-12 * abs((vb - va).mean()), (x["mean_diff"], (vb - va).mean())
    assert abs(x["mean_ulp"] - ulp.mean()) < 1e-12 and x["dtype_a"] == x["dtype_b"] == fmt, x
    assert abs(x["mean_ulp_signed"] - (order(b, bits) - order(a, bits)).mean()) < 1e-12, x
    assert x["max_abs_diff"] == np.abs(vb - va).max(), x
    line = "    first: batch %d, token %d, feature %d: a %.9g (0x%04x), b %.9g (0x%04x)" % (
        bi, ti, di, va[bi, ti, di], a[bi, ti, di], vb[bi, ti, di], b[bi, ti, di])
    assert line in text.splitlines(), (line, text)
assert recs[(0, 1, "o", 2)]["max_ulp"] == 3 and recs[(2, 0, "q", 3)]["max_ulp"] == 2
assert recs[(0, 1, "o", 2)]["first_difference"]["token"] == 5 and recs[(2, 0, "q", 3)]["first_difference"]["token"] == 10
# every record not touched agrees and is identical
assert all(x["agrees"] and x["identical"] == x["n"] for k, x in recs.items() if k not in ((0, 1, "o", 2), (2, 0, "q", 3)))
sets = {s["dataset"]: s for s in r["per_dataset"]}
assert sets["o"]["records"] == 24 and sets["o"]["records_disagreeing"] == 1 and sets["o"]["max_ulp"] == 3, sets["o"]
assert sets["q"]["worst_record"] == {"step": 2, "layer": 0, "dataset": "q", "head": 3}, sets["q"]
assert sets["k"]["worst_record"] is None and sets["k"]["identical_share"] == 1, sets["k"]
# every documented key is there
keys = ["a", "b", "policy_a", "policy_b", "geometry", "selection", "max_ulp_allowed", "agree", "steps", "records",
        "records_disagreeing", "total", "per_dataset", "not_compared", "not_compared_count", "per_record",
        "nonfinite_numbers"]
assert list(r) == keys, list(r)
assert r["geometry"] == {"batch": 1, "heads": 4, "kv_heads": 4, "seq_len": 64, "head_dim": 16, "d_model": 64}
assert r["selection"] == "steps=all,layers=all,heads=all,batches=all" and r["max_ulp_allowed"] == 0, r["selection"]
stat = ["n", "identical", "identical_share", "nonfinite_mismatch", "finite_pairs", "max_ulp", "mean_ulp",
        "mean_ulp_signed", "mean_diff", "max_abs_diff", "first_difference"]
assert list(t) == stat + ["first_record", "worst_record"], list(t)
assert list(sets["o"]) == ["dataset", "records", "records_disagreeing"] + stat + ["first_record", "worst_record"]
assert list(recs[(0, 1, "o", 2)]) == ["step", "layer", "dataset", "head", "dtype_a", "dtype_b", "agrees"] + stat
assert list(recs[(0, 1, "o", 2)]["first_difference"]) == ["batch", "token", "feature", "a", "b", "a_bits", "b_bits"]
assert r["nonfinite_numbers"]["count"] == 0 and r["not_compared"] == [] and r["not_compared_count"] == 0, r
PY
ok grep -qE "^o +24 +1 +99.9919% +3 +[-+][0-9.e+-]+  step 0 layer 1 head 2$" p.txt
ok grep -q "^records beyond 0 ULP (2):$" p.txt
ok grep -q "^  step 0 layer 1 o head 2 (bf16 vs bf16): 2 of 1024 elements differ, max 3 ULP, mean b-a " p.txt
ok grep -q "^  step 2 layer 0 q head 3 (bf16 vs bf16): 1 of 1024 elements differ, max 2 ULP, mean b-a " p.txt
ok grep -qE "^differ: 2 of 174 records beyond 0 ULP \(o 1, q 1\); max 3 ULP; 99.9988% of 247296 elements bit-identical$" p.txt
"$TSC" diff a.h5 p.h5 -q --max-ulp 3 > p3.txt; ok test $? -eq 0
ok grep -q "^records that differ within 3 ULP (2):$" p3.txt
ok grep -q "^agree: 174 records within 3 ULP (2 differ, max 3 ULP; 99.9988% of 247296 elements bit-identical)$" p3.txt
"$TSC" diff a.h5 p.h5 -q --max-ulp 2.5 --json > p25.json; ok test $? -eq 3
ok "$py" -c "import json,sys; r=json.load(open('p25.json')); assert r['records_disagreeing'] == 1 and r['max_ulp_allowed'] == 2.5, r"
"$TSC" diff a.h5 p.h5 -q --heads 0,1 > /dev/null; ok test $? -eq 0
"$TSC" diff a.h5 p.h5 -q --steps 1 > /dev/null; ok test $? -eq 0
"$TSC" diff a.h5 p.h5 -q --layers 0 --steps 0:2 > /dev/null; ok test $? -eq 0
"$TSC" diff a.h5 p.h5 -q --heads 2 --layers 1 --json > sel.json; ok test $? -eq 3
ok "$py" - sel.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
keys = sorted({(x["dataset"], x["head"]) for x in r["per_record"]})
assert keys == [("do", 2), ("k", 2), ("lse", 2), ("o", 2), ("q", 2), ("v", 2), ("w_k", -1), ("w_o", -1), ("w_q", -1),
                ("w_v", -1), ("x", -1)], keys
assert {x["layer"] for x in r["per_record"]} == {1} and r["records_disagreeing"] == 1, r["records_disagreeing"]
assert r["selection"] == "steps=all,layers=1,heads=2,batches=all", r["selection"]
PY
expect 1 "no selected step in common" "$TSC" diff a.h5 p.h5 -q --steps 99

# 2b. across zero and across a binade: o of (step 0, layer 0, head 0), token 0, features 0-2: +min subnormal vs
#     -min subnormal (2 ULP), +0 vs -0 (0 ULP, not bit-identical), 0.99609375 vs 1.0078125 (2 ULP: one value
#     either side of 1)
cp a.h5 za.h5; cp a.h5 zb.h5
ok "$py" - za.h5 zb.h5 <<'PY'
import h5py, numpy as np, sys
for path, vals in ((sys.argv[1], (0x0001, 0x0000, 0x3F7F)), (sys.argv[2], (0x8001, 0x8000, 0x3F81))):
    with h5py.File(path, "r+") as f:
        ds = f["step_00000000/layer_000/o"]
        t = ds.id.get_type()
        bits = np.empty(ds.shape, np.uint16)
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
        bits[0, 0, 0, 0:3] = vals
        ds.id.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
PY
"$TSC" diff za.h5 zb.h5 -q --json > z.json; ok test $? -eq 3
ok "$py" - za.h5 zb.h5 z.json <<'PY'
import h5py, json, sys, numpy as np
def bits(path):
    ds = h5py.File(path, "r")["step_00000000/layer_000/o"]
    b = np.empty(ds.shape, np.uint16)
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, b, mtype=ds.id.get_type())
    return b[0, 0].astype(np.int64)
def order(u):
    return np.where(u >> 15 == 1, -(u & 0x7FFF), u & 0x7FFF)
a, b = bits(sys.argv[1]), bits(sys.argv[2])
ulp = np.abs(order(b) - order(a))
r = json.load(open(sys.argv[3]))
x = [x for x in r["per_record"] if (x["step"], x["layer"], x["dataset"], x["head"]) == (0, 0, "o", 0)][0]
assert list(ulp[0, :3]) == [2, 0, 2] and ulp.max() == 2, ulp[0, :3]
assert x["max_ulp"] == ulp.max() and x["identical"] == int((a == b).sum()) == 1021, x
assert abs(x["mean_ulp_signed"] - (order(b) - order(a)).mean()) < 1e-15, x
fd = x["first_difference"]
assert (fd["token"], fd["feature"], fd["a_bits"], fd["b_bits"]) == (0, 0, "0x0001", "0x8001"), fd
PY
"$TSC" diff za.h5 zb.h5 -q --max-ulp 2 > /dev/null; ok test $? -eq 0
"$TSC" diff za.h5 zb.h5 -q --max-ulp 1.9 > /dev/null; ok test $? -eq 3

# 3. the HTML page
"$TSC" diff a.h5 p.h5 -q --html p.html > ph.txt; ok test $? -eq 3
ok grep -q "^html view: p.html$" ph.txt
ok grep -qF "step 0 layer 1 <code>o</code> head 2 (bf16 vs bf16): 99.8047% of 1024 bit-identical; max 3 ULP" p.html
ok grep -qF "step 2 layer 0 <code>q</code> head 3 (bf16 vs bf16): 99.9023% of 1024 bit-identical; max 2 ULP" p.html
ok grep -qF 'title="layer 1 head 2 (bf16 vs bf16): 99.8047% of 1024 bit-identical; max 3 ULP' p.html
ok grep -qF '<div class="g" id="g0-3"><div><code>o</code>, step 0</div>' p.html
! grep -qiE "<script|<link|https?:|src=" p.html && ok || bad "the page loads or runs something"
BROWSER=""
for b in chromium chromium-browser google-chrome; do command -v "$b" > /dev/null && { BROWSER=$(command -v "$b"); break; }; done
if [ -n "$BROWSER" ]; then
  env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS -u LSAN_OPTIONS timeout 120 "$BROWSER" --headless=new --no-sandbox \
    --disable-gpu --enable-logging=stderr --v=0 --user-data-dir="$tmp/prof" --virtual-time-budget=3000 --dump-dom \
    "file://$tmp/p.html" > p.dom 2> chrome.txt
  grep -q "<h1>tilescope diff</h1>" p.dom && grep -qF "step 0 layer 1 <code>o</code> head 2" p.dom && ok ||
    bad "chromium did not render the page: $(tail -3 chrome.txt)"
  [ "$(grep -o 'class="c"' p.dom | wc -l)" -ge 90 ] && ok || bad "the grids' cells are not in the page as rendered"
  ! grep "CONSOLE" chrome.txt | grep -qi "error" && ok || bad "console errors: $(grep CONSOLE chrome.txt | head -3)"
  if [ -n "${TSC_SHOT_DIR:-}" ]; then
    env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS -u LSAN_OPTIONS timeout 120 "$BROWSER" --headless=new \
      --no-sandbox --disable-gpu --user-data-dir="$tmp/prof" --window-size=1300,1600 \
      --screenshot="$TSC_SHOT_DIR/diff_view.png" "file://$tmp/p.html" > /dev/null 2>&1
  fi
else
  echo "note: no chromium: the diff page was not rendered"
fi
expect 1 "nodir/x.html" "$TSC" diff a.h5 b.h5 -q --html nodir/x.html

# 4. NaN against a number; NaN against NaN
cp a.h5 n.h5
ok "$py" - n.h5 <<'PY'
import h5py, numpy as np, sys
with h5py.File(sys.argv[1], "r+") as f:
    ds = f["step_00000001/layer_000/o"]
    t = ds.id.get_type()
    bits = np.empty(ds.shape, np.uint16)
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
    bits[0, 3, 33, 4] = 0x7FC0
    ds.id.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
PY
"$TSC" diff a.h5 n.h5 -q --max-ulp 1e9 --json > n.json; ok test $? -eq 3
ok "$py" - a.h5 n.json <<'PY'
import h5py, json, sys
r = json.load(open(sys.argv[2]))
va = float(h5py.File(sys.argv[1], "r")["step_00000001/layer_000/o"].astype("float32")[0, 3, 33, 4])
x = [x for x in r["per_record"] if (x["step"], x["layer"], x["dataset"], x["head"]) == (1, 0, "o", 3)][0]
assert x["nonfinite_mismatch"] == 1 and x["agrees"] is False and x["identical"] == 1023 and x["finite_pairs"] == 1023, x
assert x["max_ulp"] == 0 and x["first_difference"]["a"] == va and x["first_difference"]["b"] is None, x
assert (x["first_difference"]["token"], x["first_difference"]["feature"], x["first_difference"]["b_bits"]) == (33, 4, "0x7fc0")
assert r["total"]["nonfinite_mismatch"] == 1 and r["records_disagreeing"] == 1, r["total"]
assert r["nonfinite_numbers"]["count"] >= 1, r["nonfinite_numbers"]
PY
"$TSC" diff a.h5 n.h5 -q > n.txt; ok test $? -eq 3
ok grep -q "^  step 1 layer 0 o head 3 (bf16 vs bf16): 1 of 1024 elements differ, max 0 ULP, mean b-a +0, 1 NaN/Inf against a number$" n.txt
ok grep -q "^    first: batch 0, token 33, feature 4: a .* b nan (0x7fc0)$" n.txt
cp n.h5 nn.h5
ok "$py" - nn.h5 <<'PY'
import h5py, numpy as np, sys
with h5py.File(sys.argv[1], "r+") as f:
    ds = f["step_00000001/layer_000/o"]
    t = ds.id.get_type()
    bits = np.empty(ds.shape, np.uint16)
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
    bits[0, 3, 33, 4] = 0xFFC1  # another NaN
    ds.id.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=t)
PY
"$TSC" diff n.h5 nn.h5 -q > nn.txt; ok test $? -eq 0
ok grep -q "^agree: 174 records bit-identical (247296 elements)$" nn.txt

# 5. o of (step 0, layer 0) stored as fp32 in B: the bf16 values, one moved by a quarter of a bf16 ULP
cp a.h5 f.h5
ok "$py" - f.h5 <<'PY'
import h5py, numpy as np, sys
with h5py.File(sys.argv[1], "r+") as f:
    g = f["step_00000000/layer_000"]
    old = g["o"]
    v = old.astype("float32")[()]
    attrs = dict(old.attrs)
    del g["o"]
    m, e = np.frexp(v[0, 1, 20, 2])
    v[0, 1, 20, 2] += np.float32(2.0 ** (int(e) - 1 - 7) / 4)  # a quarter of bf16's ULP there: exact in fp32
    ds = g.create_dataset("o", data=v, dtype="<f4", chunks=(1, 1) + v.shape[2:])
    for k, x in attrs.items():
        ds.attrs[k] = x
    ds.attrs["dtype"] = "fp32"
PY
"$TSC" diff a.h5 f.h5 -q --json > f.json; ok test $? -eq 3
ok "$py" - f.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rec = {(x["step"], x["layer"], x["dataset"], x["head"]): x for x in r["per_record"]}
x = rec[(0, 0, "o", 1)]
assert (x["dtype_a"], x["dtype_b"], x["max_ulp"], x["identical"], x["agrees"]) == ("bf16", "fp32", 0.25, 1023, False), x
assert (x["first_difference"]["token"], x["first_difference"]["feature"]) == (20, 2), x
assert len(x["first_difference"]["a_bits"]) == 6 and len(x["first_difference"]["b_bits"]) == 10, x["first_difference"]
assert all(rec[(0, 0, "o", h)]["identical"] == 1024 and rec[(0, 0, "o", h)]["agrees"] for h in (0, 2, 3))
assert r["records_disagreeing"] == 1, r
PY
"$TSC" diff a.h5 f.h5 -q --max-ulp 0.25 > /dev/null; ok test $? -eq 0

# 6. what one dump lacks; a run of ranks; kv heads
"$TSC" synth -o s2.h5 --seed 7 --steps 0:2 -q && "$TSC" synth -o l1.h5 --seed 7 --layers 1 -q || bad "synth s2/l1"
"$TSC" diff a.h5 s2.h5 -q > s2.txt; ok test $? -eq 0
ok grep -q "^not compared (1):$" s2.txt
ok grep -q "^  only in A: step 2$" s2.txt
"$TSC" diff s2.h5 a.h5 -q --json > s2.json; ok test $? -eq 0
ok "$py" -c "import json; r=json.load(open('s2.json')); assert r['not_compared']==[{'in':'b','what':'step 2'}] and r['steps']==2 and r['not_compared_count']==1, r['not_compared']"
"$TSC" diff a.h5 l1.h5 -q > l1.txt; ok test $? -eq 0
ok test "$(grep -c '^  only in A: step [0-2] layer 0$' l1.txt)" = 3
"$TSC" synth -o m.h5 --seed 7 --batch 2 --ranks 2 -q && "$TSC" synth -o m1.h5 --seed 7 --batch 2 -q || bad "synth m"
"$TSC" diff m.h5 m1.h5 -q > m.txt; ok test $? -eq 0
ok grep -q "^agree: 174 records bit-identical (396288 elements)$" m.txt
"$TSC" synth -o g.h5 --shape llama-gqa --steps 0 --layers 1 -q || bad "synth llama-gqa"
"$TSC" diff g.h5 g.h5 -q --heads 5 --json > g.json; ok test $? -eq 0
ok "$py" -c "import json; r=json.load(open('g.json')); assert sorted({(x['dataset'],x['head']) for x in r['per_record'] if x['head']>=0})==[('do',5),('k',1),('lse',5),('o',5),('q',5),('v',1)], r['per_record']"

# 7. inputs that cannot be compared
expect 1 "missing.h5" "$TSC" diff missing.h5 a.h5 -q
expect 1 "missing.h5" "$TSC" diff a.h5 missing.h5 -q
: > empty.h5; echo "not hdf5" > text.h5; head -c 20000 a.h5 > cut.h5
for f in empty.h5 text.h5 cut.h5; do expect 1 "$f" "$TSC" diff a.h5 "$f" -q; done
"$TSC" synth -o t32.h5 --seed 7 --seq-len 32 -q || bad "synth t32"
expect 1 "a.h5 (batch 1, heads 4, kv heads 4, T 64, D 16, C 64) and t32.h5 (batch 1, heads 4, kv heads 4, T 32, D 16, C 64) have different geometries" \
  "$TSC" diff a.h5 t32.h5 -q
expect 1 "g.h5 (batch 1, heads 8, kv heads 2, T 256" "$TSC" diff a.h5 g.h5 -q
grep -qF "a.h5 (batch 1, heads 4" err && ok || bad "the geometry message names only one file: $(cat err)"

finish
