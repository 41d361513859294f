/* The formats with a chosen width, e8m6 ... e8m1 (FP32's exponent range, 6 ... 1 mantissa bits, in an
 * FP32 container), each against values written here from the definition (ldexp, not formats.c's
 * table): the largest finite value and overflow in every mode, Inf and NaN (quieted, sign and top
 * payload bits kept), signed zero, subnormals on FP32's grid coarsened to the width (no flush to
 * zero, ties to even), every code of the format through the container (decode, encode in every
 * mode, the bulk conversions), the midpoint between every two neighbouring codes (ties to the even
 * code, either side of it to the nearer one, toward zero to the lower), stray low bits, and the
 * policy grammar holding only P̄V and Ō in one of them; e8m1, whose one subnormal is also its
 * largest, once more with bit patterns worked by hand. Rounding over all 2^32 inputs:
 * test_formats_e8_exhaustive; stochastic rounding's mean (normal and subnormal, scalar and bulk):
 * test_formats.c with the other formats, and here e8m1 between 0 and its one subnormal. */
#include "tsc_accum.h"
#include "tsc_formats.h"
#include "tsc_policy.h"
#include "tsc_test.h"

#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const tsc_format_t widths[] = {TSC_FMT_E8M6, TSC_FMT_E8M5, TSC_FMT_E8M4, TSC_FMT_E8M3, TSC_FMT_E8M2,
                                       TSC_FMT_E8M1};
#define N_WIDTHS (int)(sizeof widths / sizeof *widths)
static const tsc_round_t rne = TSC_ROUND_NEAREST_EVEN, rtz = TSC_ROUND_TOWARD_ZERO, sr = TSC_ROUND_STOCHASTIC;

static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* The widths are the enum's last rows, in order, each with FP32's exponent and a 4-byte container. */
static void test_rows(void) {
    for (int k = 0; k < N_WIDTHS; k++) {
        const tsc_format_t f = widths[k];
        char name[8];
        snprintf(name, sizeof name, "e8m%d", 6 - k);
        CHECK_STREQ(tsc_format_name(f), name);
        CHECK_EQ_INT(tsc_format_mant_bits(f), 6 - k);
        CHECK_EQ_INT(tsc_format_exp_bits(f), 8);
        CHECK_EQ_INT(tsc_format_size(f), 4);
        CHECK_EQ_INT(f, TSC_FMT_FP8_E5M2 + 1 + k); /* after the existing rows: no existing value moved */
    }
    CHECK_EQ_INT(TSC_FMT_COUNT, TSC_FMT_E8M1 + 1);
}

