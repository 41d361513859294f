#!/bin/bash
# Limits of analyze/diagnose on crafted dumps, each of which the engine once got wrong silently
# or by memory corruption:
#  1. a step with more layer groups than the root attribute n_layer (or a group outside
#     [0, n_layer), or two groups naming one layer) is a clear error, exit 1, no analysis.h5;
#  2. head_dim 128 with no flagged feature: diagnose sums B over all 128 features (it once took
#     the first 64: here only features 64..127 carry a delta contribution, so B was exactly 0);
#  3. identity, permutation and zero weights (a repeated top singular value) get their spectral
#     norms 1, 1, 0 (LAPACK's dsyevr, once the analysis' cross-check, overwrote the stack there:
#     SIGSEGV), in w_norm and per head;
#  4. a selection whose canonical text is longer than 512 characters is recorded whole (it was cut).
. "$(dirname "$0")/lib.sh"
PY=$(find_py h5py numpy) || { echo "skip: no python3 with h5py and numpy"; exit 77; }

# --- 1. layer groups vs n_layer (tiny: layer_000 and layer_001 in every step) ---------------------
"$TSC" synth -o "$tmp/l.h5" --steps 0:2 --quiet || { echo "synth failed"; exit 1; }
cp "$tmp/l.h5" "$tmp/dup.h5"
"$PY" - "$tmp/l.h5" "$tmp/dup.h5" <<'PYEOF' || bad "crafting the layer dumps"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    assert sorted(f["step_00000000"].keys()) == ["layer_000", "layer_001"]
    f.attrs["n_layer"] = np.int64(1)                       # two groups, n_layer 1
with h5py.File(sys.argv[2], "r+") as f:
    f["step_00000000/layer_0001"] = f["step_00000000/layer_001"]   # a second name for layer 1
PYEOF
"$TSC" analyze "$tmp/l.h5" -o "$tmp/lo" -q 2> "$tmp/l.err"
rc=$?
[ $rc -eq 1 ] && ok || bad "more layer groups than n_layer: exit $rc, want 1"
grep -q "layer group layer_001 (2 groups), outside \[0, n_layer = 1)" "$tmp/l.err" && ok || bad "message: $(cat "$tmp/l.err")"
[ ! -e "$tmp/lo/analysis.h5" ] && ok || bad "analysis.h5 left behind"
"$TSC" diagnose "$tmp/l.h5" -o "$tmp/ld" -q > /dev/null 2> "$tmp/ld.err"
rc=$?
[ $rc -eq 1 ] && grep -q "n_layer = 1" "$tmp/ld.err" && ok || bad "diagnose: exit $rc, $(cat "$tmp/ld.err")"
"$TSC" analyze "$tmp/dup.h5" -o "$tmp/dupo" -q 2> "$tmp/dup.err"
rc=$?
[ $rc -eq 1 ] && grep -q "step 0 has 3 layer groups, more than n_layer = 2" "$tmp/dup.err" && ok ||
  bad "two groups for one layer: exit $rc, $(cat "$tmp/dup.err")"

# --- 2. head_dim 128, nothing flagged: diagnose covers every feature -------------------------------
"$PY" - "$tmp/d128.h5" <<'PYEOF' || bad "crafting the D = 128 dump"
import sys, h5py, numpy as np
B, H, T, D, C = 2, 1, 32, 128, 16
rng = np.random.default_rng(5)
with h5py.File(sys.argv[1], "w") as g:
    a = g.attrs
    a["format"], a["format_version"] = "tilescope-dump", 1
    for k, v in dict(n_layer=1, n_head=H, n_kv_head=H, head_dim=D, d_model=C, seq_len=T, batch=B, causal=1,
                     tile_q=16, tile_k=16, rank=0, world_size=1).items():
        a[k] = np.int64(v)
    a["softmax_scale"], a["policy"], a["producer"] = 1.0 / np.sqrt(D), "bf16-fa2", "test_analyze_limits"
    st = g.create_group("step_00000000")
    st.attrs["complete"] = np.int64(1)
    lay = st.create_group("layer_000")
    q = np.zeros((B, H, T, D), np.float32); q[..., 0] = 4.0
    k = np.zeros((B, H, T, D), np.float32); k[..., 0] = np.arange(T) * 0.25   # distinct scores: no tie rows
    v = rng.normal(size=(B, H, T, D)).astype(np.float32)
    do = rng.normal(size=(B, H, T, D)).astype(np.float32)
    do[..., :64] = 0                                                          # features 0..63 carry nothing
    for n, x in dict(q=q, k=k, v=v, do=do).items():
        lay.create_dataset(n, data=x, chunks=(1, 1, T, D))
