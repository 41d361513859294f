#!/usr/bin/env bash
# Writes the SYNTHETIC example training logs of this folder (no training was run). Model, per step s
# (0 to 10000 every 100), with u(s) a deterministic pseudo-random number in [-0.5, 0.5) (an LCG):
#   stable:  val_loss = 3.05 + 7.9 * exp(-s / 450) + 0.02 * u(s)
#   bf16:    the same, plus 0.6 * (exp((s - 6500) / 1200) - 1) for s > 6500: the late blow-up of
#            docs/MECHANISM.md section 1 (low-precision FA run, loss explodes after several thousand steps)
#   train_loss = val_loss - 0.03; lr: 2000 warm-up steps to 1e-3, cosine to 1e-5 at step 10000.
# Output: synthetic_bf16.csv, synthetic_stable.tsv (the same model as TSV), synthetic_bf16_nanogpt.log.
#   bash examples/logs/make_synthetic_logs.sh [OUT_DIR]
set -euo pipefail
out=${1:-$(dirname "$0")}
awk -v out="$out" 'BEGIN {
    seed = 12345
    hdr = "# SYNTHETIC training log made by examples/logs/make_synthetic_logs.sh from a documented model; no training was run."
    print hdr > (out "/synthetic_bf16.csv"); print "step,train_loss,val_loss,lr" > (out "/synthetic_bf16.csv")
    print hdr > (out "/synthetic_stable.tsv"); print "step\ttrain_loss\tval_loss\tlr" > (out "/synthetic_stable.tsv")
    print hdr > (out "/synthetic_bf16_nanogpt.log")
    for (s = 0; s <= 10000; s += 100) {
        seed = (seed * 1103515245 + 12345) % 2147483648; u = seed / 2147483648 - 0.5
        base = 3.05 + 7.9 * exp(-s / 450) + 0.02 * u
        blow = s > 6500 ? 0.6 * (exp((s - 6500) / 1200) - 1) : 0
        lr = s < 2000 ? 1e-3 * s / 2000 : 1e-5 + 0.5 * (1e-3 - 1e-5) * (1 + cos(3.141592653589793 * (s - 2000) / 8000))
        printf "%d,%.4f,%.4f,%.6g\n", s, base + blow - 0.03, base + blow, lr > (out "/synthetic_bf16.csv")
        printf "%d\t%.4f\t%.4f\t%.6g\n", s, base - 0.03, base, lr > (out "/synthetic_stable.tsv")
        printf "step %d: train loss %.4f, val loss %.4f\n", s, base + blow - 0.03, base + blow > (out "/synthetic_bf16_nanogpt.log")
        printf "iter %d: loss %.4f, time 512.00ms, mfu 30.00%%\n", s, base + blow - 0.03 + 0.05 * u > (out "/synthetic_bf16_nanogpt.log")
    }
}'