/* max = (2 - 2^-p)·2^127; the overflow threshold (2 - 2^-(p+1))·2^127 is a tie with an odd max. */
static void test_overflow_and_specials(tsc_format_t f) {
    const int p = tsc_format_mant_bits(f);
    const char *nm = tsc_format_name(f);
    const double max = ldexp(2.0 - ldexp(1.0, -p), 127), thr = ldexp(2.0 - ldexp(1.0, -p - 1), 127);
    tsc_rng_t rng;
    tsc_rng_seed(&rng, 5);
    CHECKF(tsc_round(max, f, rne, NULL) == max, "%s", nm);
    CHECKF(tsc_round(FLT_MAX, f, rtz, NULL) == max, "%s", nm);
    CHECKF(tsc_round(-1e300, f, rtz, NULL) == -max, "%s", nm);
    CHECKF(isinf(tsc_round(thr, f, rne, NULL)), "%s: the threshold rounds to even, 2^128", nm);
    CHECKF(tsc_round(nextafter(thr, 0), f, rne, NULL) == max, "%s", nm);
    CHECKF(tsc_round(-nextafter(thr, 0), f, rne, NULL) == -max, "%s", nm);
    CHECKF(tsc_round(-1e39, f, rne, NULL) == -INFINITY, "%s", nm);
    CHECKF(tsc_round_f32(FLT_MAX, f, rne, NULL) == INFINITY, "%s", nm);
    int n_inf = 0, n_max = 0;
    for (int i = 0; i < 1000; i++) { /* halfway past max: up (to Inf) about half the time */
        double r = tsc_round(thr, f, sr, &rng);
        n_inf += isinf(r);
        n_max += r == max;
    }
    CHECKF(n_inf + n_max == 1000 && n_inf > 400 && n_inf < 600, "%s: %d Inf, %d max", nm, n_inf, n_max);
    for (int m = 0; m < 3; m++) {
        CHECKF(tsc_round(INFINITY, f, (tsc_round_t)m, &rng) == INFINITY, "%s mode %d", nm, m);
        CHECKF(tsc_round(-INFINITY, f, (tsc_round_t)m, &rng) == -INFINITY, "%s mode %d", nm, m);
        CHECKF(isnan(tsc_round(NAN, f, (tsc_round_t)m, &rng)), "%s mode %d", nm, m);
        CHECK_EQ_U32(tsc_encode(INFINITY, f, (tsc_round_t)m, &rng), 0x7f800000u);
        CHECK_EQ_U32(tsc_encode(-INFINITY, f, (tsc_round_t)m, &rng), 0xff800000u);
        CHECK_EQ_U32(tsc_encode(-0.0, f, (tsc_round_t)m, &rng), 0x80000000u);
    }
    CHECK_EQ_U32(tsc_encode(max, f, rne, NULL), f2u((float)max));
    /* NaN: sign and the top p payload bits, quiet bit set, low bits zero; read back as a NaN */
    const uint32_t low = (1u << (23 - p)) - 1u;
    const uint32_t nans[] = {0x7f800001u, 0xffc00000u, 0x7fa12345u, 0xff9fffffu, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        const uint32_t want = (nans[i] & ~low) | 0x00400000u;
        CHECKF(tsc_encode((double)u2f(nans[i]), f, rne, NULL) == want, "%s NaN 0x%08x", nm, nans[i]);
        uint32_t bulk[2];
        float src[2] = {u2f(nans[i]), u2f(nans[i])};
        tsc_convert_from_f32(f, src, &bulk[0], 1, rne, NULL);
        tsc_convert_from_f32(f, src + 1, &bulk[1], 1, rtz, NULL);
        CHECKF(bulk[0] == want && bulk[1] == want, "%s bulk NaN 0x%08x: 0x%08x 0x%08x", nm, nans[i], bulk[0], bulk[1]);
        const double back = tsc_decode(want, f);
        CHECKF(isnan(back) && !signbit(back) == !(want >> 31), "%s", nm);
    }
}

/* Subnormals: FP32's grid 2^-149 coarsened to the width, quantum s = 2^(-126-p), below 2^-126. */
static void test_subnormals(tsc_format_t f) {
    const int p = tsc_format_mant_bits(f);
    const char *nm = tsc_format_name(f);
    const double s = ldexp(1.0, -126 - p);
    CHECKF(tsc_round(s, f, rne, NULL) == s, "%s: the smallest subnormal is kept (no flush to zero)", nm);
    CHECK_EQ_U32(tsc_encode(s, f, rne, NULL), 1u << (23 - p));
    CHECKF(tsc_round(s / 2, f, rne, NULL) == 0.0, "%s: half of it ties to even 0", nm);
    CHECKF(tsc_round(-s / 2, f, rne, NULL) == 0.0 && signbit(tsc_round(-s / 2, f, rne, NULL)), "%s: -0", nm);
    CHECKF(tsc_round(nextafter(s / 2, 1), f, rne, NULL) == s, "%s", nm);
    CHECKF(tsc_round(1.5 * s, f, rne, NULL) == 2 * s, "%s: tie, odd goes up", nm);
    CHECKF(tsc_round(2.5 * s, f, rne, NULL) == 2 * s, "%s: tie, even stays", nm);
    CHECKF(tsc_round(1.99 * s, f, rtz, NULL) == s, "%s", nm);
    CHECKF(tsc_round(-1.99 * s, f, rtz, NULL) == -s, "%s", nm);
    const double top = ldexp(1.0, -126) - s; /* the largest subnormal */
    CHECKF(tsc_round(top, f, rne, NULL) == top, "%s", nm);
    CHECKF(tsc_round(top + s / 2, f, rne, NULL) == ldexp(1.0, -126), "%s: a tie with an odd LSB carries into 2^-126", nm);
    CHECKF(tsc_round(ldexp(1.0, -149), f, rtz, NULL) == 0.0, "%s", nm);
    /* the same in float, where the FP32 subnormals are the inputs */
    CHECKF(tsc_round_f32((float)(3 * s), f, rne, NULL) == (float)(3 * s), "%s", nm);
    CHECKF(tsc_round_f32(u2f(1u << (22 - p)), f, rne, NULL) == 0.0f, "%s", nm);
}

