#!/usr/bin/env bash
# tilescope explain add: the worked example of docs/MECHANISM.md §5 and its no-residual counterfactual,
# printed and as JSON; other formats and modes; usage errors (exit 2).
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
has() { grep -qF -- "$2" <<<"$1" || { echo "missing '$2' in output:" >&2; echo "$1" | head -40 >&2; return 1; }; }

# The paper's numbers: exact FP32 sum -4.703990459442139 with bits 1 10000001 0010110|1|000011100010111,
# rounded to BF16 -4.71875 (1 10000001 0010111), error -0.014759540557861328.
out=$("$TSC" explain add -2.4071154594421387 -2.296875); ok test $? = 0
ok has "$out" "a = -2.4071154594421387"
ok has "$out" "b = -2.296875"
ok has "$out" "1 10000000 00110100000111000101110"
ok has "$out" "1 10000000 00100110000000000000000"
ok has "$out" "equal exponents (1): no shift"
ok has "$out" "the significand sum overflowed: shifted right 1 bit (exponent 2)"
ok has "$out" "exact sum:       -4.703990459442139"
ok has "$out" "1 10000001 0010110|1|000011100010111"
ok has "$out" "10010110|1|000011100010111"
ok has "$out" "more than half an ULP, rounded up in magnitude"
ok has "$out" "bf16 result:     -4.71875   1 10000001 0010111"
ok has "$out" "error:           -0.014759540557861328"

# Without the residual: the exact tie -4.703125 rounds to even, -4.6875, error +half an ULP.
out=$("$TSC" explain add -2.40625 -2.296875); ok test $? = 0
ok has "$out" "exact sum:       -4.703125"
ok has "$out" "an exact tie, rounded to even (down)"
ok has "$out" "bf16 result:     -4.6875   1 10000001 0010110"
ok has "$out" "error:           0.015625 (0.5 ULP of bf16"

