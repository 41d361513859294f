#!/usr/bin/env bash
# fuzz.sh [SECONDS_PER_TARGET] [TARGET...]: builds the fuzz build (build-fuzz/, clang with
# -DTSC_FUZZ=ON) and runs each libFuzzer target of fuzz/ for SECONDS_PER_TARGET seconds (default
# 10: a smoke run; docs/FUZZING.md gives the long run). TARGETs default to all of them
# (policy select json log dump safetensors ckpt).
#
# Each target starts from its committed seeds (fuzz/corpus/<t>/, read only) plus the corpus it
# grew in earlier runs (build-fuzz/corpus/<t>/), with a dictionary when fuzz/dict/<t>.dict exists.
# It runs in libFuzzer's fork mode, so a crash does not end the run: every crash, leak, timeout
# or out-of-memory input is written to fuzz/regressions/<t>/, where the ctest test
# fuzz/replay_<t> of every build replays it. Prints per target: executions, the final cov/ft
# and the inputs found; exits 1 when a target found any.
#
# Environment: TSC_FUZZ_BUILD (build folder, default build-fuzz), JOBS (build jobs, default 2),
# TSC_FUZZ_ARGS (extra libFuzzer flags), TSC_FUZZ_OUT (where found inputs go, default
# fuzz/regressions: a CI smoke run points it into the build folder).
set -euo pipefail

secs=${1:-10}
[[ $# -gt 0 ]] && shift
case $secs in '' | *[!0-9]*) echo "usage: fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TSC_FUZZ_BUILD:-$root/build-fuzz}
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(policy select json log dump safetensors ckpt pt npz pickle)

command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (libFuzzer comes with it)" >&2; exit 2; }
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DTSC_FUZZ=ON -DTSC_BUILD_TESTS=OFF \
    -DTSC_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/fuzz-configure.log" 2>&1 ||
    { cat "$build/fuzz-configure.log" >&2; exit 2; }
cmake --build "$build" -j "${JOBS:-2}" --target "${targets[@]/#/fuzz_}" >"$build/fuzz-build.log" 2>&1 ||
    { tail -40 "$build/fuzz-build.log" >&2; exit 2; }

# Longest input per target: what its inputs need (a dump seed is tens of KB) and no more, since a
# longer input costs time on every execution.
max_len() {
    case $1 in
    policy | select) echo 1024 ;;
    ckpt | pt | npz) echo 8192 ;; # a run.cfg with every setting is ~1 KB; its strings may be up to 1 KB each
    json | log) echo 32768 ;;
    dump) echo 131072 ;;
    *) echo 4096 ;;
    esac
}

# Per-input time limit: the text readers take microseconds; a dump input 10-50 ms (2 s leaves room
# for a loaded machine), and libhdf5 itself can loop on some corrupt files (fuzz/pending/README.md):
# every timeout costs its limit plus a job restart, so a long limit only costs time.
time_limit() {
    case $1 in
    dump) echo 2 ;;
    *) echo 10 ;;
    esac
}

# No symbolizing during the run (it costs seconds per crash, and fork mode logs only the first
# line of a report anyway): run the binary on the input for the full report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:leak_check_at_exit=0:allocator_may_return_null=1:symbolize=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:symbolize=0}
# Found inputs go to TSC_FUZZ_OUT, resolved now: the fuzzers run inside the build folder.
out_root=${TSC_FUZZ_OUT:-$root/fuzz/regressions}
[[ $out_root = /* ]] || out_root=$PWD/$out_root
found_any=0
no_run=0
printf '%-8s %12s %8s %8s %6s  %s\n' target execs cov ft found log
for t in "${targets[@]}"; do
    bin=$build/fuzz_$t
    work=$build/corpus/$t
    regr=$out_root/$t
    log=$build/fuzz_$t.log
    mkdir -p "$work" "$regr"
    before=$(find "$regr" -type f | wc -l)
    args=(-max_total_time="$secs" -max_len="$(max_len "$t")" -timeout="$(time_limit "$t")" -rss_limit_mb=2048
          -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 -artifact_prefix="$regr/")
    [[ -f $root/fuzz/dict/$t.dict ]] && args+=(-dict="$root/fuzz/dict/$t.dict")
    # shellcheck disable=SC2086
    (cd "$build" && "$bin" "${args[@]}" ${TSC_FUZZ_ARGS:-} "$work" "$root/fuzz/corpus/$t") >"$log" 2>&1 || true
    # An empty crash file is what fork mode writes when a job dies outside any input (e.g. at
    # exit): kept only when the empty input itself fails.
    for f in "$regr"/crash-da39a3ee5e6b4b0d3255bfef95601890afd80709; do
        [[ -f $f ]] && (cd "$build" && "$bin" "$f" >/dev/null 2>&1) && rm -f "$f"
    done
    # the dump files of fuzz_dump processes that died while opening one
    for f in /dev/shm/tsc_fuzz_dump.*.h5 /tmp/tsc_fuzz_dump.*.h5 "${TSC_FUZZ_TMPDIR:-/nonexistent}"/tsc_fuzz_dump.*.h5; do
        pid=${f##*/tsc_fuzz_dump.}
        pid=${pid%.h5}
        [[ -f $f && $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null && rm -f "$f"
    done
    after=$(find "$regr" -type f | wc -l)
    found=$((after - before))
    [[ $found -gt 0 ]] && found_any=1
    # the last status line: "#N: cov: C ft: F corp: ..." (fork mode) or "#N DONE cov: C ft: F ..."
    last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -1 || true)
    execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    printf '%-8s %12s %8s %8s %6s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$found" "${log#"$root"/}"
    if [[ -z $last ]]; then  # libFuzzer printed no status line: the target did not run at all
        echo "fuzz.sh: fuzz_$t did not run; the end of its log:" >&2
        tail -5 "$log" >&2
        no_run=1
    fi
done
[[ $no_run -eq 0 ]] || exit 1
if [[ $found_any -ne 0 ]]; then
    echo "fuzz.sh: inputs found are in ${TSC_FUZZ_OUT:-fuzz/regressions}/<target>/ (run build-fuzz/fuzz_<target> FILE" \
        "for the report; fuzz/regressions is replayed by ctest -R fuzz/replay)" >&2
    exit 1
fi
