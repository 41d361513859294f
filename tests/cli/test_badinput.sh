#!/usr/bin/env bash
# Bad inputs: every one must give a message naming the file and the problem, exit 1 (2 for usage
# errors), and no crash (no signal, no sanitizer report).
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
# crashfree CMD...: exit 0 or 1, never a signal or a sanitizer report; 1 must come with a message
crashfree() {
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if { [ "$got" != 0 ] && [ "$got" != 1 ]; } || grep -qE "Sanitizer|runtime error" "$tmp/err" ||
     { [ "$got" = 1 ] && ! grep -qF "tilescope info: " "$tmp/err"; }; then
    echo "FAIL: '$*' exit $got, stderr:" >&2; head -5 "$tmp/err" >&2; fail=$((fail+1))
  else pass=$((pass+1)); fi
}

"$TSC" synth -o "$tmp/good.h5" -q || { echo "synth failed"; exit 1; }
"$TSC" synth -o "$tmp/z.h5" --deflate 6 -q || { echo "synth failed"; exit 1; }
size=$(stat -c %s "$tmp/good.h5")

expect 1 "missing.h5: cannot open: No such file or directory" "$TSC" info "$tmp/missing.h5"
echo "just some text, not HDF5" > "$tmp/text.h5"
expect 1 "text.h5: not an HDF5 file" "$TSC" info "$tmp/text.h5"
: > "$tmp/empty.h5"
expect 1 "empty.h5: not an HDF5 file (no HDF5 signature; the file is empty)" "$TSC" info "$tmp/empty.h5"
mkdir "$tmp/dir.h5"
expect 1 "dir.h5" "$TSC" info "$tmp/dir.h5"

# truncated at several offsets: the superblock, the metadata, the middle, the end
for off in 4 1000 $((size / 3)) $((size / 2)) $((size - 4096)) $((size - 1)); do
  head -c "$off" "$tmp/good.h5" > "$tmp/trunc_$off.h5"
  expect 1 "trunc_$off.h5" "$TSC" info "$tmp/trunc_$off.h5"
done

# flipped bytes anywhere (metadata or data): a clean verdict either way, never a crash
for off in 0 64 600 3000 $((size / 4)) $((size / 2)) $((size - 600)); do
  cp "$tmp/good.h5" "$tmp/flip.h5"
  printf '\xff\x00\xa5\x5a' | dd of="$tmp/flip.h5" bs=1 seek="$off" conv=notrunc status=none
  crashfree "$TSC" info "$tmp/flip.h5"
done
# in a compressed dump a damaged data chunk cannot be inflated: the deep read must catch it
zsize=$(stat -c %s "$tmp/z.h5")
caught=0
for off in $((zsize / 3)) $((zsize / 2)) $((2 * zsize / 3)); do
  cp "$tmp/z.h5" "$tmp/zflip.h5"
  head -c 256 /dev/zero | tr '\0' '\377' | dd of="$tmp/zflip.h5" bs=1 seek="$off" conv=notrunc status=none
  crashfree "$TSC" info "$tmp/zflip.h5"
  grep -q "error" "$tmp/out" && caught=$((caught+1))
done
if [ $caught -ge 1 ]; then pass=$((pass+1)); else echo "FAIL: no damaged compressed chunk detected" >&2; fail=$((fail+1)); fi

# unwritable output paths
echo x > "$tmp/plainfile"
expect 1 "plainfile/x.h5: cannot create" "$TSC" synth -o "$tmp/plainfile/x.h5" -q
expect 1 "nodir/x.h5: cannot create" "$TSC" synth -o "$tmp/nodir/x.h5" -q

# bad flags: usage errors
expect 2 "unknown option '--frobnicate'" "$TSC" info "$tmp/good.h5" --frobnicate
expect 2 "unknown option '--frobnicate'" "$TSC" synth -o "$tmp/x.h5" --frobnicate
expect 2 "--seed expects an integer" "$TSC" synth -o "$tmp/x.h5" --seed abc
expect 2 "needs a value" "$TSC" synth -o

# content errors need h5py to plant them
py=$(find_py) || { echo "SKIP content errors: no python3 with h5py";
  finish; exit $?; }
for n in v2 name nohead nok shape gqa dtype; do cp "$tmp/good.h5" "$tmp/$n.h5"; done
"$py" - "$tmp" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
def edit(name):
    return h5py.File(f"{d}/{name}.h5", "r+")
with edit("v2") as f: f.attrs["format_version"] = 2
with edit("name") as f: f.attrs["format"] = "something-else"
with edit("nohead") as f: del f.attrs["n_head"]
with edit("nok") as f: del f["step_00000001/layer_001/k"]
with edit("shape") as f: f.attrs["seq_len"] = 65
with edit("gqa") as f: f.attrs["n_kv_head"] = 3
with edit("dtype") as f:
    g = f["step_00000000/layer_000"]; del g["v"]; g["v"] = np.zeros((1, 4, 64, 16), np.int16)
PY
expect 1 "v2.h5: dump format version 2, this build of tilescope reads version 1" "$TSC" info "$tmp/v2.h5"
expect 1 "name.h5: not a tilescope dump (root attribute format = 'something-else'" "$TSC" info "$tmp/name.h5"
expect 1 "nohead.h5" "$TSC" info "$tmp/nohead.h5"
grep -q "n_head" "$tmp/err" && pass=$((pass+1)) || { echo "FAIL: n_head not named" >&2; fail=$((fail+1)); }
expect 1 "the dump has 1 error" "$TSC" info "$tmp/nok.h5"
grep -q "step 1, layer 1: dataset 'k' is missing" "$tmp/out" && pass=$((pass+1)) || { echo "FAIL: missing k not named" >&2; fail=$((fail+1)); }
expect 1 "the dump has" "$TSC" info "$tmp/shape.h5"
grep -q "has shape \[1, 4, 64, 16\], the metadata implies \[1, 4, 65, 16\]" "$tmp/out" && pass=$((pass+1)) || { echo "FAIL: shape not explained" >&2; fail=$((fail+1)); }
expect 1 "n_head = 4 is not a multiple of n_kv_head = 3" "$TSC" info "$tmp/gqa.h5"
expect 1 "the dump has 1 error" "$TSC" info "$tmp/dtype.h5"
grep -q "stored type is not floating-point" "$tmp/out" && pass=$((pass+1)) || { echo "FAIL: dtype not explained" >&2; fail=$((fail+1)); }
finish
