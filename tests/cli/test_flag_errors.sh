#!/usr/bin/env bash
# ctest-labels: slow (over 5 s on 2 cores)
# Every command reports a wrong flag the same way, exit 2 with a message naming the flag: an unknown
# option, a flag that takes a value given none, and an out-of-range number. Nothing here names a
# command or a flag: the commands are the ones `tilescope help` lists, their forms the synopsis
# lines of their usage text (the words before the first option: a literal subcommand such as
# `explain add` is kept, a placeholder such as DUMP becomes a path that does not exist), their
# flags the "--name VALUE" words of that text and of `tilescope help` (the options every command
# accepts). A flag whose usage line calls its value an integer or a number must be range-checked.
# Each run stops at the parser (the flag under test is last, or an unknown option follows it), so
# no job starts.
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
none="$tmp/none"

# run CMD ARGS...: the command's exit status in $got, stderr in $tmp/err
run() { timeout 20 "$TSC" "$@" >"$tmp/out" 2>"$tmp/err"; got=$?; }
sane() { ! grep -qE "Sanitizer|runtime error" "$tmp/err"; }

"$TSC" help >"$tmp/help" || { echo "tilescope help failed"; exit 1; }
cmds=$(awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {exit}' "$tmp/help")
[ "$(echo "$cmds" | wc -w)" -ge 10 ] && ok || bad "tilescope help lists too few commands: $cmds"

# The "--name VALUE" flags of a text (VALUE: a placeholder, [..., or a word with | or =).
value_flags() {
  grep -oE -- '(^|[^a-z0-9-])--[a-z][a-z0-9-]* ([A-Z[][^ ]*|[^ ]*[|=][^ ]*)' "$1" |
    grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}
# The flags of an option line (two spaces, then a dash) whose text calls the value an integer or a number.
number_flags() {
  grep -E -- '^  +-' "$1" | grep -E 'integer|number' |
    grep -oE -- '(^|[^a-z0-9-])--[a-z][a-z0-9-]* ([A-Z[][^ ]*|[^ ]*[|=][^ ]*)' |
    grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}
value_flags "$tmp/help" >"$tmp/global"
[ -s "$tmp/global" ] && ok || bad "tilescope help names no option that takes a value"

n_flags=0 n_numbers=0
for cmd in $cmds; do
  "$TSC" help "$cmd" >"$tmp/usage" || { bad "tilescope help $cmd failed"; continue; }
  # one form per synopsis line: the words after "tilescope CMD" up to the first option
  forms=()
  while IFS= read -r line; do
    form=""
    for w in $line; do
      case "$w" in
        -*|\[*|\(*) break ;;
        *[a-z]*) form="$form ${w%%|*}" ;;   # a literal word: the subcommand (the first of a|b)
        *) form="$form $none" ;;            # a placeholder
      esac
    done
    forms+=("$form")
  done < <(sed -nE "s/^(usage: |       )tilescope $cmd( (.*))?\$/\\3/p" "$tmp/usage")
  [ ${#forms[@]} -gt 0 ] && ok || { bad "$cmd: no synopsis line in its usage"; continue; }

  for form in "${forms[@]}"; do
    # shellcheck disable=SC2086 # a form is words
    run "$cmd" $form --zz-no-such-flag
    [ "$got" = 2 ] && grep -qF -- "unknown option '--zz-no-such-flag'" "$tmp/err" && sane && ok ||
      bad "$cmd$form --zz-no-such-flag: exit $got: $(head -2 "$tmp/err")"
  done

  { value_flags "$tmp/usage"; cat "$tmp/global"; } | sort -u >"$tmp/flags"
  number_flags "$tmp/usage" >"$tmp/numbers"
  while IFS= read -r flag; do
    n_flags=$((n_flags + 1))
    # a missing value: some form takes the flag and says so; none crashes or starts a job
    named=0 weird=""
    for form in "${forms[@]}"; do
      # shellcheck disable=SC2086
      run "$cmd" $form "$flag"
      if [ "$got" = 2 ] && sane; then grep -qF -- "$flag needs a value" "$tmp/err" && named=1
      else weird="$weird [$cmd$form $flag: exit $got: $(head -1 "$tmp/err")]"; fi
    done
    [ $named = 1 ] && [ -z "$weird" ] && ok || bad "$cmd $flag with no value:${weird:- no '$flag needs a value'}"

    # an out-of-range number: refused naming the flag, or taken (the next flag is then the error)
    checked=0 weird=""
    for form in "${forms[@]}"; do
      # shellcheck disable=SC2086
      run "$cmd" $form "$flag" 1e999 --zz-end
      if [ "$got" != 2 ] || ! sane; then weird="$weird [$cmd$form $flag 1e999: exit $got: $(head -1 "$tmp/err")]"
      elif grep -qF -- "unknown option '--zz-end'" "$tmp/err"; then :
      elif grep -qF -- "$flag expects" "$tmp/err"; then checked=1
      elif ! grep -qF -- "$flag" "$tmp/err"; then weird="$weird [$cmd$form $flag 1e999: $(head -1 "$tmp/err")]"; fi
    done
    [ -z "$weird" ] && ok || bad "$cmd $flag 1e999:$weird"
    if grep -qxF -- "$flag" "$tmp/numbers"; then
      n_numbers=$((n_numbers + 1))
      [ $checked = 1 ] && ok || bad "$cmd $flag: its usage says a number, but 1e999 is not refused as out of range"
    fi
  done <"$tmp/flags"
done
# the derivation found something to check (a broken usage scan would pass vacuously)
[ $n_flags -ge 100 ] && [ $n_numbers -ge 20 ] && ok || bad "only $n_flags value flags, $n_numbers number flags found"
echo "checked $n_flags (command, flag) pairs, $n_numbers of them numbers"
finish
