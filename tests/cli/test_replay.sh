#!/usr/bin/env bash
# test_replay: `tilescope replay` on a `tilescope synth` dump.
#  - the fp64 replay equals a numpy softmax attention computed from the dump's q, k, v, do;
#  - on the planted rows (two exact maxima, V ~ N(-2.2, 0.4), dO < 0 at the planted features)
#    bf16-torch's delta is biased upward against fp32 (docs/MECHANISM.md §4-5), holding Ō and O in FP32
#    (+fp32:pv,oacc,o) removes most of it, and +hp-delta removes all of it;
#  - the file layout of docs/FORMAT.md §2; --json; errors: bad policy (2), missing do (1).
. "$(dirname "$0")/lib.sh"
[ -n "${TSC:-}" ] && [ -x "$TSC" ] || { echo "SKIP: \$TSC not set"; exit 77; }
cd "$tmp"

"$TSC" synth -o tiny.h5 --quiet || { echo "FAIL: synth"; exit 1; }

# usage errors: exit 2 and the list of valid policies
"$TSC" replay tiny.h5 --policy bf16 -o x.h5 2>err.txt; ok test $? -eq 2
ok grep -q "valid presets: fp64, fp32, bf16-fa2, fp16-fa2, fp8-fa3, bf16-torch" err.txt
"$TSC" replay tiny.h5 -o x.h5 2>err.txt; ok test $? -eq 2
"$TSC" replay tiny.h5 --policy fp32 --bogus 2>err.txt; ok test $? -eq 2
"$TSC" replay tiny.h5 --policy fp32 --heads 1:0 2>err.txt; ok test $? -eq 2
# job errors: exit 1, naming the file
"$TSC" replay missing.h5 --policy fp32 -o x.h5 2>err.txt; ok test $? -eq 1
ok grep -q "missing.h5" err.txt
ok test ! -e x.h5

# a normal run: table on stdout, file in place, no temporary left
"$TSC" replay tiny.h5 --policy fp32 --policy bf16-torch --policy bf16-torch+fp32:pv,oacc,o \
  --policy bf16-torch+hp-delta --policy fp64 --layers 1 --heads 1,3 -o r.h5 >out.txt 2>err.txt
ok test $? -eq 0
ok grep -q "^bf16-torch+fp32:pv,oacc,o " out.txt
ok grep -q "delta bias" out.txt
ok test -s r.h5
ok test -z "$(ls | grep tmp)"

# --dump-tiles: the dump's tiles (16 x 16 for tiny) go into every policy's name
"$TSC" replay tiny.h5 --policy bf16-torch --steps 0 --layers 0 --dump-tiles -o t.h5 >t.txt
ok test $? -eq 0
ok grep -q "bf16-torch+tile:q=16,k=16" t.txt

# --json: one object with the comparison of every policy against the first
"$TSC" replay tiny.h5 --policy fp32 --policy bf16-fa2 --steps 0 --layers 0 --json -o j.h5 >j.json
ok test $? -eq 0
ok python3 -c 'import json, sys; p = json.load(open("j.json"))["policies"][1]
sys.exit(0 if p["policy"] == "bf16-fa2" and p["o"]["max_abs"] > 0 and p["o"]["n_nonfinite"] == 0 else 1)'

py=$(find_py h5py numpy) || py=""
if [ -z "$py" ]; then
  echo "note: no python3 with h5py/numpy: file-content checks skipped"
else
  "$py" - <<'EOF'
import json, sys
import h5py, numpy as np
fails = 0
def check(cond, msg):
    global fails
    if not cond:
        print("FAIL:", msg); fails += 1
