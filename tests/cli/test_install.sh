#!/usr/bin/env bash
# `cmake --install` gives a library a downstream project uses through find_package(tilescope) and
# through pkg-config; the consumer captures one step and reads back a known value.
set -euo pipefail
: "${TSC_BUILD:?}" "${TSC_SRC:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$TSC_BUILD" --prefix "$tmp/prefix" >/dev/null
# A sanitized library needs sanitized consumers (the ASan runtime must come first).
cflags=""
pyenv=()
if grep -q '^TSC_SANITIZE:BOOL=ON' "$TSC_BUILD/CMakeCache.txt"; then
  cflags="-fsanitize=address,undefined"
  # Python loading a sanitized library needs the ASan runtime first (as tests/run_py.sh does)
  pyenv=(LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
for f in include/tilescope/tsc_capture.h include/tilescope/tsc_formats.h lib/pkgconfig/tilescope.pc \
         lib/cmake/tilescope/tilescopeConfig.cmake lib/libtilescope.a bin/tilescope; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL: installed tree lacks $f"; exit 1; }
done
ls "$tmp/prefix"/lib/libtilescope.so* >/dev/null || { echo "FAIL: no shared library installed"; exit 1; }

# find_package
cmake -S "$TSC_SRC/tests/install_consumer" -B "$tmp/cb" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$cflags" >/dev/null
cmake --build "$tmp/cb" >/dev/null
out=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/cb/consumer" "$tmp/a.h5")
# q[i] = 0.25 i; element (b=0, h=1, t=2, d=3) is index 1*12 + 2*4 + 3 = 23 -> 5.75
[ "$out" = "q[b=0,h=1,t=2,d=3] = 5.75" ] || { echo "FAIL: find_package consumer printed '$out'"; exit 1; }

# pkg-config, static library
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" cc $cflags -o "$tmp/consumer_pc" "$TSC_SRC/tests/install_consumer/consumer.c" \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs --static tilescope)
out=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer_pc" "$tmp/b.h5")
[ "$out" = "q[b=0,h=1,t=2,d=3] = 5.75" ] || { echo "FAIL: pkg-config consumer printed '$out'"; exit 1; }
# the Python package, installed beside the library, finds it and the program without any variable
py=$(bash "$TSC_SRC/scripts/find_python.sh") && {
  out=$(cd "$tmp" && env -u TILESCOPE_LIB -u TILESCOPE_BIN "${pyenv[@]}" PYTHONPATH="$tmp/prefix/lib/python3/dist-packages" "$py" -c \
    'import tilescope as t; d = t.Dump("a.h5"); print(d.read_float(d.steps[0], d.layers(d.steps[0])[0], "q")[0, 1, 2, 3], t.program())')
  [ "$out" = "5.75 $tmp/prefix/bin/tilescope" ] || { echo "FAIL: the installed Python package printed '$out'"; exit 1; }
}
echo "1 passed, 0 failed"
