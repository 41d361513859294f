/* formats.c: number formats and rounding (tsc_formats.h).
 *
 * One generic rounding routine works on the bits of a double: every format here is a subset
 * of binary64, so a double holds any input (float or double) and any rounded result exactly,
 * and rounding a double input happens once, straight from the double (no double rounding
 * through float on the way to BF16/FP16/FP8).
 *
 * Specials and overflow, per format (the "overflow" case is a finite input whose rounded
 * magnitude exceeds the format's largest finite value):
 *   fp32, tf32, bf16, fp16, fp8-e5m2, e8m6 ... e8m1 (IEEE-like, have Inf):
 *     NaN -> quiet NaN, sign kept, top payload bits kept (bf16: (f32 bits >> 16) | 0x0040,
 *            the same bits as x86's VCVTNEPS2BF16 and as truncating a quieted float);
 *     Inf -> Inf;  overflow: nearest-even -> Inf, stochastic -> Inf (when it rounds up past
 *     the largest finite value), toward zero -> the largest finite value (IEEE 754 §7.4).
 *   fp8-e4m3 (OCP "fn": no Inf, one NaN code per sign S.1111.111, max 448):
 *     NaN -> S.1111.111;  Inf -> NaN (there is no Inf to keep);  overflow: nearest-even and
 *     stochastic -> NaN (the OCP non-saturating conversion, which is also what PyTorch's
 *     float8_e4m3fn does: |x| > 464 becomes NaN, 464 itself ties to even 448); toward zero
 *     -> +-448 (truncation never leaves the finite range, as for the IEEE formats).
 *   Subnormals of every format are produced and decoded (no flush to zero).
 * The formats with FP32's exponent range and fewer mantissa bits (tf32, e8m6 ... e8m1) live in an FP32
 * container: the FP32 whose low 23 - p mantissa bits are zero (`pad` bits, from the table's row);
 * their NaN is the FP32 NaN of the same sign and top payload bits, quieted. bf16 has the same values
 * and is stored on its own 16 bits.
 * Stochastic rounding: rounds up in magnitude with probability equal to the discarded
 * fraction of an ULP, using the top bits of one 64-bit draw (resolution 2^-64 of an ULP).
 * Each rounding call in stochastic mode consumes exactly one draw, even when the value is
 * exact, NaN or needs no rounding, so element i of a bulk conversion always uses draw i.
 */
#include "tsc_formats.h"

#include "cpu_internal.h"
#include "fbits_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TSC_HAVE_X86_SIMD 1
#endif

typedef struct {
    const char *name;
    int p;          /* explicit mantissa bits */
    int ebits;      /* exponent bits */
    int emin;       /* exponent of the smallest normal */
    int emax;       /* exponent of the largest finite binade */
    int bits;       /* storage bits */
    int has_inf;
    double maxval;  /* largest finite value */
} fmt_info_t;

/* maxval = (2 - 2^-p) * 2^emax, except E4M3 whose top code 1.111 * 2^8 is NaN: 1.75 * 2^8.
 * e8m6 ... e8m1: a chosen significand width with FP32's exponent range (tsc_formats.h). */
