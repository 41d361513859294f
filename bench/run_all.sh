#!/usr/bin/env bash
# Runs every benchmark of bench/ against its baseline, in one go (`make bench`), and writes what they
# measured to one file, bench/RESULTS.md (or $TSC_BENCH_RESULTS): the date, the machine, the commit,
# and for each benchmark its command, the load average at its start and end, its README row and its
# whole output. The README's speed table is then regenerated from that file
# (scripts/bench_table.sh), so the figures it states are the ones measured, never typed.
#   bench/run_all.sh [BUILD_DIR]        (TSC_BENCH_REPEAT=N: runs of each table benchmark, default 5;
#                                         TSC_BENCH_ONLY=REGEX: only the benchmarks whose command matches;
#                                         the results file keeps the other benchmarks' sections,
#                                         bench/merge_results.py)
# Before each benchmark it waits (up to 60 s) for the load of the previous one to fade; a benchmark
# that still starts on a busy machine says so and claims no ratio (bench/load.sh).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
out=${TSC_BENCH_RESULTS:-$src/bench/RESULTS.md}
. "$src/bench/load.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
n=0
repeat=${TSC_BENCH_REPEAT:-5}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
# run [-1] SHOWN_COMMAND command...: runs one benchmark $repeat times (once with -1: the long ones), its
# output to the terminal and to $tmp/N.out; the README row is then the runs' rows merged by
# bench/merge_rows.py (each figure the median with the min–max range)
only=${TSC_BENCH_ONLY:-}
run() {
    local times=$repeat
    [ "$1" = -1 ] && { times=1; shift; }
    local shown=$1; shift
    if [ -n "$only" ] && ! [[ $shown =~ $only ]]; then return 0; fi
    n=$((n + 1))
    local ok=1
    : > "$tmp/$n.out"
    for i in $(seq 1 "$times"); do
        bench_settle 60
        echo; echo "== $shown (run $i of $times)"
        "$@" 2>&1 | tee -a "$tmp/$n.out" || ok=0
    done
    [ $ok = 1 ] || { echo "(failed: $shown)"; rc=1; }
    if [ "$times" -gt 1 ]; then
        grep -E '^TABLE \|' "$tmp/$n.out" | "$py" "$src/bench/merge_rows.py" | tee -a "$tmp/$n.out" || true
    fi
    printf '%s\n%s\n' "$shown" "$ok" > "$tmp/$n.cmd"
}
run "bash bench/bench_diagnose.sh build/tilescope 2" bash "$src/bench/bench_diagnose.sh" "$build/tilescope" 2
run -1 "bash bench/bench_diagnose_scaling.sh build/tilescope" bash "$src/bench/bench_diagnose_scaling.sh" "$build/tilescope"
run -1 "bash bench/profile_diagnose.sh build/tilescope 2" bash "$src/bench/profile_diagnose.sh" "$build/tilescope" 2
run "bash bench/run_attention.sh build --reps 5" bash "$src/bench/run_attention.sh" "$build" --reps 5
run "bash bench/bench_dump_io.sh build --reps 3" bash "$src/bench/bench_dump_io.sh" "$build" --reps 3
run "bash bench/run_heatmap.sh build --reps 3" bash "$src/bench/run_heatmap.sh" "$build" --reps 3
run "bash bench/bench_report.sh build" bash "$src/bench/bench_report.sh" "$build"
run -1 "build/bench_formats" "$build/bench_formats"
run -1 "bash bench/bench_many_heads.sh build/tilescope 3" bash "$src/bench/bench_many_heads.sh" "$build/tilescope" 3
run -1 "bash bench/bench_mpi_analysis.sh build/tilescope 5 analyze" bash "$src/bench/bench_mpi_analysis.sh" "$build/tilescope" 5 analyze
run -1 "bash bench/bench_mpi_train.sh build/tilescope 5 20" bash "$src/bench/bench_mpi_train.sh" "$build/tilescope" 5 20
run "bash bench/bench_train.sh build/tilescope 2" bash "$src/bench/bench_train.sh" "$build/tilescope" 2
# long contexts, kept to T = 16384 and analyze here (synth alone takes minutes at T = 32768; the T = 32768
# measurement, diagnose included, is `bash bench/bench_long_context.sh build/tilescope 2 1800 32768`)
run -1 "TSC_BENCH_CMDS=analyze bash bench/bench_long_context.sh build/tilescope 2 900 16384" \
    env TSC_BENCH_CMDS=analyze bash "$src/bench/bench_long_context.sh" "$build/tilescope" 2 900 16384

{
    echo "# Benchmark results"
    echo
    echo "Written by \`make bench\` (bench/run_all.sh); the README's speed table is generated from this file by"
    echo "scripts/bench_table.sh. Do not edit by hand."
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(lscpu 2> /dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, $(uname -sm)$(grep -q avx512f /proc/cpuinfo && echo ', AVX-512' || { grep -q avx2 /proc/cpuinfo && echo ', AVX2 (no AVX-512)'; })"
    echo "- runs: $repeat of each benchmark in the table (each figure the median, the min–max range in brackets)"
    [ -z "$only" ] || echo "- selection: this run measured only the benchmarks matching \`$only\` (TSC_BENCH_ONLY); the other sections are kept from earlier runs, each with the date and commit it was measured at"
    echo "- commit: $(git -C "$src" describe --always --dirty 2> /dev/null || echo unknown)"
    echo "- load limit: $(bench_load_limit) (a benchmark starting above it claims no ratio)"
    for i in $(seq 1 "$n"); do
        { read -r shown; read -r ok; } < "$tmp/$i.cmd"
        echo
        echo "## \`$shown\`"
        echo
        echo "- status: $([ "$ok" = 1 ] && echo ok || echo FAILED)"
        grep -E '^load average \((start|end)\)' "$tmp/$i.out" | sed 's/^/- /'
        row=$(grep -E '^TABLE \|' "$tmp/$i.out" | tail -1)
        [ -z "$row" ] || echo "- row: | \`$shown\` |${row#TABLE |}"
        echo
        echo '```text'
        # paths of this machine out: the source folder becomes ".", a temporary folder "TMP"
        grep -v '^TABLE |' "$tmp/$i.out" | sed -e "s|$src/||g" -e 's|/tmp/tmp\.[A-Za-z0-9]*|TMP|g'
        echo '```'
    done
} > "$tmp/results.md"
# a selection replaces its benchmarks' sections and keeps the others' (each section says when it ran)
if [ -n "$only" ] && [ -f "$out" ]; then
    "$py" "$src/bench/merge_results.py" "$out" "$tmp/results.md" > "$tmp/merged.md" && mv "$tmp/merged.md" "$tmp/results.md"
fi
mv "$tmp/results.md" "$out"
echo
echo "results: $out"
bash "$src/scripts/bench_table.sh" "$out" "$src/README.md" || rc=1
exit $rc
