#!/usr/bin/env bash
# One spectral norm: the trainer's wq_norms.csv and the analysis of the same run's capture report
# the same number for every head of W^Q at a captured step (both call kernels/spectral.c on the
# same FP32 weights, the trainer before the step's update, the capture at the same point), and
# log.csv's wq_sn_L is the largest of layer L's heads. FP32 and a GQA model (llama-tiny: W^Q has
# H heads of rows while K and V have fewer).
. "$(dirname "$0")/lib.sh"
: "${TSC:?}"
py=$(find_py h5py numpy) || { echo "SKIP: no python3 with h5py and numpy"; exit 77; }
cd "$tmp"
for model in gpt2-tiny llama-tiny; do
  "$TSC" train --model $model --threads 2 --steps 4 --stats-every 3 --val-every 10 --val-batches 1 \
    --capture steps=3 -o $model -q >/dev/null 2>err && ok || bad "$model: train failed: $(head -3 err)"
  "$TSC" analyze $model/capture.h5 -o $model-an -q --no-census --no-identity >/dev/null 2>err \
    && ok || bad "$model: analyze of the capture failed: $(head -3 err)"
  "$py" - $model <<'PY' && ok || bad "$model: trainer and analysis disagree on the W^Q norms"
import csv, sys, h5py
m = sys.argv[1]
rows = [r for r in csv.DictReader(open(m + "/wq_norms.csv")) if r["step"] == "3"]
a = h5py.File(m + "-an/analysis.h5", "r")
seen = 0
for r in rows:
    n = a["step_00000003/layer_%03d/wq_head_norm" % int(r["layer"])][int(r["head"])]
    assert "%.9g" % n == r["wq_sn"], (m, r, "%.9g" % n)
    seen += 1
layers = sorted({int(r["layer"]) for r in rows})
assert seen == 2 * (4 if m.startswith("llama") else 2) and layers == [0, 1], (m, seen, layers)
log = [r for r in csv.DictReader(open(m + "/log.csv")) if r["step"] == "3"][0]
for l in layers:  # log.csv's column is the layer's largest head
    assert log["wq_sn_%d" % l] == max((r["wq_sn"] for r in rows if int(r["layer"]) == l), key=float), (m, l)
s = __import__("json").load(open(m + "-an/summary.json"))
assert s["spectral_unconverged"] == 0, s["spectral_unconverged"]
print(m, seen, "heads: the same norm in wq_norms.csv and analysis.h5")
PY
done
finish
