#!/usr/bin/env bash
# tilescope explain add in the formats with a chosen width (e8m6 ... e8m1, docs/PRESETS.md): the mechanism of
# docs/MECHANISM.md §5 in e8m4, worked by hand below, through --to and --acc; and the paper's own example
# (bf16), whose whole printout must stay what it was before these formats existed.
. "$(dirname "$0")/lib.sh"
: "${TSC:?TSC must name the tilescope binary}"
has() { grep -qF -- "$2" <<<"$1" || { echo "missing '$2' in output:" >&2; echo "$1" | head -40 >&2; return 1; }; }

# The paper's worked example, every line as printed before e8m* were added.
want=$(cat <<'TXT'
explain add: a + b in fp32 (nearest-even), the sum then rounded to bf16

  a = -2.4071154594421387    1 10000000 00110100000111000101110   (exponent 1)
  b = -2.296875              1 10000000 00100110000000000000000   (exponent 1)

1. addition in fp32
  alignment:       equal exponents (1): no shift
  overflow:        the significand sum overflowed: shifted right 1 bit (exponent 2)
  exact sum:       -4.703990459442139
  kept|r|sticky:   100101101000011100010111|0|   (24 kept bits | rounding bit | 0 sticky bits)
  rounding:        nothing discarded: exact
  fp32 sum:        -4.703990459442139   1 10000001 00101101000011100010111
  error:           0.0 (0.0 ULP of fp32)

2. rounding the fp32 sum to bf16
  fp32 sum bits:   1 10000001 0010110|1|000011100010111   (bf16 keeps 7 mantissa bits | rounding bit | sticky bits)
  kept|r|sticky:   10010110|1|000011100010111   (8 kept bits | rounding bit | 15 sticky bits)
  rounding:        rounding bit 1, sticky bits non-zero: more than half an ULP, rounded up in magnitude
  direction:       up (away from zero)
  bf16 result:     -4.71875   1 10000001 0010111
  error:           -0.014759540557861328 (-0.4723052978515625 ULP of bf16; exact sum -4.703990459442139)
TXT
)
out=$("$TSC" explain add -2.4071154594421387 -2.296875); ok test $? = 0
[ "$out" = "$want" ] && ok || { bad "the paper's example prints differently:"; diff <(echo "$want") <(echo "$out") >&2; }

