# lib.sh: what the shell tests of tests/cli share (sourced, not a test: the runner only picks up
# test_*): a temporary folder $tmp removed at exit; the counters and their closing line;
# find_py, the python3 that imports the given modules (scripts/find_python.sh).
#   ok              count a pass (after a check written inline: `cond && ok || bad "why"`)
#   ok CMD ARGS...  run CMD, count a pass when it succeeds, else a failure naming it
#   bad MESSAGE     count a failure, print it
#   finish          print "N passed, N failed"; its status is the test's (0 when none failed)
#   expect RC WANT CMD...  run CMD (stdout to $tmp/out, stderr to $tmp/err) within
#                   $EXPECT_TIMEOUT s (default 20): a pass when it exits RC, stderr contains WANT, and
#                   no sanitizer report or crash shows
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
expect() {
  local rc=$1 want=$2; shift 2
  timeout "${EXPECT_TIMEOUT:-20}" "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ "$got" != "$rc" ] || ! grep -qF -- "$want" "$tmp/err" || grep -qE "Sanitizer|runtime error" "$tmp/err"; then
    echo "FAIL: '$*' exit $got (want $rc, with '$want'), stderr:" >&2; head -5 "$tmp/err" >&2; fail=$((fail+1))
  else pass=$((pass+1)); fi
}