static const fmt_info_t fmt_table[TSC_FMT_COUNT] = {
    [TSC_FMT_FP64] = {"fp64", 52, 11, -1022, 1023, 64, 1, 1.7976931348623157e308},
    [TSC_FMT_FP32] = {"fp32", 23, 8, -126, 127, 32, 1, 3.4028234663852886e38},
    [TSC_FMT_TF32] = {"tf32", 10, 8, -126, 127, 32, 1, 3.4011621342146535e38},
    [TSC_FMT_BF16] = {"bf16", 7, 8, -126, 127, 16, 1, 3.3895313892515355e38},
    [TSC_FMT_FP16] = {"fp16", 10, 5, -14, 15, 16, 1, 65504.0},
    [TSC_FMT_FP8_E4M3] = {"fp8-e4m3", 3, 4, -6, 8, 8, 0, 448.0},
    [TSC_FMT_FP8_E5M2] = {"fp8-e5m2", 2, 5, -14, 15, 8, 1, 57344.0},
    [TSC_FMT_E8M6] = {"e8m6", 6, 8, -126, 127, 32, 1, 0x1.fcp127},
    [TSC_FMT_E8M5] = {"e8m5", 5, 8, -126, 127, 32, 1, 0x1.f8p127},
    [TSC_FMT_E8M4] = {"e8m4", 4, 8, -126, 127, 32, 1, 0x1.fp127},
    [TSC_FMT_E8M3] = {"e8m3", 3, 8, -126, 127, 32, 1, 0x1.ep127},
    [TSC_FMT_E8M2] = {"e8m2", 2, 8, -126, 127, 32, 1, 0x1.cp127},
    [TSC_FMT_E8M1] = {"e8m1", 1, 8, -126, 127, 32, 1, 0x1.8p127},
};

/* Zero bits below the mantissa in the storage: 23 - p for a format in an FP32 container, else 0. */
static int pad_bits(const fmt_info_t *f) { return f->bits - 1 - f->ebits - f->p; }

/* The float an FP32 container's bits u hold: stray low bits are dropped, a NaN is kept whole. */
static inline uint32_t container_value(uint32_t u, int pad) {
    return (u & 0x7fffffffu) > 0x7f800000u ? u : u & (~0u << pad); /* a select: vectorises */
}

static int fmt_ok(tsc_format_t f) { return (unsigned)f < (unsigned)TSC_FMT_COUNT; }

/* ---------------------------------------------------------------- RNG and names */

void tsc_rng_seed(tsc_rng_t *rng, uint64_t seed) {
    /* Mixing the seed once keeps nearby seeds (0, 1, 2...) on unrelated streams. */
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    rng->state = z ^ (z >> 31);
}

/* splitmix64: a Weyl counter passed through a bijective mixer (counter-based). */
uint64_t tsc_rng_next(tsc_rng_t *rng) {
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

const char *tsc_format_name(tsc_format_t fmt) { return fmt_ok(fmt) ? fmt_table[fmt].name : "?"; }

tsc_status_t tsc_format_parse(const char *name, tsc_format_t *out) {
    static const struct { const char *alias; tsc_format_t fmt; } aliases[] = {
        {"fp64", TSC_FMT_FP64}, {"f64", TSC_FMT_FP64}, {"float64", TSC_FMT_FP64}, {"double", TSC_FMT_FP64},
        {"fp32", TSC_FMT_FP32}, {"f32", TSC_FMT_FP32}, {"float32", TSC_FMT_FP32}, {"float", TSC_FMT_FP32},
        {"tf32", TSC_FMT_TF32}, {"tensorfloat32", TSC_FMT_TF32},
        {"bf16", TSC_FMT_BF16}, {"bfloat16", TSC_FMT_BF16},
        {"fp16", TSC_FMT_FP16}, {"f16", TSC_FMT_FP16}, {"float16", TSC_FMT_FP16}, {"half", TSC_FMT_FP16},
        {"fp8-e4m3", TSC_FMT_FP8_E4M3}, {"fp8_e4m3", TSC_FMT_FP8_E4M3}, {"e4m3", TSC_FMT_FP8_E4M3},
        {"e4m3fn", TSC_FMT_FP8_E4M3}, {"fp8-e4m3fn", TSC_FMT_FP8_E4M3}, {"float8_e4m3fn", TSC_FMT_FP8_E4M3},
        {"fp8e4m3", TSC_FMT_FP8_E4M3},
        {"fp8-e5m2", TSC_FMT_FP8_E5M2}, {"fp8_e5m2", TSC_FMT_FP8_E5M2}, {"e5m2", TSC_FMT_FP8_E5M2},
        {"float8_e5m2", TSC_FMT_FP8_E5M2}, {"fp8e5m2", TSC_FMT_FP8_E5M2},
    };
    if (!name || !out) return tsc_error_set(TSC_ERR_ARG, "format name: NULL argument");
    for (int f = 0; f < TSC_FMT_COUNT; f++)
        if (strcasecmp(name, fmt_table[f].name) == 0) {
            *out = (tsc_format_t)f;
            return TSC_OK;
        }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcasecmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].fmt;
            return TSC_OK;
        }
    /* "e8mN": the row with FP32's 8 exponent bits and N mantissa bits (e8m7: bf16, e8m10: tf32, e8m23: fp32) */
    if (strncasecmp(name, "e8m", 3) == 0 && name[3] >= '1' && name[3] <= '9' &&
        (!name[4] || (name[4] >= '0' && name[4] <= '9' && !name[5]))) {
        const int n = name[4] ? 10 * (name[3] - '0') + (name[4] - '0') : name[3] - '0';
        for (int f = 0; f < TSC_FMT_COUNT; f++)
            if (fmt_table[f].ebits == 8 && fmt_table[f].p == n) {
                *out = (tsc_format_t)f;
                return TSC_OK;
            }
    }
    char list[256];
    size_t len = 0;
    for (int f = 0; f < TSC_FMT_COUNT && len < sizeof list; f++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s",
                                f == 0 ? "" : f + 1 < TSC_FMT_COUNT ? ", " : " or ", fmt_table[f].name);
    return tsc_error_set(TSC_ERR_ARG, "unknown number format '%s' (expected %s)", name, list);
}