# The same story in e8m4 (4 mantissa bits; its ULP in [4, 8) is 0.25). By hand: -2.376 is the FP32
# -2.375999927520752 = -(1.0011|0000001000001100010)b x 2, the e8m4 value -2.375 plus a residual of
# -7.2e-5; -2.25 = -(1.0010)b x 2. Same exponent, so the significands add to 10.0101000000100000110001b
# and the sum shifts right one bit: -4.625999927520752 (exact in FP32) = -(1.0010|1|000000100000110001)b
# x 4. To e8m4: kept 1.0010, rounding bit 1, sticky bits non-zero (the residual), so up in magnitude to
# -(1.0011)b x 4 = -4.75, error -4.75 + 4.625999927520752 = -0.12400007247924805 (-0.4960002899169922
# ULP). Were the sticky bits ignored, or the sum truncated, the result would be -4.5; in bf16 -4.625.
out=$("$TSC" explain add -2.376 -2.25 --to e8m4); ok test $? = 0
ok has "$out" "a + b in fp32 (nearest-even), the sum then rounded to e8m4"
ok has "$out" "a = -2.375999927520752     1 10000000 00110000001000001100010   (exponent 1)   [input -2.376 rounded into fp32]"
ok has "$out" "the significand sum overflowed: shifted right 1 bit (exponent 2)"
ok has "$out" "exact sum:       -4.625999927520752"
ok has "$out" "fp32 sum bits:   1 10000001 0010|1|000000100000110001   (e8m4 keeps 4 mantissa bits | rounding bit | sticky bits)"
ok has "$out" "kept|r|sticky:   10010|1|000000100000110001   (5 kept bits | rounding bit | 18 sticky bits)"
ok has "$out" "more than half an ULP, rounded up in magnitude"
ok has "$out" "e8m4 result:     -4.75   1 10000001 0011"
ok has "$out" "error:           -0.12400007247924805 (-0.4960002899169922 ULP of e8m4; exact sum -4.625999927520752)"
# Without the residual the sum -4.625 is an exact tie; the kept 1.0010 is even, so it stays: -4.5, +half an ULP.
out=$("$TSC" explain add -2.375 -2.25 --to e8m4); ok test $? = 0
ok has "$out" "an exact tie, rounded to even (down)"
ok has "$out" "e8m4 result:     -4.5   1 10000001 0010"
ok has "$out" "error:           0.125 (0.5 ULP of e8m4; exact sum -4.625)"
# Toward zero truncates the residual's case to -4.5 too; stochastic stays on the two neighbours.
out=$("$TSC" explain add -2.376 -2.25 --to e8m4 --round toward-zero); ok test $? = 0
ok has "$out" "e8m4 result:     -4.5   1 10000001 0010"
out=$("$TSC" explain add -2.376 -2.25 --to e8m4 --round stochastic --seed 3); ok test $? = 0
grep -qE "e8m4 result: +-4\.(5|75) " <<<"$out" && ok || bad "stochastic e8m4 result is not -4.5 or -4.75"
# JSON: the e8m4 result in its FP32 container, 0xc0980000 (-4.75 with the low 19 bits zero).
got=$("$TSC" explain add -2.376 -2.25 --to e8m4 --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["round_to"]
print(r["format"], r["result"], r["result_bits"], r["round_bit"], r["sticky"], r["sticky_nbits"], r["direction"])')
ok test "$got" = "e8m4 -4.75 0xc0980000 1 True 18 away"

# The accumulator in e8m4: 1 + 0.046875 = 1 + (1.1)b x 2^-5. The addend shifts right 5 bits, the exact
# sum is (1.0000|1|1)b: rounding bit 1 and a sticky bit, so up to (1.0001)b = 1.0625, error +0.015625 =
# 0.25 ULP of e8m4 (1/16). Then to e8m2: (1.00|0|1)b, below half, truncated to 1.0.
out=$("$TSC" explain add 1 0.046875 --acc e8m4 --to e8m2); ok test $? = 0
ok has "$out" "b = 0.046875               0 01111010 1000   (exponent -5)"
ok has "$out" "exponents 0 and -5: the smaller significand shifts right 5 bits"
ok has "$out" "kept|r|sticky:   10000|1|1   (5 kept bits | rounding bit | 1 sticky bit)"
ok has "$out" "e8m4 sum:        1.0625   0 01111111 0001"
ok has "$out" "error:           0.015625 (0.25 ULP of e8m4)"
ok has "$out" "e8m4 sum bits:   0 01111111 00|0|1   (e8m2 keeps 2 mantissa bits | rounding bit | sticky bits)"
ok has "$out" "e8m2 result:     1.0   0 01111111 00"
# Operands enter the accumulator format first: 2.3 in e8m4 is (1.0010)b x 2 = 2.25.
out=$("$TSC" explain add 2.3 1 --acc e8m4 --to none); ok test $? = 0
ok has "$out" "a = 2.25                   0 10000000 0010   (exponent 1)   [input 2.3 rounded into e8m4]"

# e8m1, one mantissa bit ([4, 8) holds 4 and 6, an ULP of 2). The FP32 sum -4.625999927520752 of the first
# example is -(1.0|0|101000000100000110001)b x 4: kept bit 0, rounding bit 0, the residual in the 21 sticky
# bits, so truncated to -4.0 (0xc0800000), error +0.625999927520752 = 0.312999963760376 ULP of e8m1.
out=$("$TSC" explain add -2.376 -2.25 --to e8m1); ok test $? = 0
ok has "$out" "fp32 sum bits:   1 10000001 0|0|101000000100000110001   (e8m1 keeps 1 mantissa bit | rounding bit | sticky bits)"
ok has "$out" "e8m1 result:     -4.0   1 10000001 0"
ok has "$out" "error:           0.625999927520752 (0.312999963760376 ULP of e8m1; exact sum -4.625999927520752)"
got=$("$TSC" explain add -2.376 -2.25 --to e8m1 --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["round_to"]
print(r["format"], r["result"], r["result_bits"], r["round_bit"], r["sticky"], r["sticky_nbits"], r["direction"])')
ok test "$got" = "e8m1 -4.0 0xc0800000 0 True 21 toward"
# Ties in an e8m1 accumulator: 1 + 0.75 = (1.1|1)b, an exact tie with an odd kept bit, up to 2.0 (+0.5 ULP);
# 1 + 0.25 = (1.0|1)b, a tie with an even kept bit, down to 1.0 (-0.5 ULP).
out=$("$TSC" explain add 1 0.75 --acc e8m1 --to none); ok test $? = 0
ok has "$out" "b = 0.75                   0 01111110 1   (exponent -1)"
ok has "$out" "kept|r|sticky:   11|1|   (2 kept bits | rounding bit | 0 sticky bits)"
ok has "$out" "an exact tie, rounded to even (up)"
ok has "$out" "e8m1 sum:        2.0   0 10000000 0"
ok has "$out" "error:           0.25 (0.5 ULP of e8m1)"
out=$("$TSC" explain add 1 0.25 --acc e8m1 --to none); ok test $? = 0
ok has "$out" "an exact tie, rounded to even (down)"
ok has "$out" "e8m1 sum:        1.0   0 01111111 0"
ok has "$out" "error:           -0.25 (-0.5 ULP of e8m1)"
# 2.3 = 1.15 x 2 enters e8m1 as 2 (2 and 3 are its neighbours, 2.5 the midpoint).
out=$("$TSC" explain add 2.3 1 --acc e8m1 --to none); ok test $? = 0
ok has "$out" "a = 2.0                    0 10000000 0   (exponent 1)   [input 2.3 rounded into e8m1]"

# e8m7 is bf16 (its canonical name prints), so --to e8m7 is the default output format.
ok test "$("$TSC" explain add -2.4071154594421387 -2.296875 --to e8m7)" = "$want"
# A width without a row is a usage error naming the formats.
err=$("$TSC" explain add 1 2 --acc e8m9 2>&1 >/dev/null); ok test $? = 2
ok has "$err" "unknown number format 'e8m9'"
ok has "$err" "e8m3, e8m2 or e8m1"

finish
