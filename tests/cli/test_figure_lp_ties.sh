#!/usr/bin/env bash
# The figures that look for ties at the row maximum (fig6a/6c's P-bar = 1 keys, fig9's rows, fig4/fig8's
# tied rows) take the scores of lp's kernel (the attention reference under the analysis' lp policy, through
# analyze/tsc_attn_map.h): bf16-torch rounds q.k to BF16, then times alpha (itself rounded), so keys that differ
# in exact arithmetic can tie, as they do in lp's kernel.
# A real (trained) capture, and an independent formulation of the rounding (numpy, frexp and
# round-half-even) to say which rows tie under BF16 scores but not exactly.
. "$(dirname "$0")/lib.sh"
T=${TSC:?TSC must name the tilescope binary}
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skip"; exit 77; }
PY=$(find_py h5py numpy json) || { echo "no python with h5py and numpy: skip"; exit 77; }
cd "$tmp" || exit 1
"$T" train --model gpt2-tiny --steps 20 --attn-policy bf16-torch --capture steps=19,layers=1 --val-every 100 \
    --quiet -o run > /dev/null 2>&1 || { echo "train failed"; exit 1; }
"$T" analyze run/capture.h5 -o an -q > /dev/null 2>&1 || { echo "analyze failed"; exit 1; }
read -r H TOK NEX NBF <<< "$("$PY" - <<'PYEOF'
import h5py, json, numpy as np
f = h5py.File("run/capture.h5", "r")
assert json.load(open("an/summary.json"))["lp"] == "bf16-torch"
g = f["step_00000019/layer_001"]
q, k = g["q"][0].astype(np.float64), g["k"][0].astype(np.float64)  # [H, T, D], batch 0
def bf16(x):  # nearest-even to 8 significant bits, from double (normal range)
    m, e = np.frexp(x)
    return np.ldexp(np.round(m * 256) / 256, e)
a = float(f.attrs["softmax_scale"])
for h in range(q.shape[0]):
    for t in range(1, q.shape[1]):
        raw = k[h, : t + 1] @ q[h, t]
        exact, low = a * raw, bf16(bf16(raw) * bf16(a))
        ne, nb = int((exact == exact.max()).sum()), int((low == low.max()).sum())
        if nb >= 2 and ne == 1:
            print(h, t, ne, nb)
            raise SystemExit
print("- - - -")
PYEOF
)"
# the run is bit-reproducible and such rows are common in it: none found means the capture changed
[ "$H" != "-" ] || { bad "no row of the capture ties under BF16 scores alone (the trained capture changed?)"; finish; exit; }
"$T" figure fig6a --from an --layer 1 --head "$H" --batch 0 --token "$TOK" -o a.png 2> err > cap.txt || bad "fig6a: $(cat err)"
grep -q "$NBF keys have P-bar = 1" cap.txt && ok || bad "fig6a, head $H row $TOK: want $NBF keys with P-bar = 1 (exact scores: $NEX): $(cat cap.txt)"
grep -q "S as the attention reference computes it under bf16-torch (the analysis' lp)" cap.txt && ok ||
    bad "fig6a's caption does not say how the scores were formed"
"$T" figure fig9 --from an --layer 1 --head "$H" --batch 0 -o n.png 2> err > cap9.txt && ok || bad "fig9 finds no tied row: $(cat err)"
finish