# JSON, parsed with the interpreter on PATH (json is in every python3's standard library).
j=$("$TSC" explain add -2.4071154594421387 -2.296875 --json); ok test $? = 0
got=$(echo "$j" | python3 -c '
import json, sys
d = json.load(sys.stdin)
a, r = d["add"], d["round_to"]
print(a["exact"], a["direction"], d["carry_shift"], d["sum_bits"], r["result"], r["result_bits"], r["round_bit"],
      r["sticky"], r["error"], r["direction"])')
ok test "$got" = "-4.703990459442139 exact 1 1 10000001 0010110|1|000011100010111 -4.71875 0xc097 1 True -0.014759540557861328 away"

# Toward zero truncates the same sum; an FP16 accumulator; a far-apart addend sets only sticky bits.
out=$("$TSC" explain add -2.4071154594421387 -2.296875 --round toward-zero); ok test $? = 0
ok has "$out" "bf16 result:     -4.6875"
out=$("$TSC" explain add 1 0.0000001 --acc fp16 --to fp8-e4m3); ok test $? = 0
ok has "$out" "b = 1.1920928955078125e-07"      # 1e-7 rounded into fp16 (a subnormal)
ok has "$out" "fp16 sum:        1.0"
# 1 - b with b = m * 2^-123 (m has 5 trailing zeros): sticky bits run from 2^-26 down to 2^-118.
out=$("$TSC" explain add 1 -1e-30 --to none); ok test $? = 0
ok has "$out" "exponents 0 and -100: the smaller significand shifts right 100 bits"
ok has "$out" "1 leading bit cancelled (exponent -1)"
ok has "$out" "fp32 sum:        1.0"
ok has "$out" "(24 kept bits | rounding bit | 93 sticky bits)"
# Stochastic: reproducible for a seed.
s1=$("$TSC" explain add 1 0.001 --round stochastic --seed 5 --json); s2=$("$TSC" explain add 1 0.001 --round stochastic --seed 5 --json)
ok test "$s1" = "$s2"

# Usage errors: exit 2 with the usage text.
for args in "add 1" "add 1 2 3" "add 1 x" "add 1 2 --acc fp12" "add 1 2 --round up" "add 1e999 1"; do
  # shellcheck disable=SC2086
  err=$("$TSC" explain $args 2>&1 >/dev/null); rc=$?
  ok test "$rc" = 2
  ok has "$err" "usage: tilescope explain"
done
out=$("$TSC" explain --help); ok test $? = 0
ok has "$out" "--acc FMT"

# explain DUMP on a synthetic dump. What synth plants (its --help): layer 1, heads 1 and 3, rows 8,
# 10, ... have exactly two maxima at keys 0 and 8, V's feature 4 ~ N(-2.2, 0.4), the rest of the
# scores >= 11 below: the bf16-torch regime where the tile's P-bar V sum rounds up in magnitude.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok "$TSC" synth -o "$tmp/t.h5" -q
out=$("$TSC" explain "$tmp/t.h5" --layer 1 --head 1 --row 8 --feature 4); ok test $? = 0
ok has "$out" "policy: bf16-torch+tile:q=16,k=16"          # the dump's own policy by default
ok has "$out" "replay: bit-identical to the attention reference after each of 4 key tiles"
ok has "$out" "keys with P-bar = 1 (tied row maxima): 0, 8 (2 keys)"
j=$("$TSC" explain "$tmp/t.h5" --layer 1 --head 1 --row 8 --feature 4 --json); ok test $? = 0
got=$(echo "$j" | python3 -c '
import json, sys
d = json.load(sys.stdin)
top = d["top"][0]
# the largest event: the tile sum rounded to bf16, rounding bit 1 with sticky bits: up in magnitude
print(d["pbar_one_keys"], d["replay_matches_reference"], d["o_matches_reference"], d["o"] == d["o_dump"],
      top["kind"], top["format"], top["direction"], top["error"] < 0, top["bits"].split("|")[1],
      top["bits"].split("|")[2].strip("0") != "", abs(top["error_ulps"]) <= 0.5, d["o"] * d["l"] == d["obar"])')
ok test "$got" = "[0, 8] True True True pv bf16 away True 1 True True True"
# Every policy replays bit for bit: fused and unfused, FP64, odd tiles, GQA below.
for p in fp64 bf16-fa2 fp8-fa3 "bf16-fa2+tile:q=4,k=3" "bf16-torch+tile:q=5,k=3+rz"; do
  out=$("$TSC" explain "$tmp/t.h5" --layer 1 --head 3 --row 10 --feature 9 --policy "$p"); ok test $? = 0
  ok has "$out" "replay: bit-identical to the attention reference"
done
# Algorithm 3 removes P-bar = 1 at the tied keys; a row with a unique maximum has exactly one.
out=$("$TSC" explain "$tmp/t.h5" --layer 1 --head 1 --row 8 --feature 4 --policy bf16-torch+stable)
ok has "$out" "keys with P-bar = 1 (tied row maxima): none (0 keys)"
out=$("$TSC" explain "$tmp/t.h5" --layer 1 --head 1 --row 9 --feature 4 --policy fp32)
ok has "$out" "(1 key)"
# Grouped-query attention: query head 2 reads kv head 0.
ok "$TSC" synth -o "$tmp/g.h5" -q --shape llama-gqa --layers 1 --steps 0
out=$("$TSC" explain "$tmp/g.h5" --layer 1 --head 2 --row 32 --feature 20 --policy bf16-fa2); ok test $? = 0
ok has "$out" "head 2 (kv head 0)"
ok has "$out" "replay: bit-identical"
ok has "$out" "keys with P-bar = 1 (tied row maxima): 0, 32 (2 keys)"
# Failures: a missing file or step, out-of-range indices: exit 1 naming the file; bad flags: exit 2.
err=$("$TSC" explain "$tmp/none.h5" --layer 0 --head 0 --row 0 --feature 0 2>&1); ok test $? = 1
ok has "$err" "none.h5"
err=$("$TSC" explain "$tmp/t.h5" --step 99 --layer 0 --head 0 --row 0 --feature 0 2>&1); ok test $? = 1
ok has "$err" "no step 99"
err=$("$TSC" explain "$tmp/t.h5" --layer 0 --head 0 --row 64 --feature 0 2>&1); ok test $? = 1
ok has "$err" "row 64 is out of range: the dump has 64 rows (tokens) (0 to 63)"
err=$("$TSC" explain "$tmp/t.h5" --layer 0 --head 0 --row 1 2>&1); ok test $? = 2
err=$("$TSC" explain "$tmp/t.h5" --layer 0 --head 0 --row 1 --feature 0 --policy bf17 2>&1); ok test $? = 2
ok has "$err" "bf16-torch"
err=$("$TSC" explain "$tmp/t.h5" --layer 0 --head 0 --row 1 --feature 0 --top 0 2>&1); ok test $? = 2

finish