size_t tsc_format_size(tsc_format_t fmt) { return fmt_ok(fmt) ? (size_t)fmt_table[fmt].bits / 8 : 0; }
int tsc_format_mant_bits(tsc_format_t fmt) { return fmt_ok(fmt) ? fmt_table[fmt].p : 0; }
int tsc_format_exp_bits(tsc_format_t fmt) { return fmt_ok(fmt) ? fmt_table[fmt].ebits : 0; }

/* ---------------------------------------------------------------- helpers on doubles */

static inline uint64_t dbits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
static inline double dfrom(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

/* 2^q for q in [-1074, 1023], exactly. */
static inline double pow2(int q) {
    if (q >= -1022) return dfrom((uint64_t)(q + 1023) << 52);
    return dfrom(1ULL << (q + 1074));
}

/* Rounds a finite double to fmt's precision and exponent range; returns the magnitude-signed
 * result, which may exceed maxval (the caller applies the overflow rule). General form, for
 * every input (round_finite below takes the common case faster). */
static double round_finite_slow(double x, const fmt_info_t *f, tsc_round_t mode, uint64_t draw) {
    uint64_t u = dbits(x);
    uint64_t sign = u & 0x8000000000000000ULL;
    uint64_t a = u ^ sign;
    if (a == 0) return x;
    int E = (int)(a >> 52);
    uint64_t m;
    int lx; /* exponent of m's lowest bit */
    int e;  /* exponent of the leading bit */
    if (E == 0) {
        m = a;
        lx = -1074;
        e = 63 - __builtin_clzll(m) - 1074;
    } else {
        m = (a & 0x000fffffffffffffULL) | 0x0010000000000000ULL;
        lx = E - 1075;
        e = E - 1023;
    }
    int q = (e > f->emin ? e : f->emin) - f->p; /* exponent of the target ULP */
    int shift = q - lx;
    if (shift <= 0) return x;
    uint64_t kept, rem, up = 0;
    if (shift >= 64) {
        kept = 0;
        rem = m;
        /* rem < 2^53 <= half an ULP: below half, so nearest gives 0. */
        if (mode == TSC_ROUND_STOCHASTIC) up = (shift - 64 < 64) ? (draw < (m >> (shift - 64))) : 0;
    } else {
        kept = m >> shift;
        rem = m & ((1ULL << shift) - 1);
        uint64_t half = 1ULL << (shift - 1);
        if (mode == TSC_ROUND_NEAREST_EVEN)
            up = rem > half || (rem == half && (kept & 1));
        else if (mode == TSC_ROUND_STOCHASTIC)
            up = (draw >> (64 - shift)) < rem;
    }
    double r = (double)(kept + up) * pow2(q);
    return sign ? -r : r;
}

/* The common case on the bits of a normal double whose target ULP lies inside its mantissa
 * field (shift <= 52): truncate the field and add one ULP when rounding up; a carry out of the
 * mantissa steps the exponent, which is exactly the next binade. Everything else (zero,
 * subnormal doubles, values below the format's smallest subnormal) goes to the slow path. */
static inline double round_finite(double x, const fmt_info_t *f, tsc_round_t mode, uint64_t draw) {
    uint64_t u = dbits(x);
    uint64_t sign = u & 0x8000000000000000ULL;
    uint64_t a = u ^ sign;
    int E = (int)(a >> 52);
    if (E == 0) return round_finite_slow(x, f, mode, draw);
    int e = E - 1023;
    int shift = (e > f->emin ? e : f->emin) - f->p - e + 52;
    if (shift <= 0) return x;
    if (shift > 52) return round_finite_slow(x, f, mode, draw);
    uint64_t mask = (1ULL << shift) - 1, rem = a & mask, up = 0;
    if (mode == TSC_ROUND_NEAREST_EVEN) {
        uint64_t half = 1ULL << (shift - 1);
        uint64_t odd = shift == 52 ? 1 : (a >> shift) & 1; /* at 52 the kept part is the implicit 1 */
        up = rem > half || (rem == half && odd);
    } else if (mode == TSC_ROUND_STOCHASTIC) {
        up = (draw >> (64 - shift)) < rem;
    }
    return dfrom(((a & ~mask) + (up << shift)) | sign);
}

/* A quiet NaN of fmt's encoding with x's sign and top payload bits. */
static uint64_t nan_bits(double x, tsc_format_t fmt) {
    uint64_t u = dbits(x);
    uint64_t s = u >> 63;
    const fmt_info_t *f = &fmt_table[fmt];
    if (fmt == TSC_FMT_FP64) return u | 0x0008000000000000ULL;
    if (fmt == TSC_FMT_FP8_E4M3) return (s << 7) | 0x7f;
    uint64_t payload = (u >> (52 - f->p)) & ((1ULL << f->p) - 1);
    uint64_t expones = ((1ULL << f->ebits) - 1) << f->p;
    uint64_t quiet = 1ULL << (f->p - 1);
    return (s << (f->bits - 1)) | ((expones | payload | quiet) << pad_bits(f)); /* FP32 container: low bits 0 */
}

/* The bits of v, which must be exactly representable and finite in fmt (or +-Inf where fmt has it). */
static uint64_t encode_exact(double v, tsc_format_t fmt) {
    const fmt_info_t *f = &fmt_table[fmt];
    if (fmt == TSC_FMT_FP64) return dbits(v);
    if (f->bits == 32) return tsc_f32_bits((float)v); /* fp32, or a value of an FP32 container's format */
    uint64_t u = dbits(v);
    uint64_t s = (u >> 63) << (f->bits - 1);
    double a = fabs(v);
    if (a == 0) return s;
    if (isinf(a)) return s | (((1ULL << f->ebits) - 1) << f->p);
    int E = (int)(dbits(a) >> 52) - 1023; /* a is normal in binary64 for every small format */
    if (E < f->emin) /* subnormal: a = mant * 2^(emin - p) */
        return s | (uint64_t)(a * pow2(f->p - f->emin));
    uint64_t mant = (dbits(a) >> (52 - f->p)) & ((1ULL << f->p) - 1);
    return s | ((uint64_t)(E - f->emin + 1) << f->p) | mant;
}

/* Rounds x into fmt: the rounded value (double) and whether it is NaN/Inf handled. */
static double round_value(double x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng) {
    uint64_t draw = 0;
    if (mode == TSC_ROUND_STOCHASTIC) {
        if (rng) draw = tsc_rng_next(rng);
        else mode = TSC_ROUND_NEAREST_EVEN; /* no generator: documented fallback */
    }
    if (fmt == TSC_FMT_FP64) return x;
    const fmt_info_t *f = &fmt_table[fmt];
    if (isnan(x)) return x;
    if (isinf(x)) return f->has_inf ? x : copysign(NAN, x);
    if (fmt == TSC_FMT_FP32 && mode == TSC_ROUND_NEAREST_EVEN) return (double)(float)x;
    double r = round_finite(x, f, mode, draw);
    if (fabs(r) > f->maxval) {
        if (mode == TSC_ROUND_TOWARD_ZERO) return copysign(f->maxval, x);
        return f->has_inf ? copysign(INFINITY, x) : copysign(NAN, x);
    }
    return r;
}

double tsc_round(double x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng) {
    if (!fmt_ok(fmt)) return NAN;
    return round_value(x, fmt, mode, rng);
}

uint64_t tsc_encode(double x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng) {
    if (!fmt_ok(fmt)) return 0;
    double r = round_value(x, fmt, mode, rng);
    if (isnan(r)) return nan_bits(isnan(x) ? x : r, fmt);
    return encode_exact(r, fmt);
}

double tsc_decode(uint64_t bits, tsc_format_t fmt) {
    if (!fmt_ok(fmt)) return NAN;
    const fmt_info_t *f = &fmt_table[fmt];
    if (fmt == TSC_FMT_FP64) return dfrom(bits);
    if (fmt == TSC_FMT_BF16) return (double)tsc_f32_from_bits((uint32_t)(bits & 0xffff) << 16);
    if (f->bits == 32) return (double)tsc_f32_from_bits(container_value((uint32_t)bits, pad_bits(f))); /* fp32 too */
    bits &= (1ULL << f->bits) - 1;
    int s = (int)(bits >> (f->bits - 1));
    unsigned ef = (unsigned)(bits >> f->p) & ((1u << f->ebits) - 1);
    uint64_t mant = bits & ((1ULL << f->p) - 1);
    double v;
    if (ef == 0) {
        v = (double)mant * pow2(f->emin - f->p);
    } else if (ef == (1u << f->ebits) - 1 && f->has_inf) {
        if (!mant) return s ? -INFINITY : INFINITY;
        /* NaN: keep sign and payload (top of the double's mantissa), so encode(decode(b)) == b. */
        return dfrom(((uint64_t)s << 63) | 0x7ff0000000000000ULL | (mant << (52 - f->p)));
    } else if (fmt == TSC_FMT_FP8_E4M3 && ef == 15 && mant == 7) {
        v = NAN;
    } else {
        v = (double)((1ULL << f->p) | mant) * pow2((int)ef + f->emin - 1 - f->p);
    }
    return s ? -v : v;
}

/* ---------------------------------------------------------------- fast scalar paths */

/* BF16 bits of a float toward zero (nearest-even: tsc_bf16_rne_bits, tsc_formats.h): the same
 * rounding as tsc_f32_keep_rz (fbits_internal.h) with the shift folded in before the select,
 * which keeps the bulk loop of 16-bit results vectorised (the 32-bit form was 3.6x slower). */
static inline uint16_t bf16_rtz_bits(uint32_t u) {
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x0040u : u >> 16);
}