PYEOF
# alpha 1 makes the head delta-biased (at risk); min-ulp 1e6 flags no feature
if "$TSC" diagnose "$tmp/d128.h5" -o "$tmp/dd" -q --alpha 1 --min-ulp 1e6 --max-steps 0 > "$tmp/dd.txt"; then ok
else bad "diagnose D = 128 exit $?"; fi
"$PY" - "$tmp/dd/summary.json" "$tmp/dd/analysis.h5" <<'PYEOF' && ok || bad "D = 128 diagnosis"
import sys, json, math, h5py
s = json.load(open(sys.argv[1]))
d = s["diagnosis"]
assert d["n_at_risk"] == 1 and s["n_flagged_heads"] == 0, (d["n_at_risk"], s["n_flagged_heads"])
h = d["at_risk"][0]
assert h["features"] == [] and h["n_tie_rows"] == 0, h
# B(lp) over all rows and all 128 features = sum_f mean_f(dO (O_lp - O_hp)) * rows
with h5py.File(sys.argv[2], "r") as f:
    contrib = f["cumulative/feature_delta_contrib"][0, 0, :]
rows = s["computed_over"]["rows_per_head"]
want = float(sum(contrib)) * rows
assert abs(float(sum(contrib[:64]))) == 0.0                 # what the first 64 features carry
assert h["bias_lp"] != 0.0 and abs(h["bias_lp"] - want) <= 1e-9 * abs(want) + 1e-12, (h["bias_lp"], want)
e = h["event"]
assert e["found"] and 0 <= e["feature"] < 128, e
PYEOF

# --- 3. identity, permutation and zero weights ------------------------------------------------------
"$TSC" synth -o "$tmp/w.h5" --steps 0 --quiet || bad "synth w"
"$PY" - "$tmp/w.h5" <<'PYEOF' || bad "crafting the weights"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    g = f["step_00000000/layer_000"]
    n = g["w_q"].shape[0]
    assert g["w_q"].shape == (n, n), g["w_q"].shape
    g["w_q"][...] = np.eye(n, dtype=np.float32)
    g["w_k"][...] = np.eye(n, dtype=np.float32)[(7 * np.arange(n) + 3) % n]
    g["w_v"][...] = 0
PYEOF
if "$TSC" analyze "$tmp/w.h5" -o "$tmp/wo" -q; then ok; else bad "analyze with identity/zero weights: exit $?"; fi
"$PY" - "$tmp/wo/summary.json" "$tmp/wo/analysis.h5" <<'PYEOF' && ok || bad "spectral norms of identity/permutation/zero"
import sys, json, h5py
s = json.load(open(sys.argv[1]))
l = [x for x in s["layers"] if x["layer"] == 0][0]
n = l["spectral_norm"]
assert abs(n["w_q"] - 1) < 1e-9 and abs(n["w_k"] - 1) < 1e-9 and n["w_v"] == 0 and l["spectral_unconverged"] == 0, l
with h5py.File(sys.argv[2], "r") as f:
    g = f["step_00000000/layer_000"]
    assert "w_norm_lapack" not in g and "wq_head_norm_lapack" not in g, list(g)
    assert all(abs(x - 1) < 1e-9 for x in g["wq_head_norm"][()]), g["wq_head_norm"][()]  # rows of the identity
PYEOF
# --- 4. a long selection ----------------------------------------------------------------------------
many() { local s="$1" i; for i in $(seq 1 31); do s="$s,$((1000000 + 7919 * i))"; done; echo "$s"; }
if "$TSC" analyze "$tmp/w.h5" -o "$tmp/so" -q --steps "$(many 0)" --layers "$(many 0)" --heads "$(many 0)" \
   --batches "$(many 0)" --no-identity --no-census; then ok; else bad "analyze with a long selection: exit $?"; fi
"$PY" - "$tmp/so/summary.json" "$tmp/so/analysis.h5" <<'PYEOF' && ok || bad "long selection recorded whole"
import sys, json, h5py
s = json.load(open(sys.argv[1]))["selection"]
last = str(1000000 + 7919 * 31)
assert len(s) > 512 and s.endswith(last) and s.count(last) == 4, (len(s), s[-40:])
with h5py.File(sys.argv[2], "r") as f:
    a = f.attrs["selection"]
    assert (a.decode() if isinstance(a, bytes) else a) == s
PYEOF

finish
