# lib.sh: what the shell tests of tests/cli share (sourced, not a test: the runner only picks up
# test_*): a temporary folder $tmp removed at exit; the counters and their closing line;
# find_py, the python3 that imports the given modules (scripts/find_python.sh).
#   ok              count a pass (after a check written inline: `cond && ok || bad "why"`)
#   ok CMD ARGS...  run CMD, count a pass when it succeeds, else a failure naming it
#   bad MESSAGE     count a failure, print it
#   finish          print "N passed, N failed"; its status is the test's (0 when none failed)
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() {
  if [ $# -eq 0 ] || "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*" >&2; fi
}
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
find_py() { bash "$(dirname "${BASH_SOURCE[0]}")/../../scripts/find_python.sh" "$@"; }
