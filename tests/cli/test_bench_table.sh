#!/bin/bash
# The README speed table is generated from the results file (scripts/bench_table.sh): planted rows
# replace exactly what lies between the markers, the rest of the README is kept byte for byte, a
# README without markers or a missing results file is refused; the load rule of the benchmarks
# (bench/load.sh) calls a machine busy above the limit and quiet below it.
. "$(dirname "$0")/lib.sh"
src=${TSC_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
gen="$src/scripts/bench_table.sh"

cat > "$tmp/RESULTS.md" <<'R'
# Benchmark results

- date: 2030-01-02 03:04 UTC
- machine: Planted CPU, 2 CPUs, Linux x86_64
- commit: abc1234
- load limit: 1.5 (a benchmark starting above it claims no ratio)

## `bench one`

- row: | `bench one` | first | 1.0 s | 3.0 s | 3.0x |

## `bench two`

- row: | `bench two` | second | 2.0 s | 2.0 s | not claimed (machine busy) |
R
printf '# T\n\nbefore\n<!-- bench-table:begin -->\n| old | typed | row |\n<!-- bench-table:end -->\nafter\n' > "$tmp/README.md"
cp "$tmp/README.md" "$tmp/orig.md"
ok bash "$gen" "$tmp/RESULTS.md" "$tmp/README.md"
grep -qF '| `bench one` | first | 1.0 s | 3.0 s | 3.0x |' "$tmp/README.md" && ok || bad "row one missing"
grep -qF 'not claimed (machine busy) |' "$tmp/README.md" && ok || bad "busy row missing"
grep -qF 'typed' "$tmp/README.md" && bad "the old table is still there" || ok
grep -qF 'Measured 2030-01-02 03:04 UTC on Planted CPU, 2 CPUs, Linux x86_64, commit abc1234' "$tmp/README.md" && ok ||
    bad "date/machine/commit line missing"
# outside the markers nothing changes
diff <(sed '/bench-table:begin/,/bench-table:end/d' "$tmp/orig.md") \
     <(sed '/bench-table:begin/,/bench-table:end/d' "$tmp/README.md") > /dev/null && ok || bad "text outside the markers changed"
# regenerating is idempotent
cp "$tmp/README.md" "$tmp/once.md"
ok bash "$gen" "$tmp/RESULTS.md" "$tmp/README.md"
cmp -s "$tmp/once.md" "$tmp/README.md" && ok || bad "a second run changed the README"
# refusals
printf 'no markers\n' > "$tmp/plain.md"
expect 1 "lacks the bench-table markers" bash "$gen" "$tmp/RESULTS.md" "$tmp/plain.md"
expect 1 "cannot read" bash "$gen" "$tmp/nope.md" "$tmp/README.md"

# a partial run merged into an earlier one (bench/merge_results.py): the header says which rows ran when
sed -e 's/^## `bench one`$/&\n\n- measured: 2030-01-02 03:04 UTC, commit abc1234/' \
    -e 's/^## `bench two`$/&\n\n- measured: 2029-05-06 07:08 UTC, commit def5678 (an earlier run, kept)/' \
    "$tmp/RESULTS.md" > "$tmp/merged.md"
cp "$tmp/orig.md" "$tmp/README2.md"
ok bash "$gen" "$tmp/merged.md" "$tmp/README2.md"
grep -qF '2030-01-02 03:04 UTC, commit abc1234 (one);' "$tmp/README2.md" &&
    grep -qF '2029-05-06 07:08 UTC, commit def5678 (two)' "$tmp/README2.md" && ok ||
    bad "merged header: $(sed -n '/begin/,/^$/p' "$tmp/README2.md")"

# the load rule
. "$src/bench/load.sh"
TSC_BENCH_MAX_LOAD=100000 bench_load start > "$tmp/l1"
[ "$BENCH_BUSY" = 0 ] && grep -q '^load average (start): [0-9.]* [0-9.]* [0-9.]* (limit 100000' "$tmp/l1" && ok ||
    bad "quiet machine: $(cat "$tmp/l1")"
TSC_BENCH_MAX_LOAD=-1 bench_load start > "$tmp/l2"
[ "$BENCH_BUSY" = 1 ] && grep -q ': BUSY$' "$tmp/l2" && ok || bad "busy machine: $(cat "$tmp/l2")"
finish
