#!/usr/bin/env bash
# dose_table.sh SEARCH_DIR [OUT_STEM]: the dose-response table and plot of a dose grid (regime_search.sh ... dose).
# Reads each point's outcome.md (SEARCH_DIR/MODEL-DOSE/outcome.md, the table `tilescope repro` wrote) and writes
#   OUT_STEM.md   one row per (model, dose, run): diverged at step, final validation loss, the largest rise of
#                 the validation loss over its running minimum (the divergence rule's ratio: diverged above 2;
#                 from the run's log.csv, the first evaluation excluded as the rule does), the accumulated delta
#                 bias of lp's capture, the largest W^Q spectral norm at the end
#   OUT_STEM.dat  the same, whitespace-separated, for gnuplot
#   OUT_STEM.png  two panels against the significand width (mantissa bits: bf16 = 7 ... e8m1 = 1), one line per
#                 run kind: the step of divergence (a run that did not diverge is drawn at its length with an
#                 open marker: "none within N steps"), and the final validation loss
# OUT_STEM defaults to SEARCH_DIR/dose.
set -euo pipefail
dir=${1:?usage: dose_table.sh SEARCH_DIR [OUT_STEM]}
stem=${2:-$dir/dose}
dat=$stem.dat md=$stem.md
echo "# model dose mant run diverged steps final rise wq_last" > "$dat"
{
    echo "| model | dose | run | diverged at step | final val loss | largest rise over the running minimum | accumulated delta bias (lp, layer 1) | largest W^Q norm at the end |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
} > "$md"
for out in "$dir"/*/outcome.md; do
    point=$(basename "$(dirname "$out")")
    model=${point%-*} dose=${point##*-}
    case $dose in bf16) mant=7 ;; e8m[1-6]) mant=${dose#e8m} ;; *) continue ;; esac
    steps=$(sed -n 's/.* \([0-9][0-9]*\) steps per run.*/\1/p' "$out" | head -1)
    rises=""
    for log in "$(dirname "$out")"/runs/*/log.csv; do
        [ -f "$log" ] || continue
        r=$(basename "$(dirname "$log")")
        rises+="$r=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "val_loss") c = i; next }
            c && $c != "" && $c == $c + 0 { v = $c + 0; if (n++ && v / m > x) x = v / m; if (n == 1 || v < m) m = v }
            END { printf "%.3f", x }' "$log") "
    done
    awk -F'|' -v rises="$rises" -v model="$model" -v dose="$dose" -v mant="$mant" -v steps="$steps" -v md="$md" -v dat="$dat" '
        /^\| run \|/ { on = 1; next }
        on && /^\| ---/ { next }
        on && /^\|/ {
            for (i = 2; i <= NF; i++) gsub(/^ +| +$/, "", $i)
            run = $2; if ($4 ~ /not run/) next
            div = $7; sub(/ .*/, "", div)
            wq = $9; sub(/ \(.*/, "", wq); sub(/.*-> /, "", wq)
            rise = "-"; nr = split(rises, rr, " ")
            for (k = 1; k <= nr; k++) if (index(rr[k], run "=") == 1) rise = substr(rr[k], length(run) + 2)
            printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", model, dose, run, $7, $4, rise, $8, wq >> md
            printf "%s %s %s %s %s %s %s %s %s\n", model, dose, mant, run, (div == "none" ? -1 : div), steps, $4, rise, wq >> dat
            next }
        on { exit }' "$out"
done
echo "$md"
command -v gnuplot > /dev/null || { echo "gnuplot missing: no plot" >&2; exit 0; }
models=$(awk 'NR > 1 {print $1}' "$dat" | sort -u | tr '\n' ' ')
[ -n "$models" ] || { echo "no points with an outcome in $dir" >&2; exit 0; }
runs="lp hp lp1 stable hpdelta"
{
    echo "set terminal pngcairo size 1500,$((520 * $(echo "$models" | wc -w))) font 'DejaVu Sans,12'"
    echo "set output '$stem.png'"
    echo "set multiplot layout $(echo "$models" | wc -w),2"
    echo "set xrange [7.5:0.5]; set xtics ('bf16 (7)' 7, 'e8m6' 6, 'e8m5' 5, 'e8m4' 4, 'e8m3' 3, 'e8m2' 2, 'e8m1' 1)"
    echo "set xlabel 'significand width of the P-bar V / O-bar rounding (mantissa bits)'"
    echo "set key outside right top; set grid"
    for m in $models; do
        echo "set title '$m: step of divergence (open marker: none within the run)'; set ylabel 'step'; set yrange [0:*]"
        printf "plot "
        i=0
        for r in $runs; do
            [ $i -gt 0 ] && printf ", "
            printf "'%s' using (strcol(1) eq '%s' && strcol(4) eq '%s' && \$5 >= 0 ? \$3 + %s : 1/0):5 with points pt 7 ps 1.6 lc %d title '%s diverged', " "$dat" "$m" "$r" "$(echo "($i - 2) * 0.06" | bc -l)" $((i + 1)) "$r"
            printf "'%s' using (strcol(1) eq '%s' && strcol(4) eq '%s' && \$5 < 0 ? \$3 + %s : 1/0):6 with points pt 6 ps 1.6 lc %d title '%s: none'" "$dat" "$m" "$r" "$(echo "($i - 2) * 0.06" | bc -l)" $((i + 1)) "$r"
            i=$((i + 1))
        done
        echo
        echo "set title '$m: final validation loss'; set ylabel 'nats per byte'; set yrange [*:*]"
        printf "plot "
        i=0
        for r in $runs; do
            [ $i -gt 0 ] && printf ", "
            printf "'< grep \"^%s .* %s \" %s | sort -k3,3n' using 3:7 with linespoints pt 7 lc %d title '%s'" "$m" "$r" "$dat" $((i + 1)) "$r"
            i=$((i + 1))
        done
        echo
    done
    echo "unset multiplot"
} | gnuplot
echo "$stem.png"