/* Every code of the format: sign, exponent field 0 ... 254, p mantissa bits. */
static void test_every_code(tsc_format_t f) {
    const int p = tsc_format_mant_bits(f);
    const size_t n = (size_t)2 * 255 << p;
    uint32_t *codes = malloc(n * 4), *back = malloc(n * 4);
    float *vals = malloc(n * sizeof(float));
    if (!codes || !back || !vals) abort();
    size_t i = 0;
    for (uint32_t sg = 0; sg < 2; sg++)
        for (uint32_t e = 0; e < 255; e++)
            for (uint32_t m = 0; m < 1u << p; m++) codes[i++] = sg << 31 | e << 23 | m << (23 - p);
    long bad = 0;
    for (i = 0; i < n; i++) {
        const double v = tsc_decode(codes[i], f);
        bad += v != (double)u2f(codes[i]) || !signbit(v) != !signbit(u2f(codes[i]));
        for (int m = 0; m < 2; m++) bad += tsc_encode(v, f, (tsc_round_t)m, NULL) != codes[i];
        bad += tsc_round(v, f, rne, NULL) != v;
        /* stray bits below the container's are not part of the value */
        bad += tsc_decode(codes[i] | ((1u << (23 - p)) - 1u), f) != v;
    }
    tsc_convert_to_f32(f, codes, vals, n);
    for (int m = 0; m < 3; m++) {
        tsc_rng_t rng;
        tsc_rng_seed(&rng, 3);
        tsc_convert_from_f32(f, vals, back, n, (tsc_round_t)m, &rng);
        bad += memcmp(back, codes, n * 4) != 0; /* exact values stay, in every mode */
    }
    bad += memcmp(vals, codes, n * 4) != 0;
    CHECKF(bad == 0, "%s: %ld of %zu codes do not round trip through the FP32 container", tsc_format_name(f), bad, n);
    free(codes); free(back); free(vals);
}

/* Code i = e·2^p + m (exponent field e, mantissa m) as a value from the definition: m·2^(-126-p) for
 * e = 0, (1 + m·2^-p)·2^(e-127) above; i = 255·2^p is 2^128, where the format has Inf. */
static double code_value(uint32_t i, int p) {
    const uint32_t e = i >> p, m = i & ((1u << p) - 1u);
    return e == 0 ? ldexp((double)m, -126 - p) : ldexp(1.0 + ldexp((double)m, -p), (int)e - 127);
}

/* Between every two neighbouring codes i and i + 1 (from 0 up to max and 2^128): the midpoint is a tie
 * that goes to the even code (i + 1 = 255·2^p is Inf), a hair either side goes to the nearer code,
 * toward zero keeps the lower one; the same for the negatives, through the double path, the float
 * path and the bulk conversion (the midpoints are floats: 2^(-127-p) >= 2^-149). */
static void test_neighbours(tsc_format_t f) {
    const int p = tsc_format_mant_bits(f);
    const char *nm = tsc_format_name(f);
    const uint32_t top = 255u << p; /* the code of 2^128 */
    const size_t n = top;
    float *mid = malloc(n * sizeof *mid);
    uint32_t *want = malloc(n * 4), *want_z = malloc(n * 4), *got = malloc(n * 4);
    if (!mid || !want || !want_z || !got) abort();
    long bad = 0;
    for (uint32_t i = 0; i < top; i++) {
        const double lo = code_value(i, p), hi = code_value(i + 1, p), m = 0.5 * (lo + hi);
        const double even = (i & 1u) ? (i + 1 == top ? INFINITY : hi) : lo;
        const double up = i + 1 == top ? INFINITY : hi;
        for (int s = 0; s < 2; s++) {
            const double sg = s ? -1.0 : 1.0;
            bad += tsc_round(sg * m, f, rne, NULL) != sg * even;
            bad += tsc_round(sg * nextafter(m, 0.0), f, rne, NULL) != sg * lo;
            bad += tsc_round(sg * nextafter(m, INFINITY), f, rne, NULL) != sg * up;
            bad += tsc_round(sg * m, f, rtz, NULL) != sg * lo;
            bad += tsc_round(sg * nextafter(hi, 0.0), f, rtz, NULL) != sg * lo;
            bad += tsc_round_f32((float)(sg * m), f, rne, NULL) != (float)(sg * even);
            bad += tsc_round_f32((float)(sg * m), f, rtz, NULL) != (float)(sg * lo);
        }
        mid[i] = (float)m;
        want[i] = f2u((float)even);
        want_z[i] = f2u((float)lo);
    }
    tsc_convert_from_f32(f, mid, got, n, rne, NULL);
    bad += memcmp(got, want, n * 4) != 0;
    tsc_convert_from_f32(f, mid, got, n, rtz, NULL);
    bad += memcmp(got, want_z, n * 4) != 0;
    CHECKF(bad == 0, "%s: %ld wrong roundings near the midpoints of %zu neighbouring codes", nm, bad, n);
    free(mid); free(want); free(want_z); free(got);
}

