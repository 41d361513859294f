#!/bin/bash
# End-to-end: `tilescope synth` -> `tilescope analyze`.
# 1. A planted tiny dump (12 steps: pooling over steps gives the flag test its power, see
#    docs/FORMAT.md section 3) flags exactly the planted (layer, head, feature)s listed in the
#    dump's root attributes, and the planted tie keys (sink 0 and the second tie key) as sinks of
#    the planted heads only.
#    Their accumulation gain matches a numpy recomputation and is >= 2.5 on average.
# 2. A --no-plant dump flags nothing (family-wise false-positive bound 0.01, Bonferroni), and
#    no head's accumulation gain reaches 2.
# 3. The default analysis (census, identity) on the 3-step dump: more negative than positive
#    overflow events in the planted heads (docs/MECHANISM.md section 5: V < 0 there), finite residuals.
# 4. Usage errors exit 2, job failures exit 1 naming the file; --json equals summary.json.
# 5. A NaN and an Inf planted in a weight, and a NaN in x, are reported; the rest of the analysis goes on.
. "$(dirname "$0")/lib.sh"
PY=$(find_py h5py numpy) || { echo "skip: no python3 with h5py and numpy"; exit 77; }

"$TSC" synth -o "$tmp/p.h5" --steps 0:12 --quiet || { echo "synth failed"; exit 1; }
if "$TSC" analyze "$tmp/p.h5" -o "$tmp/a" -q --no-census --no-identity; then ok; else bad "analyze planted exit $?"; fi
if "$PY" - "$tmp/p.h5" "$tmp/a/summary.json" <<'PYEOF'; then ok; else bad "planted flags"; fi
import sys, json, h5py
f = h5py.File(sys.argv[1], "r")
s = json.load(open(sys.argv[2]))
L, H, F = (list(f.attrs[k]) for k in ("planted_layers", "planted_heads", "planted_features"))
ties = sorted(int(k) for k in f.attrs["planted_tie_keys"])
want = {(l, h, x) for l in L for h in H for x in F}
got = {(r["layer"], r["head"], x) for r in s["flagged_heads"] for x in r["features"]}
print("planted", sorted(want), "flagged", sorted(got))
assert got == want, (got, want)
assert s["n_flagged_heads"] == len(L) * len(H) * s["computed_over"]["steps"]
for r in s["heads"]:
    exp = ties if (r["layer"] in L and r["head"] in H) else []
    assert sorted(r["ties"]["sinks_flagged"]) == exp, (r["layer"], r["head"], r["ties"])
    if r["layer"] in L and r["head"] in H:
        assert r["ties"]["rows_multi_max"] > 0 and r["ties"]["pbar_one"] > 0
    else:
        assert r["ties"]["rows_multi_max"] == 0, r
c = h5py.File(sys.argv[2].replace("summary.json", "analysis.h5"), "r")["cumulative"]
assert c["feature_flag"][()].sum() == len(want)
assert c["delta_cumsum"].shape == (s["computed_over"]["steps"], 2, 4)
PYEOF

# Accumulation gain |E|_F / sqrt(sum_T |term_T|^2): recomputed in numpy from the dump (P from FP32
# scores; tilescope uses lp's, so ~1% apart) for every head of the first 3 steps; planted heads add
# up along shared directions (mean gain over steps >= 2.5), unplanted ones like random signs (< 2).
if "$PY" - "$tmp/p.h5" "$tmp/a/summary.json" <<'PYEOF'; then ok; else bad "accumulation gain"; fi
import sys, json, h5py
import numpy as np
f = h5py.File(sys.argv[1], "r")
s = json.load(open(sys.argv[2]))
a5 = h5py.File(sys.argv[2].replace("summary.json", "analysis.h5"), "r")
L, H = list(f.attrs["planted_layers"]), list(f.attrs["planted_heads"])
alpha = float(f.attrs["softmax_scale"])
gains = {}
for r in s["heads"]:
    st, l, h = r["step"], r["layer"], r["head"]
    g = r["rank1"]["accum_gain"]
    gains.setdefault((l, h), []).append(g)
    if (l, h) not in {(x, y) for x in L for y in H}:
        assert g < 2.0, (st, l, h, g)
    if st >= 3:
        continue
    d = f["step_%08d/layer_%03d" % (st, l)]
    q, k, x = (d[n].astype("float32")[()].astype(np.float64) for n in ("q", "k", "x"))
    ag = a5["step_%08d/layer_%03d" % (st, l)]
    dd = ag["delta_diff"][()][list(ag["heads"][()]).index(h)]
    E, tsq = 0.0, 0.0
    for b in range(q.shape[0]):
        S = alpha * q[b, h] @ k[b, h].T
        T = S.shape[0]
        S[np.triu(np.ones((T, T), bool), 1)] = -np.inf
        P = np.exp(S - S.max(1, keepdims=True))
        pk = (P / P.sum(1, keepdims=True)) @ k[b, h]
        cf = alpha * dd[b]
        E = E + (pk * cf[:, None]).T @ x[b]
        tsq += np.sum(cf ** 2 * np.sum(pk ** 2, 1) * np.sum(x[b] ** 2, 1))
    want = np.linalg.norm(E) / np.sqrt(tsq)
    assert abs(g - want) <= 0.03 * want, (st, l, h, g, want)