/* Simple element-wise loops below are forced to vectorise (gcc's -O2 cost model would not). */
#ifdef _OPENMP
#define TSC_SIMD_LOOP _Pragma("omp simd")
#else
#define TSC_SIMD_LOOP
#endif

uint16_t tsc_bf16_from_f32(float x) { return tsc_bf16_rne_bits(tsc_f32_bits(x)); }
float tsc_bf16_to_f32(uint16_t b) { return tsc_f32_from_bits((uint32_t)b << 16); }

/* Nearest-even FP32 -> FP16 on the bits (the generic path gives the same bits, slower). */
static inline uint16_t fp16_rne_bits(uint32_t u) {
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* Inf, or NaN quieted with its top 10 payload bits */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: rounds past 65504 */
    if (a < 0x38800000u) {                                     /* below 2^-14: FP16 subnormal */
        if (a <= 0x33000000u) return (uint16_t)sign;           /* <= 2^-25, half the smallest: 0 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23);                      /* 14..24: down to units of 2^-24 */
        uint32_t kept = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        kept += rem > half || (rem == half && (kept & 1u));
        return (uint16_t)(sign | kept);
    }
    uint32_t h = a - (112u << 23); /* rebias 127 -> 15 */
    return (uint16_t)(sign | ((h + 0xfffu + ((h >> 13) & 1u)) >> 13));
}