/* e8m1 by hand: a sign, FP32's 8 exponent bits and one mantissa bit, the FP32 bits 0x00400000 (so each
 * binade [2^e, 2^(e+1)) holds 1.0·2^e and 1.5·2^e); max 1.5·2^127 = 0x7f400000, overflow threshold
 * 1.75·2^127 = 0x7f600000; one subnormal, 2^-127 = 0x00400000, which is also the largest; NaN is
 * 0x7fc00000 or 0xffc00000. Each row: FP32 input bits, nearest-even bits, toward-zero bits. */
static void test_e8m1_by_hand(void) {
    const tsc_format_t f = TSC_FMT_E8M1;
    static const uint32_t rows[][3] = {
        {0x3f800000u, 0x3f800000u, 0x3f800000u}, /* 1 */
        {0x3fa00000u, 0x3f800000u, 0x3f800000u}, /* 1.25: a tie, 1 (1.0) is even */
        {0x3fa00001u, 0x3fc00000u, 0x3f800000u}, /* above the tie: 1.5 */
        {0x3f9fffffu, 0x3f800000u, 0x3f800000u}, /* below it: 1 */
        {0x3fc00000u, 0x3fc00000u, 0x3fc00000u}, /* 1.5 */
        {0x3fe00000u, 0x40000000u, 0x3fc00000u}, /* 1.75: a tie, 1.5 (1.1) is odd, up to 2 */
        {0x3fdfffffu, 0x3fc00000u, 0x3fc00000u},
        {0x3fffffffu, 0x40000000u, 0x3fc00000u}, /* just below 2 */
        {0xc0200000u, 0xc0000000u, 0xc0000000u}, /* -2.5: a tie, -2 even */
        {0xc0600000u, 0xc0800000u, 0xc0400000u}, /* -3.5: a tie, -3 odd, to -4; toward zero -3 */
        {0x40a00000u, 0x40800000u, 0x40800000u}, /* 5: a tie between 4 and 6, 4 */
        {0x40e00000u, 0x41000000u, 0x40c00000u}, /* 7: a tie between 6 and 8, 8; toward zero 6 */
        {0x3eaaaaabu, 0x3ec00000u, 0x3e800000u}, /* 1/3 in [0.25, 0.5): nearer 0.375 than 0.25 */
        {0x3dcccccdu, 0x3dc00000u, 0x3dc00000u}, /* 0.1 in [0.0625, 0.125): 0.09375, below 0.109375 */
        {0x7f000000u, 0x7f000000u, 0x7f000000u}, /* 2^127 */
        {0x7f400000u, 0x7f400000u, 0x7f400000u}, /* max, 1.5·2^127 */
        {0x7f5fffffu, 0x7f400000u, 0x7f400000u}, /* just below the overflow threshold */
        {0x7f600000u, 0x7f800000u, 0x7f400000u}, /* the threshold: a tie, the odd max goes up to Inf */
        {0x7f7fffffu, 0x7f800000u, 0x7f400000u}, /* FLT_MAX */
        {0xff600000u, 0xff800000u, 0xff400000u},
        {0x7f800000u, 0x7f800000u, 0x7f800000u}, /* Inf */
        {0xff800000u, 0xff800000u, 0xff800000u},
        {0x00000000u, 0x00000000u, 0x00000000u},
        {0x80000000u, 0x80000000u, 0x80000000u},
        {0x00400000u, 0x00400000u, 0x00400000u}, /* 2^-127, the one subnormal */
        {0x00200000u, 0x00000000u, 0x00000000u}, /* 2^-128: a tie between 0 (even) and 2^-127 */
        {0x00200001u, 0x00400000u, 0x00000000u},
        {0x00000001u, 0x00000000u, 0x00000000u}, /* 2^-149 */
        {0x803fffffu, 0x80400000u, 0x80000000u},
        {0x005fffffu, 0x00400000u, 0x00400000u},
        {0x00600000u, 0x00800000u, 0x00400000u}, /* 1.5·2^-127: a tie, 2^-127 odd, up to 2^-126 */
        {0x807fffffu, 0x80800000u, 0x80400000u}, /* the largest FP32 subnormal */
        {0x00800000u, 0x00800000u, 0x00800000u}, /* 2^-126, the smallest normal */
        {0x00a00000u, 0x00800000u, 0x00800000u}, /* 1.25·2^-126: a tie, 2^-126 even */
        {0x00e00000u, 0x01000000u, 0x00c00000u}, /* 1.75·2^-126: a tie, up to 2^-125 */
        {0x7f800001u, 0x7fc00000u, 0x7fc00000u}, /* NaN: quieted, the one payload bit is the quiet bit */
        {0xffbfffffu, 0xffc00000u, 0xffc00000u},
        {0x7fffffffu, 0x7fc00000u, 0x7fc00000u},
        {0xff812345u, 0xffc00000u, 0xffc00000u},
    };
    enum { N = sizeof rows / sizeof *rows };
    float src[N];
    uint32_t got[N], got_z[N];
    for (int i = 0; i < N; i++) src[i] = u2f(rows[i][0]);
    tsc_convert_from_f32(f, src, got, N, rne, NULL);
    tsc_convert_from_f32(f, src, got_z, N, rtz, NULL);
    for (int i = 0; i < N; i++) {
        const int nan = isnan(src[i]);
        CHECKF(got[i] == rows[i][1] && got_z[i] == rows[i][2], "bulk 0x%08x: 0x%08x 0x%08x", rows[i][0], got[i],
               got_z[i]);
        CHECKF(tsc_encode((double)src[i], f, rne, NULL) == rows[i][1], "encode 0x%08x", rows[i][0]);
        CHECKF(tsc_encode((double)src[i], f, rtz, NULL) == rows[i][2], "encode rtz 0x%08x", rows[i][0]);
        if (!nan) {
            CHECKF(f2u(tsc_round_f32(src[i], f, rne, NULL)) == rows[i][1], "round_f32 0x%08x", rows[i][0]);
            CHECKF(f2u(tsc_round_f32(src[i], f, rtz, NULL)) == rows[i][2], "round_f32 rtz 0x%08x", rows[i][0]);
            CHECKF(tsc_decode(rows[i][1], f) == (double)u2f(rows[i][1]), "decode 0x%08x", rows[i][1]);
        }
    }
    CHECK(tsc_decode(0x7f400000u, f) == 0x1.8p127);
    CHECK(tsc_decode(0x7f7fffffu, f) == 0x1.8p127); /* stray low bits are not part of the value */
    CHECK(tsc_decode(0x3fffffffu, f) == 1.5);
    CHECK(tsc_decode(0x00400000u, f) == 0x1p-127);
    CHECK(tsc_decode(0x003fffffu, f) == 0.0);
    CHECK(isinf(tsc_decode(0xff800000u, f)) && tsc_decode(0xff800000u, f) < 0);
    CHECK(isnan(tsc_decode(0x7fc00000u, f)));
    CHECK(tsc_round(0x1.8p127, f, rne, NULL) == 0x1.8p127);
    CHECK(tsc_round(0x1.bffffffffffffp127, f, rne, NULL) == 0x1.8p127); /* below 1.75·2^127 in double */
    CHECK(isinf(tsc_round(0x1.cp127, f, rne, NULL)));
    CHECK(tsc_round(1e300, f, rtz, NULL) == 0x1.8p127);
    /* stochastic rounding between 0 and the one subnormal s = 2^-127: x = k/8 s goes to s with
     * probability k/8 (5 sigma, fixed seed), never elsewhere */
    for (int k = 1; k < 8; k += 3) {
        enum { NS = 200000 };
        const double s = 0x1p-127, x = k / 8.0 * s, pr = k / 8.0;
        tsc_rng_t rng;
        tsc_rng_seed(&rng, 77 + (uint64_t)k);
        long ups = 0, other = 0;
        for (int i = 0; i < NS; i++) {
            const double r = tsc_round(x, f, sr, &rng);
            ups += r == s;
            other += r != s && r != 0.0;
        }
        CHECKF(fabs((double)ups / NS - pr) <= 5 * sqrt(pr * (1 - pr) / NS), "k=%d: %ld of %d up", k, ups, (int)NS);
        CHECK_EQ_INT(other, 0);
    }
}

