#!/usr/bin/env bash
# Dumps from strangers (docs/SECURITY.md): each hostile file below is refused with a message that
# names the file and the object, promptly, without reading another file's bytes, without a crash,
# and within a small memory; TSC_ALLOW_EXTERNAL=1 lets a trusted file's links through.
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
PY=$(find_py h5py numpy) || { echo "skip: no python3 with h5py and numpy"; exit 77; }
HOSTILE="$(dirname "$0")/hostile.py"
cd "$tmp" || exit 1
EXPECT_TIMEOUT=10  # every refusal here must come promptly (a FIFO must not block)
"$TSC" synth -o good.h5 -q || { echo "synth failed"; exit 1; }
mk() { "$PY" "$HOSTILE" "$@" || { echo "hostile.py $1 failed"; exit 1; }; }
refused="refused for an untrusted file (set TSC_ALLOW_EXTERNAL=1 to"

# external raw storage reading a secret file (by a relative name): refused, nothing copied out
head -c 16384 /dev/zero | tr '\0' 'S' > secret.txt
mk ext_storage ext.h5 good.h5 secret.txt
expect 1 "ext.h5:/step_00000000/layer_000/v: its raw data is stored in external files; $refused read it)" \
  "$TSC" replay ext.h5 --policy fp32 -o replay.h5
[ ! -e replay.h5 ] && ok || bad "replay of ext.h5 left replay.h5"
! grep -rqa SSSSSSSS . --exclude=secret.txt --exclude=ext.h5 && ok || bad "the secret's bytes were copied out"
expect 1 "ext.h5:/step_00000000/layer_000/v: its raw data is stored in external files" "$TSC" info ext.h5
expect 1 "ext.h5:/step_00000000/layer_000/v: its raw data is stored in external files" "$TSC" analyze ext.h5 -o an
# the opt-in reads it
TSC_ALLOW_EXTERNAL=1 timeout 10 "$TSC" info ext.h5 --quick >out 2>err && ok || bad "TSC_ALLOW_EXTERNAL=1 info ext.h5: $(head -2 err)"

# an external link, a virtual dataset, one mapped onto itself (HDF5 1.10.8 crashes reading it)
mk elink elink.h5 good.h5 good.h5
expect 1 "elink.h5:/step_00000000/layer_000: 'q' is an external link (to another file); $refused follow it)" \
  "$TSC" info elink.h5
TSC_ALLOW_EXTERNAL=1 timeout 10 "$TSC" info elink.h5 >out 2>err && ok || bad "trusted elink.h5: $(head -2 err)"
timeout 10 "$TSC" info --trust-links elink.h5 --quick >out 2>err && grep -q "validation: ok" out && ok ||
  bad "--trust-links elink.h5: $(head -2 err)"
mk vds vds.h5 good.h5 good.h5
expect 1 "vds.h5:/step_00000000/layer_000/v: a virtual dataset (its data is mapped from other datasets or files); $refused read it)" \
  "$TSC" info vds.h5
mk vds_self self.h5 good.h5
for cmd in "info self.h5" "info self.h5 --json" "replay self.h5 --policy fp32 -o r.h5" "analyze self.h5 -o an2"; do
  # shellcheck disable=SC2086
  expect 1 "self.h5:/step_00000000/layer_000/v: a virtual dataset" "$TSC" $cmd
done

# soft links for q that dangle or cycle
mk dangling dangling.h5 good.h5
expect 1 "dangling.h5:/step_00000000/layer_000: 'q' is a soft link that does not resolve (it dangles, cycles or leaves the file); refused" \
  "$TSC" info dangling.h5
mk cycle cycle.h5 good.h5
expect 1 "cycle.h5:/step_00000000/layer_000: 'q' is a soft link that does not resolve" "$TSC" info cycle.h5

