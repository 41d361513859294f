#!/usr/bin/env bash
# Small corrupt dumps cost little (docs/SECURITY.md): copies of the 680 KB synth dump with a few
# bytes changed the way a mutation search found slow (tilescope info took 12-39 s on them: HDF5
# allocated, zero-filled and copied the 2-4 GB a forged string length declared, at each read of a
# dataset's dtype attribute) are refused, naming the file and the forged attribute; and a dump that
# hangs libhdf5 is refused at the deadline of its size (seconds), not after 30 s.
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
PY=$(find_py h5py numpy) || { echo "skip: no python3 with h5py and numpy"; exit 77; }
DATA="$(cd "$(dirname "$0")/../data/hostile" && pwd)"
cd "$tmp" || exit 1
EXPECT_TIMEOUT=20
"$TSC" synth -o good.h5 -q || { echo "synth failed"; exit 1; }

# The forged copies. A dataset's dtype attribute is a variable-length string ("bf16"): its datatype
# message gives the size of the string's base type (1), and its data is the string's descriptor,
# the length (4 bytes, little-endian) and the address of the global heap collection ("GCOL").
"$PY" - <<'PYEOF' || { echo "forging failed"; exit 1; }
import struct
b = open("good.h5", "rb").read()
# the first dtype attribute message (version 1: name, datatype and dataspace sizes, each part
# padded to 8 bytes, then the data: the string's descriptor)
msg = b"dtype\0\0\0" + bytes([0x19, 1, 1, 0, 0x10, 0, 0, 0, 0x10, 0, 0, 0, 1, 0, 0, 0])
name = b.find(msg)
if name < 8 or b[name - 8] != 1:
    raise SystemExit(f"no version-1 dtype attribute message in good.h5 ({name})")
nsz, tsz, ssz = struct.unpack("<HHH", b[name - 6:name])
pad = lambda n: (n + 7) // 8 * 8
desc = name + pad(nsz) + pad(tsz) + pad(ssz)
if struct.unpack("<I", b[desc:desc + 4])[0] != 4 or b[struct.unpack("<Q", b[desc + 4:desc + 12])[0]:][:4] != b"GCOL":
    raise SystemExit(f"the descriptor at {desc} is not a 4-byte string's in a global heap collection")
def forge(path, at, value):
    c = bytearray(b)
    c[at] = value
    open(path, "wb").write(c)
forge("len7f.h5", desc + 3, 0x7F)              # length 0x7f000004 (2 GiB)
forge("len80.h5", desc + 3, 0x80)              # length 0x80000004
forge("base.h5", name + len(msg) - 1, 0x3A)    # base type of 0x3a000001 bytes: 4 x 973 MB
PYEOF

# refused_str FILE BYTES: info and analyze exit 1 naming FILE; info lists the forged attribute
refused_str() {
  local f=$1 n=$2
  expect 1 "$f: the dump has" "$TSC" info "$f"
  grep -qF "string attribute 'dtype' declares $n bytes, more than the 1048576 tilescope reads (a forged length); refused" \
    "$tmp/out" && ok || bad "info $f: no forged-length error in: $(grep -m1 error "$tmp/out")"
  expect 1 "$f" "$TSC" analyze "$f" -o "an_$f" -q
  [ ! -e "an_$f/summary.json" ] && ok || bad "analyze of $f wrote a summary"
}
refused_str len7f.h5 2130706436
refused_str len80.h5 2147483652
refused_str base.h5 3892314116
# uncontained, the same refusal (the check is tilescope's, not the child's)
TSC_CONTAIN=0 timeout 20 "$TSC" info len7f.h5 >out 2>err; rc=$?
[ "$rc" = 1 ] && grep -qF "declares 2130706436 bytes" out && ok || bad "TSC_CONTAIN=0 info len7f.h5: exit $rc"
# the sound dump still reads
timeout 20 "$TSC" info good.h5 >out 2>err && grep -q "validation: ok" out && ok || bad "info good.h5: $(head -2 err)"

# A dump that makes libhdf5 loop forever (tests/data/hostile/global-heap-hang.h5, 2 KB): refused at
# the deadline of its size, 2 s and a little (TSC_CONTAIN_TIMEOUT unset), where it was 30 s.
unset TSC_CONTAIN_TIMEOUT
cp "$DATA/global-heap-hang.h5" h.h5
expect 1 "h.h5: the HDF5 library did not finish reading the file's metadata within 2" "$TSC" info h.h5
limit=$(sed -n 's/.*within \([0-9.]*\) s.*/\1/p' "$tmp/err")
awk -v l="$limit" 'BEGIN { exit !(l >= 2 && l < 3) }' && ok || bad "the deadline of a 2 KB dump is '$limit' s, expected 2 to 3"
finish