/* The grammar holds P̄V and Ō at a width while the rest stays the preset's, and prints it back. */
static void test_policy(void) {
    tsc_policy_t p, base;
    CHECK(tsc_policy_preset(TSC_PRESET_BF16_TORCH, &base) == TSC_OK);
    CHECKF(tsc_policy_parse("bf16-torch+e8m4:pbar-pv,pv,oacc", &p) == TSC_OK, "%s", tsc_error_last());
    int other = 0;
    for (int s = 0; s < TSC_STAGE_COUNT; s++) {
        const int at = s == TSC_STAGE_PBAR_PV || s == TSC_STAGE_PV || s == TSC_STAGE_OACC;
        if (at) CHECK_EQ_INT(p.fmt[s], TSC_FMT_E8M4);
        else other += p.fmt[s] != base.fmt[s];
        CHECK_EQ_INT(p.mode[s], base.mode[s]);
    }
    CHECK_EQ_INT(other, 0);
    CHECK(tsc_policy_stage_is_low(&p, TSC_STAGE_PV));
    char buf[TSC_POLICY_STR_MAX];
    CHECK(tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
    CHECK_STREQ(buf, "bf16-torch+e8m4:pbar-pv,pv,oacc");
    /* an alias names the same row; modes apply as to any low-precision stage */
    CHECK(tsc_policy_parse("bf16-fa2+e8m7:pv+e8m2:oacc+rz:oacc+sr:seed=3,pv", &p) == TSC_OK);
    CHECK(tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
    CHECK_STREQ(buf, "bf16-fa2+bf16:pv+e8m2:oacc+rz:oacc+sr:seed=3,pv");
    CHECK(tsc_policy_parse("bf16-fa2+e8m4:acc", &p) == TSC_ERR_ARG); /* the matrix accumulator stays fp32/fp64 */
    CHECK(tsc_policy_parse("bf16-fa2+e8m9:pv", &p) == TSC_ERR_ARG);
    /* the narrowest width, as repro --dose e8m1 writes it */
    CHECKF(tsc_policy_parse("bf16-torch+e8m1:pv,oacc", &p) == TSC_OK, "%s", tsc_error_last());
    CHECK_EQ_INT(p.fmt[TSC_STAGE_PV], TSC_FMT_E8M1);
    CHECK_EQ_INT(p.fmt[TSC_STAGE_OACC], TSC_FMT_E8M1);
    CHECK(tsc_policy_format(&p, buf, sizeof buf) == TSC_OK);
    CHECK_STREQ(buf, "bf16-torch+e8m1:pv,oacc");
    CHECK(tsc_policy_parse("bf16-torch+e8m0:pv", &p) == TSC_ERR_ARG);
}

/* The trace's bit strings show the format's own fields: sign, 8 exponent bits, p mantissa bits. */
static void test_bits_str(void) {
    char buf[80];
    CHECK_STREQ(tsc_accum_bits_str(-4.75, TSC_FMT_E8M4, -1, buf, sizeof buf), "1 10000001 0011");
    CHECK_STREQ(tsc_accum_bits_str(-4.75, TSC_FMT_E8M2, -1, buf, sizeof buf), "1 10000001 01"); /* rounded: -5 */
    CHECK_STREQ(tsc_accum_bits_str(1.0 + 0x1p-5, TSC_FMT_E8M6, 3, buf, sizeof buf), "0 01111111 000|0|10");
    CHECK_STREQ(tsc_accum_bits_str(-4.75, TSC_FMT_E8M1, -1, buf, sizeof buf), "1 10000001 0"); /* rounded: -4 */
    CHECK_STREQ(tsc_accum_bits_str(5.5, TSC_FMT_E8M1, -1, buf, sizeof buf), "0 10000001 1");   /* rounded: 6 */
    CHECK_STREQ(tsc_accum_bits_str(0x1p-127, TSC_FMT_E8M1, -1, buf, sizeof buf), "0 00000000 1"); /* the subnormal */
}

int main(void) {
    test_rows();
    for (int k = 0; k < N_WIDTHS; k++) {
        test_overflow_and_specials(widths[k]);
        test_subnormals(widths[k]);
        test_every_code(widths[k]);
        test_neighbours(widths[k]);
    }
    test_e8m1_by_hand();
    test_policy();
    test_bits_str();
    return tsc_test_done();
}