# a FIFO as the dump, and as a capture session's step file: refused at once, never opened
mkfifo fifo.h5
expect 1 "fifo.h5: not a regular file (a FIFO, device or socket); refused" "$TSC" info fifo.h5
expect 1 "fifo.h5: not a regular file (a FIFO, device or socket); refused" "$TSC" replay fifo.h5 --policy fp32 -o r.h5
mkdir sess.capture
"$PY" - <<'PYEOF' || { echo "session set-up failed"; exit 1; }
import h5py
with h5py.File("good.h5", "r") as g, h5py.File("sess.capture/session.h5", "w") as s:
    for k, v in g.attrs.items():
        s.attrs[k] = v
PYEOF
mkfifo sess.capture/step_00000000.h5
expect 1 "sess.capture/step_00000000.h5: not a regular file (a FIFO, device or socket); refused" "$TSC" info sess.capture

# a 10 KB file declaring T = 16384 with never-written chunks: refused before any allocation
mk huge_t huge.h5
want="huge.h5:/step_00000000/layer_000/do: declares 4194304 bytes of data but stores 0, less than 1/1000 of it (never-written chunks or a forged extent); refused"
for cmd in "info huge.h5" "analyze huge.h5 -o an3" "replay huge.h5 --policy fp32 -o r.h5"; do
  # shellcheck disable=SC2086
  /usr/bin/time -f "%M" -o rss timeout 10 "$TSC" $cmd >out 2>err; got=$?
  { [ "$got" = 1 ] && grep -qF -- "$want" err; } && ok || bad "$cmd: exit $got, $(head -2 err)"
  [ "$(tail -1 rss)" -lt 204800 ] && ok || bad "$cmd: max RSS $(tail -1 rss) KiB"
done
# the memory budget bounds the validator's buffers, each sized by the slice it reads (2048 bytes: T 64 x D 16
# of fp16), never by the root attributes
TSC_MAX_MEMORY=1K timeout 10 "$TSC" info good.h5 >out 2>err
grep -qF "step 0, layer 0, do: one slice of the deep check needs 2048 bytes (0.0 GiB), above the memory budget of 1024 bytes" out &&
  ok || bad "TSC_MAX_MEMORY=1K: $(grep -m1 error out)"
TSC_MAX_MEMORY=16K timeout 10 "$TSC" info good.h5 >out 2>err
! grep -q "deep check needs" out && ok || bad "TSC_MAX_MEMORY=4K (above every slice): $(grep -m1 'deep check' out)"

# a float where an integer belongs is an error, not truncated (0.5 would read as non-causal)
mk causal_half half.h5 good.h5
expect 1 "half.h5: half.h5:/: attribute 'causal' = 0.5, expected an integer" "$TSC" info half.h5

# ESC sequences and malformed UTF-8 in attributes: text output shows them escaped, JSON stays valid
mk escapes esc.h5 good.h5
timeout 10 "$TSC" info esc.h5 >out 2>err && ok || bad "info esc.h5: $(head -2 err)"
! grep -q $'\x1b' out && ok || bad "info printed a raw ESC"
grep -qF 'producer evil\x1b[31mRED\x1b]0;title\x07\xff\xfe, policy' out && ok || bad "producer: $(grep producer out)"
grep -qF 'synth_shape         tiny\x1b[2J\xc3' out && ok || bad "synth_shape: $(grep synth_shape out)"
timeout 10 "$TSC" info esc.h5 --json >out.json 2>err && ok || bad "info --json esc.h5"
"$PY" - <<'PYEOF' && ok || bad "info --json is not strict UTF-8 JSON with the attributes replaced"
import json
d = json.loads(open("out.json", "rb").read().decode("utf-8", "strict"))
assert d["meta"]["producer"] == "evil\x1b[31mRED\x1b]0;title\x07\ufffd\ufffd", repr(d["meta"]["producer"])
assert d["planted"]["synth_shape"] == "tiny\x1b[2J\ufffd", repr(d["planted"]["synth_shape"])
PYEOF
finish