for (l, h), v in gains.items():
    if l in L and h in H:
        assert sum(v) / len(v) >= 2.5, (l, h, v)
PYEOF

"$TSC" synth -o "$tmp/n.h5" --steps 0:12 --no-plant --quiet || { echo "synth --no-plant failed"; exit 1; }
if "$TSC" analyze "$tmp/n.h5" -o "$tmp/n" -q --no-census --no-identity; then ok; else bad "analyze no-plant exit $?"; fi
if "$PY" - "$tmp/n/summary.json" <<'PYEOF'; then ok; else bad "no-plant flags something"; fi
import sys, json
s = json.load(open(sys.argv[1]))
assert s["n_flagged_heads"] == 0 and s["flagged_heads"] == [], s["flagged_heads"]
assert all(r["ties"]["sinks_flagged"] == [] for r in s["heads"])
assert s["flag_rule"]["false_positive_bound"] == 0.01
assert all(r["rank1"]["accum_gain"] < 2.0 for r in s["heads"]), max(r["rank1"]["accum_gain"] for r in s["heads"])
PYEOF

"$TSC" synth -o "$tmp/t.h5" --quiet || exit 1
if "$TSC" analyze "$tmp/t.h5" -o "$tmp/t" --json --probe 0,20,4 > "$tmp/t.json" 2>/dev/null; then ok; else bad "analyze default exit $?"; fi
# --probe B,T,I: the chosen curve is recorded, finite over the visible keys 0..T and NaN after.
if "$PY" - "$tmp/t/analysis.h5" <<'PYEOF'; then ok; else bad "chosen probe curve"; fi
import sys, h5py, numpy as np
c = h5py.File(sys.argv[1], "r")["step_00000000/layer_001/obar_err_chosen"][()]
assert c.shape == (4, 64) and np.isfinite(c[:, :21]).all() and np.isnan(c[:, 21:]).all()
PYEOF
if "$PY" - "$tmp/t.h5" "$tmp/t/summary.json" "$tmp/t.json" <<'PYEOF'; then ok; else bad "default analysis"; fi
import sys, json, math, h5py
f = h5py.File(sys.argv[1], "r")
s = json.load(open(sys.argv[2]))
assert json.load(open(sys.argv[3])) == s
L, H = list(f.attrs["planted_layers"]), list(f.attrs["planted_heads"])
for r in s["heads"]:
    assert math.isfinite(r["identity"]["rel_residual"]) and r["rank1"]["has_x"]
    assert 0 < r["rank1"]["top_energy"] <= 1 and r["rank1"]["eff_rank"] >= 1
    if r["layer"] in L and r["head"] in H:
        c = r["census"]
        assert c["events_neg"] > c["events_pos"] and c["err_neg"] < 0, c
# Fig. 6 data: in the planted heads the automatic probe is a planted row (two exact maxima) and
# its O-bar_error(t) curve jumps most at the second tie key (the first tie key, 0, starts the sum).
start, stride = int(f.attrs["planted_rows_start"][0]), int(f.attrs["planted_rows_stride"][0])
tie2 = max(int(k) for k in f.attrs["planted_tie_keys"])
import numpy as np
a5 = h5py.File(sys.argv[2].replace("summary.json", "analysis.h5"), "r")
# The probe's feature is the record's most significant delta contribution: a planted feature in
# all but at most one planted (step, head) record (one step is a small sample; the row-sum error
# of bf16-torch moves every feature of a row together and can win there).
F = set(int(x) for x in f.attrs["planted_features"])
rec = [r for r in s["heads"] if r["layer"] in L and r["head"] in H]
assert sum(r["probe"]["feature"] in F for r in rec) >= len(rec) - 1, [r["probe"] for r in rec]
for r in rec:
    if r["probe"]["feature"] not in F:
        continue
    t = r["probe"]["token"]
    assert t >= start and (t - start) % stride == 0, r["probe"]
    g = a5["step_%08d/layer_%03d" % (r["step"], r["layer"])]
    hi = list(g["heads"][()]).index(r["head"])
    cur = g["obar_err_auto"][hi][: t + 1]
    jumps = np.abs(np.diff(cur))  # jumps[k - 1]: from key k - 1 to key k (key 0 is the first term)
    assert int(np.argmax(jumps)) + 1 == tie2, (r["step"], r["head"], int(np.argmax(jumps)) + 1)
