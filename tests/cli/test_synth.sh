#!/usr/bin/env bash
# tilescope synth: determinism for a seed, the planted attributes per shape, --layers/--steps,
# --no-plant, and the planted regime checked independently with numpy (exact ties at the
# planted keys, gap >= 11 to every other visible score, V/dO signs).
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"

ok "$TSC" synth -o "$tmp/a.h5" --seed 5 -q
ok "$TSC" synth -o "$tmp/b.h5" --seed 5 -q
ok "$TSC" synth -o "$tmp/c.h5" --seed 6 -q
ok h5diff -q "$tmp/a.h5" "$tmp/b.h5"            # same seed: same values everywhere
ok cmp -s "$tmp/a.h5" "$tmp/b.h5"                # ... and the same bytes (no timestamps stored)
ok test "$(h5diff -q "$tmp/a.h5" "$tmp/c.h5" >/dev/null 2>&1; echo $?)" = 1   # another seed differs
ok test "$(ls "$tmp" | grep -c "\.tmp\.")" = 0   # no temporary file left

# --layers and --steps restrict what is written
ok "$TSC" synth -o "$tmp/g.h5" --shape gpt2-small --layers 1 --steps 6000 -q
j=$("$TSC" info "$tmp/g.h5" --json --quick)
ok test "$(echo "$j" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["steps"], sorted({l["layer"] for l in d["layers"]}), d["planted"]["planted_heads"], d["meta"]["n_head"], d["meta"]["seq_len"])')" = "[6000] [1] [0, 6, 7, 8, 10, 11] 12 1024"

# bad flags: usage errors (exit 2)
"$TSC" synth -o "$tmp/x.h5" --shape nope 2>/dev/null; ok test $? = 2
"$TSC" synth -o "$tmp/x.h5" --seed -3 2>/dev/null; ok test $? = 2
"$TSC" synth -o "$tmp/x.h5" --steps 5: 2>/dev/null; ok test $? = 2
"$TSC" synth -o "$tmp/x.h5" --layers 7 2>/dev/null; ok test $? = 2   # tiny has 2 layers
"$TSC" synth 2>/dev/null; ok test $? = 2
ok test ! -e "$tmp/x.h5"
"$TSC" synth --help | grep -q "planted_heads"; ok test $? = 0

py=$(find_py) || { echo "SKIP numpy checks: no python3 with h5py"; finish; exit $?; }
ok "$TSC" synth -o "$tmp/l.h5" --shape llama-gqa --steps 0 -q
ok "$TSC" synth -o "$tmp/n.h5" --no-plant -q
cat > "$tmp/check.py" <<'PY'
# Independent check of the planted structure from the stored BF16 values (float64 arithmetic).
import sys, h5py, numpy as np
path, expect_plant = sys.argv[1], sys.argv[2] == "1"
f = h5py.File(path, "r"); a = f.attrs
H, K, T = int(a["n_head"]), int(a["n_kv_head"]), int(a["seq_len"]); g = H // K
alpha = float(a["softmax_scale"])
heads = set(int(x) for x in a["planted_heads"]); layers = set(int(x) for x in a["planted_layers"])
feats = [int(x) for x in a["planted_features"]]
assert (len(heads) > 0) == expect_plant, "planted lists"
p = int(a["planted_tie_keys"][1]) if expect_plant else None
stride = int(a["planted_rows_stride"][0]) if expect_plant else None
bad = 0
for sname in f:
    if not sname.startswith("step_"): continue
    for lname in f[sname]:
        L = int(lname[6:]); grp = f[sname][lname]
        q = grp["q"].astype("float32")[()].astype(np.float64)
        k = grp["k"].astype("float32")[()].astype(np.float64)
        v = grp["v"].astype("float32")[()].astype(np.float64)
        do = grp["do"].astype("float32")[()].astype(np.float64)
        for h in range(H):
            S = alpha * q[0, h] @ k[0, h // g].T
            S[np.triu_indices(T, 1)] = -np.inf
            planted = L in layers and h in heads
            for t in range(T):
                row = S[t, :t + 1]; m = row.max(); nmax = int((row == m).sum())
                is_prow = planted and t >= p and (t - p) % stride == 0
                if is_prow:
                    others = np.delete(row, [0, p])
                    if not (nmax == 2 and row[0] == m and row[p] == m): bad += 1; print("no tie", sname, L, h, t)
                    elif others.size and m - others.max() < 11.0: bad += 1; print("gap", m - others.max())
                else:
                    srt = np.sort(row)
                    if nmax != 1 or (t > 0 and srt[-1] - srt[-2] < 1.0): bad += 1; print("not unique", sname, L, h, t)
            if planted:
                vf = v[0, h // g][:, feats]; df = do[0, h][:, feats]
                if not (vf.mean() < -1.9 and vf.mean() > -2.5 and (df < 0).mean() > 0.95): bad += 1; print("signs", h)
            elif expect_plant is False or L not in layers:
                if abs(v[0, h // g].mean()) > 0.3: bad += 1; print("v bias", L, h)
print("bad", bad); sys.exit(1 if bad else 0)
PY
ok "$py" "$tmp/check.py" "$tmp/a.h5" 1
ok "$py" "$tmp/check.py" "$tmp/l.h5" 1
ok "$py" "$tmp/check.py" "$tmp/n.h5" 0
finish
