#!/usr/bin/env bash
# Fails when ctest skipped a test: in CI every dependency is installed, so a skip means a test
# silently stopped testing. Usage: ci_no_skips.sh CTEST_OUTPUT_LOG [ALLOWED_REGEX]
# (ALLOWED_REGEX names tests allowed to skip in that build, e.g. a compiler without _Float16.)
set -euo pipefail
log=$1
allowed=${2:-}
[ -f "$log" ] || { echo "ci_no_skips: $log not found" >&2; exit 1; }
grep -q "tests passed" "$log" || { echo "ci_no_skips: $log holds no ctest summary" >&2; exit 1; }
# ctest lists each skipped test as '<tab><n> - <name> (Skipped)' after its summary line.
skipped=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (Skipped)$/\1/p' "$log" | sort -u)
if [ -n "$allowed" ]; then skipped=$(printf '%s\n' "$skipped" | grep -Ev "$allowed" || true); fi
if [ -n "$skipped" ]; then
  echo "ci_no_skips: these tests were skipped although CI installs their dependencies:" >&2
  printf '  %s\n' $skipped >&2
  exit 1
fi
echo "ci_no_skips: no test skipped ($log)"