uint16_t tsc_fp16_from_f32(float x) { return fp16_rne_bits(tsc_f32_bits(x)); }

float tsc_fp16_to_f32(uint16_t h) { return (float)tsc_decode(h, TSC_FMT_FP16); }

float tsc_round_f32(float x, tsc_format_t fmt, tsc_round_t mode, tsc_rng_t *rng) {
    if (fmt == TSC_FMT_BF16 && mode == TSC_ROUND_NEAREST_EVEN) return tsc_f32_from_bits((uint32_t)tsc_bf16_rne_bits(tsc_f32_bits(x)) << 16);
    if (fmt == TSC_FMT_FP32 && mode != TSC_ROUND_STOCHASTIC) return x;
    return (float)tsc_round((double)x, fmt, mode, rng);
}

/* ---------------------------------------------------------------- bulk conversions */

static void bf16_rne_portable(const float *src, uint16_t *dst, size_t n) {
    TSC_SIMD_LOOP
    for (size_t i = 0; i < n; i++) dst[i] = tsc_bf16_rne_bits(tsc_f32_bits(src[i]));
}

#ifdef TSC_HAVE_X86_SIMD
/* VCVTNEPS2BF16 rounds to nearest-even and quiets NaN exactly like tsc_bf16_rne_bits, but it
 * treats FP32 subnormal inputs as zero (DAZ, whatever MXCSR says). Those lanes are patched
 * with the integer formula, so the result is bit-identical to the portable path. */
