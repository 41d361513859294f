#!/usr/bin/env bash
# Test labels: the labels a test gives itself (a comment line starting "ctest-labels:" in its first 2000
# bytes, read by tests/CMakeLists.txt) are the known ones, and ctest sees them: `ctest -L slow` and
# `ctest -L gpu` select exactly the tests that say so.
. "$(dirname "$0")/../cli/lib.sh"
src=${TSC_SRC:?TSC_SRC must name the source tree}
build=${TSC_BUILD:?TSC_BUILD must name the build folder}
declare -A want
for f in "$src"/tests/*/test_*.c "$src"/tests/*/test_*.py "$src"/tests/*/test_*.sh; do
    line=$(head -c 2000 "$f" | grep -m1 -E '^(#|/\*| \*) ctest-labels:' | grep -o 'ctest-labels:[ a-z]*' || true)
    [ -n "$line" ] || continue
    for l in ${line#ctest-labels:}; do
        case $l in slow|gpu) ;; *) bad "$f: unknown label '$l' (known: slow, gpu)";; esac
        t=${f#"$src"/tests/}; t=${t%.*}
        want[$l]+="$t "
    done
done
[[ " ${want[gpu]} " == *" capture/test_cuda "* ]] && ok || bad "capture/test_cuda is not labelled gpu"
for l in slow gpu; do
    got=$(cd "$build" && ctest -N -L "^$l\$" | sed -n 's/^ *Test *#[0-9]*: //p' | sort | tr '\n' ' ')
    exp=$(printf '%s\n' ${want[$l]} | sort | tr '\n' ' ')
    [ "$got" = "$exp" ] && ok || bad "ctest -L $l selects '$got', the sources say '$exp'"
done
finish