d = h5py.File("tiny.h5", "r"); r = h5py.File("r.h5", "r")
check(r.attrs["format"] == "tilescope-replay" and int(r.attrs["format_version"]) == 1, "root format")
check(list(r.attrs["heads"]) == [1, 3], "heads attribute")
pol = [r["policy_%d" % i].attrs["policy"] for i in range(int(r.attrs["n_policies"]))]
check(pol == ["fp32", "bf16-torch", "bf16-torch+fp32:pv,oacc,o", "bf16-torch+hp-delta", "fp64"], "policy names %s" % pol)
scale = float(d.attrs["softmax_scale"])
# fp64 replay against numpy, computed here from the dump (independent of the C reference)
g = r["step_00000000/layer_001/policy_4"]
q = d["step_00000000/layer_001/q"].astype("float64")[()]
k = d["step_00000000/layer_001/k"].astype("float64")[()]
v = d["step_00000000/layer_001/v"].astype("float64")[()]
do = d["step_00000000/layer_001/do"].astype("float64")[()]
T = q.shape[2]
mask = np.tril(np.ones((T, T), bool))
for hi, h in enumerate([1, 3]):
    hk = h // (q.shape[1] // k.shape[1])
    s = scale * q[0, h] @ k[0, hk].T
    s = np.where(mask, s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True)); l = p.sum(1, keepdims=True); p /= l
    o = p @ v[0, hk]
    lse = np.log(l[:, 0]) + s.max(1)
    delta = (do[0, h] * o).sum(1)
    ds = p * (do[0, h] @ v[0, hk].T - delta[:, None]) * scale
    check(g["o"].dtype == np.float64, "fp64 policy stored as float64")
    for name, ref in [("o", o), ("lse", lse), ("delta", delta), ("dq", ds @ k[0, hk]),
                      ("dk", ds.T @ q[0, h]), ("dv", p.T @ do[0, h])]:
        got = g[name][0, hi]
        err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-300)
        check(err < 1e-10, "fp64 %s head %d: relative error %.3g vs numpy" % (name, h, err))
# the bias on planted rows (t = 8, 10, ... of the planted heads), summed over the steps
rows = np.arange(int(d.attrs["planted_rows_start"][0]), T, int(d.attrs["planted_rows_stride"][0]))
bias = np.zeros(5)
for step in [k for k in r.keys() if k.startswith("step_")]:
    g = r[step + "/layer_001"]
    ref = g["policy_0/delta"][()]
    for p_ in range(1, 4):
        bias[p_] += (g["policy_%d/delta" % p_][()] - ref)[0][:, rows].mean()
print("planted-row delta bias vs fp32: bf16-torch %.3e, +fp32:pv,oacc,o %.3e, +hp-delta %.3e" %
      (bias[1], bias[2], bias[3]))
check(bias[1] > 0, "bf16-torch delta bias on planted rows should be positive, got %.3g" % bias[1])
check(abs(bias[2]) < 0.1 * bias[1], "FP32 O-bar and O should remove most of the bias: %.3g vs %.3g" % (bias[2], bias[1]))
check(bias[3] == 0, "+hp-delta: delta from the FP32 forward equals fp32's delta exactly, got %.3g" % bias[3])
# a dump without do: remove it from a copy
import shutil
shutil.copy("tiny.h5", "nodo.h5")
with h5py.File("nodo.h5", "a") as f:
    for s in [k for k in f.keys() if k.startswith("step_")]:
        for l in f[s].keys():
            if "do" in f[s][l]: del f[s][l]["do"]
j = json.load(open("j.json"))
check(j["policies"][1]["policy"] == "bf16-fa2" and j["policies"][1]["o"]["max_abs"] > 0, "json content")
sys.exit(1 if fails else 0)
EOF
  ok test $? -eq 0
  "$TSC" replay nodo.h5 --policy fp32 -o n.h5 2>err.txt; ok test $? -eq 1
  ok grep -q "dataset 'do'" err.txt
  ok grep -q "nodo.h5" err.txt
  ok test ! -e n.h5
  "$TSC" replay nodo.h5 --policy fp32 --forward-only -o n.h5 --quiet >/dev/null; ok test $? -eq 0
fi
finish