__attribute__((target("avx512bf16,avx512vl,avx512f,avx512bw")))
static void bf16_rne_avx512(const float *src, uint16_t *dst, size_t n) {
    const __m512i expmask = _mm512_set1_epi32(0x7f800000);
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    const __m512i bias = _mm512_set1_epi32(0x7fff);
    const __m512i one = _mm512_set1_epi32(1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        __m256i hw = (__m256i)_mm512_cvtneps_pbh(v);
        __m512i u = _mm512_castps_si512(v);
        __mmask16 sub = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, expmask), _mm512_setzero_si512()) &
                        _mm512_cmpneq_epi32_mask(_mm512_and_si512(u, absmask), _mm512_setzero_si512());
        if (sub) {
            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), lsb), 16);
            __m256i fix = _mm512_cvtepi32_epi16(r);
            hw = _mm256_mask_blend_epi16(sub, hw, fix);
        }
        _mm256_storeu_si256((__m256i *)(dst + i), hw);
    }
    bf16_rne_portable(src + i, dst + i, n - i);
}

static int have_avx512bf16(void) { return tsc_cpu_has(TSC_CPU_AVX512_BF16); }
#endif

static int simd_disabled;

int tsc_formats_simd_set(int enable) {
    simd_disabled = !enable;
    return tsc_formats_simd_active();
}

int tsc_formats_simd_active(void) {
#ifdef TSC_HAVE_X86_SIMD
    return !simd_disabled && have_avx512bf16();
#else
    return 0;
#endif
}

