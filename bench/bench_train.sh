#!/usr/bin/env bash
# Training throughput of `tilescope train` against the same GPT-2 written in PyTorch
# (bench/train_torch.py, Debian's python3-torch on the CPU), same model size, batch and threads,
# in the same run: FP32, and BF16 autocast (tilescope's with its policy-emulated attention,
# bf16-torch in every layer; torch's under torch.autocast("cpu", torch.bfloat16)).
#   bench/bench_train.sh [TILESCOPE] [THREADS] [STEPS]
# Goals: FP32 >= 3x torch; BF16 with the emulated attention >= 1.5x torch's BF16; the matmuls >= 70%
# of the FMA peak (bench_train_step, the same run). Tokens per second
# are the median over the timed steps (the first 3 steps are warm-up; no validation, statistics or
# checkpoint steps among them).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tsc=${1:-$src/build/tilescope}
threads=${2:-$(nproc)}
steps=${3:-15}
. "$src/bench/load.sh"
py=""
for c in ${TSC_PYTHON:-} /usr/bin/python3 python3; do
    if "$c" -c 'import torch' 2> /dev/null; then py=$c; break; fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_load start
busy=$BENCH_BUSY
model=gpt2-mini
B=8
T=256

# median tokens/s of step lines 3.. of a `tilescope train` run
tsc_rate() {
    local prec=$1; shift
    "$tsc" train --model $model --precision "$prec" --batch $B --seq-len $T --steps "$steps" --threads "$threads" \
        --val-every 100000 --stats-every 100000 --ckpt-every 100000 "$@" -o "$tmp/run-$prec" \
        | awk '/^step /{ n++; for (i = 1; i <= NF; i++) if ($(i+1) == "tok/s" && n > 3) print $i }' \
        | sort -g | awk '{ v[++m] = $1 } END { if (m < 1) print "nan"; else print (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2 }'
}
torch_rate() {
    [ -n "$py" ] || { echo nan; return; }
    "$py" "$src/bench/train_torch.py" --layers 6 --heads 6 --dim 192 --ff 768 --vocab 256 --ctx $T --batch $B \
        --steps "$steps" --warmup 3 --threads "$threads" "$@" \
        | sed -n 's/.*"tokens_per_s": *\([0-9.eE+-]*\).*/\1/p'
}

echo "model $model (6 layers, 6 heads, dim 192, ctx $T), batch $B, $threads threads, $steps steps"
# the machine's limits, measured now (bench_peak.h), and what the baseline runs on
peak_bin=$(dirname "$tsc")/bench_peak
[ -x "$peak_bin" ] && OMP_NUM_THREADS=$threads "$peak_bin"
[ -z "$py" ] || "$py" -c 'import sys; sys.path.insert(0, sys.argv[1]); import train_torch, json, torch; torch.set_num_threads(int(sys.argv[2])); print("torch baseline:", json.dumps(train_torch.backend_settings()))' "$src/bench" "$threads" 2> /dev/null
f32=$(tsc_rate fp32)
t32=$(torch_rate)
b16=$(tsc_rate bf16 --attn-policy bf16-torch)
tb16=$(torch_rate --bf16)
# the matmuls' share of the FMA peak (forward + backward of the same model, bench_train_step.c)
step_bin=$(dirname "$tsc")/bench_train_step
fma=""
if [ -x "$step_bin" ]; then
    for p in fp32 bf16; do
        frac=$(OMP_NUM_THREADS=$threads "$step_bin" $model $B $T $p 5 | sed -n 's/.* = \([0-9.]*\)% of peak.*/\1/p' | head -1)
        fma="$fma $p ${frac:-?}%"
    done
fi
bench_load end
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "" || b == "nan" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }
printf '%-34s %12s %12s %8s %6s\n' "precision" "tilescope" "torch" "ratio" "goal"
printf '%-34s %12.0f %12s %8s %6s\n' "fp32 (tok/s)" "$f32" "${t32:-n/a}" "$(ratio "$f32" "$t32")" "3.0"
printf '%-34s %12.0f %12s %8s %6s\n' "bf16 autocast, bf16-torch attention" "$b16" "${tb16:-n/a}" "$(ratio "$b16" "$tb16")" "1.5"
[ -n "$py" ] || echo "torch not found (python3-torch): no ratio"
[ -z "$fma" ] || echo "matmuls, fraction of the FMA peak (bench_train_step):$fma (goal 70%)"
if [ "$busy" = 1 ]; then
    echo "$BENCH_NOT_CLAIMED"
else
    printf 'TABLE | `train`, gpt2-mini (B %d, T %d, %s threads), tokens/s fp32 / bf16 vs the same model in PyTorch (CPU, autocast) | %.0f / %.0f | %s / %s | fp32 %sx (goal 3), bf16 %sx (goal 1.5) |\n' \
        $B $T "$threads" "$f32" "$b16" "${t32:-n/a}" "${tb16:-n/a}" "$(ratio "$f32" "$t32")" "$(ratio "$b16" "$tb16")"
fi