for l in s["layers"]:  # every spectral norm's iteration settled (kernels/spectral.c)
    assert l["spectral_unconverged"] == 0 and "spectral_norm_lapack" not in l, l
assert s["spectral_unconverged"] == 0
PYEOF

# 5. NaN/Inf in a weight: counted with its first coordinate, that matrix's norms (and the w_q head
#    holding it) are NaN, every other number is still computed, exit 0. NaN in x: counted, only the
#    rank-1 analysis of the heads that read it is skipped.
cp "$tmp/t.h5" "$tmp/w.h5"
"$PY" - "$tmp/w.h5" <<'PYEOF' || bad "planting a NaN weight"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r+")
d = f["step_00000000/layer_001/w_q"]
a = d[()]
a[3, 5] = np.nan
a[7, 1] = np.inf
d[...] = a
x = f["step_00000000/layer_000/x"]
a = x[()]
a[0, 10, 3] = np.nan
x[...] = a
PYEOF
if "$TSC" analyze "$tmp/w.h5" -o "$tmp/w" --no-census > "$tmp/w.txt" 2>&1; then ok; else bad "NaN weight: exit $?"; fi
grep -q "step 0 layer 1: 2 non-finite weight values, first w_q\[r=3,c=5\]" "$tmp/w.txt" && ok || bad "NaN weight not reported: $(tail -2 "$tmp/w.txt")"
if "$PY" - "$tmp/w/summary.json" "$tmp/w/analysis.h5" <<'PYEOF'; then ok; else bad "NaN weight summary"; fi
import sys, json, math, h5py
s = json.load(open(sys.argv[1]))
for l in s["layers"]:
    if (l["step"], l["layer"]) == (0, 1):
        assert l["nonfinite_weights"] == 2 and l["first_nonfinite"] == "w_q[r=3,c=5]", l
        assert l["spectral_norm"]["w_q"] is None and l["spectral_unconverged"] == 0, l
        assert all(l["spectral_norm"][w] > 0 for w in ("w_k", "w_v", "w_o")), l
    else:
        assert l["nonfinite_weights"] == 0 and l["first_nonfinite"] is None, l
n = h5py.File(sys.argv[2], "r")["step_00000000/layer_001/wq_head_norm"][()]
assert math.isnan(n[0]) and all(math.isfinite(x) and x > 0 for x in n[1:]), n  # rows 3 and 7 are head 0's
assert all(r["o"]["max_abs"] >= 0 for r in s["heads"])
for r in s["heads"]:  # NaN in x of step 0 layer 0: only those heads' rank-1 analysis is skipped
    if (r["step"], r["layer"]) == (0, 0):
        assert not r["skipped"] and r["nonfinite_inputs"] == 1 and r["first_nonfinite"] == "x[b=0,t=10,d=3]", r
        assert not r["rank1"]["has_x"] and r["rank1"]["accum_gain"] is None, r["rank1"]
    else:
        assert r["nonfinite_inputs"] == 0 and r["rank1"]["has_x"] and r["rank1"]["accum_gain"] > 0, r
PYEOF

"$TSC" analyze "$tmp/t.h5" -q > /dev/null 2>&1; rc=$?; [ $rc -eq 2 ] && ok || bad "missing -o: exit $rc"
"$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --bogus > /dev/null 2>&1; rc=$?; [ $rc -eq 2 ] && ok || bad "bad flag: exit $rc"
"$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --lp no-such-policy > /dev/null 2>&1; rc=$?; [ $rc -eq 2 ] && ok || bad "bad policy: exit $rc"
"$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --alpha 2 > /dev/null 2>&1; rc=$?; [ $rc -eq 2 ] && ok || bad "alpha out of range: exit $rc"
msg=$("$TSC" analyze "$tmp/missing.h5" -o "$tmp/x" -q 2>&1); rc=$?
[ $rc -eq 1 ] && [[ "$msg" == *missing.h5* ]] && ok || bad "missing dump: exit $rc, '$msg'"
[ ! -e "$tmp/x/analysis.h5" ] && ok || bad "analysis.h5 left behind after a failure"
msg=$("$TSC" analyze "$tmp/t.h5" -o "$tmp/x" --steps 100 -q 2>&1); rc=$?
[ $rc -eq 1 ] && [[ "$msg" == *selection* ]] && ok || bad "empty selection: exit $rc, '$msg'"
finish