void tsc_convert_from_f32(tsc_format_t fmt, const float *src, void *dst, size_t n, tsc_round_t mode,
                          tsc_rng_t *rng) {
    if (!fmt_ok(fmt) || !src || !dst) return;
    if (fmt == TSC_FMT_BF16 && mode == TSC_ROUND_NEAREST_EVEN) {
#ifdef TSC_HAVE_X86_SIMD
        if (tsc_formats_simd_active()) {
            bf16_rne_avx512(src, (uint16_t *)dst, n);
            return;
        }
#endif
        bf16_rne_portable(src, (uint16_t *)dst, n);
        return;
    }
    if (fmt == TSC_FMT_BF16 && mode == TSC_ROUND_TOWARD_ZERO) {
        uint16_t *d = dst;
        TSC_SIMD_LOOP
        for (size_t i = 0; i < n; i++) d[i] = bf16_rtz_bits(tsc_f32_bits(src[i]));
        return;
    }
    if (fmt == TSC_FMT_FP16 && mode == TSC_ROUND_NEAREST_EVEN) {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = fp16_rne_bits(tsc_f32_bits(src[i]));
        return;
    }
    if (mode != TSC_ROUND_STOCHASTIC && fmt == TSC_FMT_FP32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    const int pad = pad_bits(&fmt_table[fmt]);
    if (mode != TSC_ROUND_STOCHASTIC && fmt_table[fmt].bits == 32 && pad) {
        /* tf32, e8m*: the bits of tsc_encode (the rule of tsc_hd_keep, checked against it over FP32
         * patterns in test_hd_math and against an FPU formulation in test_formats_e8_exhaustive) */
        uint32_t *d = dst;
        if (mode == TSC_ROUND_NEAREST_EVEN) {
            TSC_SIMD_LOOP
            for (size_t i = 0; i < n; i++) d[i] = tsc_f32_keep_rne(tsc_f32_bits(src[i]), pad);
        } else {
            TSC_SIMD_LOOP
            for (size_t i = 0; i < n; i++) d[i] = tsc_f32_keep_rz(tsc_f32_bits(src[i]), pad);
        }
        return;
    }
    switch (tsc_format_size(fmt)) {
    case 8: {
        double *d = dst;
        for (size_t i = 0; i < n; i++) {
            if (mode == TSC_ROUND_STOCHASTIC && rng) tsc_rng_next(rng);
            d[i] = (double)src[i];
        }
        break;
    }
    case 4: {
        uint32_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = (uint32_t)tsc_encode((double)src[i], fmt, mode, rng);
        break;
    }
    case 2: {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = (uint16_t)tsc_encode((double)src[i], fmt, mode, rng);
        break;
    }
    default: {
        uint8_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = (uint8_t)tsc_encode((double)src[i], fmt, mode, rng);
        break;
    }
    }
}

void tsc_convert_to_f32(tsc_format_t fmt, const void *src, float *dst, size_t n) {
    if (!fmt_ok(fmt) || !src || !dst) return;
    switch (fmt) {
    case TSC_FMT_FP64: {
        const double *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = (float)s[i];
        return;
    }
    case TSC_FMT_FP32: memcpy(dst, src, n * sizeof(float)); return;
    case TSC_FMT_BF16: {
        const uint16_t *s = src;
        TSC_SIMD_LOOP
        for (size_t i = 0; i < n; i++) dst[i] = tsc_f32_from_bits((uint32_t)s[i] << 16);
        return;
    }
    default: break;
    }
    switch (tsc_format_size(fmt)) {
    case 4: { /* tf32, e8m*: an FP32 container */
        const uint32_t *s = src;
        const int pad = pad_bits(&fmt_table[fmt]);
        TSC_SIMD_LOOP
        for (size_t i = 0; i < n; i++) dst[i] = tsc_f32_from_bits(container_value(s[i], pad));
        break;
    }
    case 2: {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = (float)tsc_decode(s[i], fmt);
        break;
    }
    default: {
        const uint8_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = (float)tsc_decode(s[i], fmt);
        break;
    }
    }
}
