#!/usr/bin/env bash
# regime_search.sh OUT_DIR [TILESCOPE] [GRID]: the search for a regime where the paper's failure shows on this
# machine (docs/REPRO.md, "The regime search"). GRID: regime (default: learning rate and context) or dose (the
# same learning rate, P-bar V and O-bar rounded ever more coarsely with repro --dose (bf16, e8m5 ... e8m1), for gpt2-mini and
# llama-mini: the dose-response search). Runs `tilescope repro` at each point of the grid below
# (the four core runs: lp, hp, lp1, stable; the controls only where the budget allows) and writes
# OUT_DIR/search.md: per point the command, its wall time, repro's outcome table, and per run
# the largest attention logit and the most rows with tied maxima over training, from log.csv.
# Points run in order; a point whose folder already has outcome.md is not run again.
set -uo pipefail
out=${1:?usage: regime_search.sh OUT_DIR [TILESCOPE]}
src=$(cd "$(dirname "$0")/.." && pwd)
tsc=${2:-$src/build/tilescope}
grid=${3:-regime}
mkdir -p "$out"
# name | repro arguments (accelerating conditions labelled in docs/REPRO.md)
dose_points=()
for model in gpt2-mini llama-mini; do
    for d in bf16 e8m5 e8m4 e8m3 e8m2 e8m1; do
        dose_points+=("$model-$d|--steps 600 --lr 1e-2 --model $model --dose $d --budget 15")
    done
done
regime_points=(
    "lr1e-3|--steps 600 --lr 1e-3 --budget 12"
    "lr3e-3|--steps 600 --lr 3e-3 --budget 12"
    "lr1e-2|--steps 600 --lr 1e-2 --budget 12"
    "lr3e-2|--steps 600 --lr 3e-2 --budget 12"
    "ctx256-lr3e-3|--steps 800 --lr 3e-3 --batch 8 --seq-len 256 --budget 20"
    "ctx512-lr3e-3|--steps 800 --lr 3e-3 --model gpt2-mini,ctx=512 --batch 4 --seq-len 512 --budget 20"
    "ctx256-lr1e-2|--steps 800 --lr 1e-2 --batch 8 --seq-len 256 --budget 20"
)
case $grid in
    regime) points=("${regime_points[@]}") ;;
    dose) points=("${dose_points[@]}") ;;
    *) echo "regime_search.sh: GRID is regime or dose, not '$grid'" >&2; exit 2 ;;
esac
summary=$out/search.md
{
    echo "# Regime search ($grid grid): \`tilescope repro\` over a grid"
    echo
    echo "Base configuration: mini (gpt2-mini, BF16 autocast, batch 4 x 128, seed 1337) unless a point overrides it."
    echo "Machine: $(nproc) CPUs; $(date -u '+%Y-%m-%d')."
} > "$summary"
for p in "${points[@]}"; do
    name=${p%%|*}
    args=${p#*|}
    dir=$out/$name
    if [ ! -f "$dir/outcome.md" ]; then
        t0=$(date +%s)
        # shellcheck disable=SC2086
        "$tsc" repro $args -o "$dir" > "$out/$name.log" 2>&1 || echo "(repro failed: see $name.log)" >> "$out/$name.log"
        echo $(( $(date +%s) - t0 )) > "$dir.seconds"
    fi
    {
        echo
        echo "## $name"
        echo
        echo "    tilescope repro $args -o $name       # $(cat "$dir.seconds" 2> /dev/null || echo '?') s wall"
        echo
        sed -n '/^| run |/,/^$/p' "$dir/outcome.md" 2> /dev/null
        echo "| run | largest attention logit (any layer, any logged step) | most rows with tied maxima in one layer | train loss at the end |"
        echo "| --- | --- | --- | --- |"
        for r in lp hp lp1 stable onetile hpdelta; do
            log=$dir/runs/$r/log.csv
            [ -f "$log" ] || continue
            awk -F, -v run="$r" 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i ~ /^max_logit_/) ml[i] = 1; if ($i ~ /^tied_rows_/) tr[i] = 1 }; next }
                { for (i in ml) if ($i != "" && $i + 0 > m) m = $i + 0; for (i in tr) if ($i != "" && $i + 0 > t) t = $i + 0; last = $3 }
                END { printf "| %s | %.3g | %d | %s |\n", run, m, t, last }' "$log"
        done
    } >> "$summary"
done
echo "$summary"
