#!/usr/bin/env bash
# Regenerates the README's speed table from the results file `make bench` writes (bench/RESULTS.md):
# the lines between <!-- bench-table:begin --> and <!-- bench-table:end --> are replaced by the
# results' rows, with the date, machine and commit they were measured on (each row's, when a partial
# run kept earlier sections: bench/merge_results.py).
#   scripts/bench_table.sh [RESULTS] [README]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
res=${1:-$src/bench/RESULTS.md}
readme=${2:-$src/README.md}
[ -r "$res" ] || { echo "bench_table: cannot read $res (run make bench)" >&2; exit 1; }
grep -q '^<!-- bench-table:begin -->$' "$readme" && grep -q '^<!-- bench-table:end -->$' "$readme" || {
    echo "bench_table: $readme lacks the bench-table markers" >&2; exit 1; }
field() { sed -n "s/^- $1: //p" "$res" | head -1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
    if grep -q '^- measured: ' "$res"; then # a partial run merged into earlier ones (TSC_BENCH_ONLY)
        echo "Measured on $(field machine) by \`make bench\`, in more than one run:"
        awk '/^## `/ { c = $0; sub(/^## `/, "", c); sub(/`$/, "", c); n = split(c, w, " "); c = w[2] == "" ? w[1] : w[2]; sub(/.*\//, "", c) }
             /^- measured: / { m = $0; sub(/^- measured: /, "", m); sub(/ \(an earlier run, kept\)/, "", m)
                               if (!(m in rows)) order[++k] = m; rows[m] = rows[m] (rows[m] == "" ? "" : ", ") c }
             END { for (i = 1; i <= k; i++) printf "%s (%s)%s\n", order[i], rows[order[i]], i < k ? ";" : "" }' "$res"
    else
        echo "Measured $(field date) on $(field machine), commit $(field commit), by \`make bench\`"
    fi
    echo "(from [bench/RESULTS.md](bench/RESULTS.md), which also holds each run's output and load average;"
    echo "a benchmark that started above load $(field 'load limit' | cut -d' ' -f1) claims no ratio)."
    echo
    echo "| command | what | tilescope | baseline | ratio |"
    echo "| --- | --- | --- | --- | --- |"
    sed -n 's/^- row: //p' "$res"
} > "$tmp.table"
awk -v tf="$tmp.table" '
    /^<!-- bench-table:begin -->$/ { print; while ((getline l < tf) > 0) print l; skip = 1; next }
    /^<!-- bench-table:end -->$/ { skip = 0 }
    !skip' "$readme" > "$tmp"
rm -f "$tmp.table"
cat "$tmp" > "$readme"
echo "bench_table: $readme's speed table regenerated from $res ($(grep -c '^- row: ' "$res") rows)"
