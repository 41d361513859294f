/* census.c: the rounding census of P-bar V (tsc_census.h). */
#include "tsc_census.h"

#include "cpu_internal.h"

#include <math.h>
#include <string.h>

#include "tsc_accum.h"

enum { CHUNK = 64 };

static inline uint32_t f32_bits(float x) {
    union {
        float f;
        uint32_t u;
    } b = {.f = x};
    return b.u;
}

static inline int dexp_field(double x) { /* the biased exponent field of a double */
    union {
        double d;
        uint64_t u;
    } b = {.d = x};
    return (int)((b.u >> 52) & 0x7ff);
}

/* One key for n <= CHUNK features: prev[i] = s[i], s[i] = fma(a, v[i], s[i]); mark[i] = 1 where the
 * addition may be an event, decided in the vector loop:
 * - a candidate carry, from FP32 exponent fields: both operands and the sum non-zero, the sum finite,
 *   and the sum's exponent above both operands' or the sum subnormal (the product's exponent taken
 *   one lower when its rounded value is a power of two: rounding may have carried it up; subnormal
 *   operands have field 0), so every true carry is a candidate;
 * - confirmed exactly (tsc_accum's carry_shift = +1) from exponents of doubles: prev and the
 *   FP32 x FP32 product are exact in double; their double sum has the exact sum's exponent except
 *   within 2^-53 below a power of two, where the FP32 sum is that power of two and has no rounding
 *   bit anyway;
 * - when narrow (sh = 23 - kept bits > 0): the FP32 sum's rounding bit and sticky bits set where its
 *   exponent lies in [lo, hi] (normal in the output format, no overflow on rounding up), or any
 *   exponent outside that range (event_error decides those with tsc_accum_round).
 * The caller recomputes the event of each mark (event_error). Returns whether any is marked. */
TSC_SIMD_CLONES
static int key_step(float a, const float *restrict v, float *restrict s, float *restrict prev,
                    int32_t *restrict mark, int n, int narrow, int sh, int lo, int hi) {
    int any = 0;
    const uint32_t rbit = narrow ? 1u << (sh - 1) : 0, sticky = rbit ? rbit - 1 : 0;
    const double ad = (double)a;
#pragma omp simd reduction(| : any)
    for (int i = 0; i < n; i++) {
        float si = s[i], vi = v[i], p = a * vi, sn = fmaf(a, vi, si);
        uint32_t bs = f32_bits(si), bp = f32_bits(p), bn = f32_bits(sn);
        int es = (int)((bs >> 23) & 0xff), ep = (int)((bp >> 23) & 0xff) - ((bp & 0x7fffff) == 0),
            en = (int)((bn >> 23) & 0xff);
        int c = (si != 0.0f) & (vi != 0.0f) & (sn != 0.0f) & (en != 0xff) & (((en > es) & (en > ep)) | (en == 0));
        double pd = ad * (double)vi, sd = (double)si + pd;
        int xs = dexp_field(sd), xprev = dexp_field((double)si), xp = dexp_field(pd);
        c &= (xs > xprev) & (xs > xp);
        int ex = en - 127, inside = (ex >= lo) & (ex <= hi);
        c &= narrow & ((!inside) | (((bn & rbit) != 0) & ((bn & sticky) != 0)));
        mark[i] = c;
        any |= c;
        prev[i] = si;
        s[i] = sn;
    }
    return any;
}

/* Whether rounding the FP32 sum x to out_fmt (keep mantissa bits, exponent bias) is an event
 * (rounding bit 1, sticky bits, finite result), with its error R(x) - x. When x's exponent lies in
 * [1 - bias, bias - 1], x is normal in out_fmt and rounding up cannot overflow it, so the bits
 * are read off x directly (the common case: the carried sums are O(1)); otherwise
 * tsc_accum_round decides (subnormal results, the top binade, E4M3's missing infinity). */
static int event_error(float x, tsc_format_t out_fmt, int keep, int bias, double *err) {
    uint32_t b = f32_bits(x);
    int ex = (int)((b >> 23) & 0xff) - 127;
    if (ex >= 1 - bias && ex <= bias - 1) {
        int sh = 23 - keep;
        uint32_t man = b & 0x7fffffu, rem = man & ((1u << sh) - 1);
        if (!((rem >> (sh - 1)) & 1u) || !(rem & ((1u << (sh - 1)) - 1))) return 0;
        /* rounding bit and sticky set: nearest-even rounds the magnitude up to the next kept value */
        double up = ldexp((double)((1u << sh) - rem), ex - 23);
        *err = x < 0 ? -up : up;
        return 1;
    }
    tsc_accum_step_t st;
    tsc_accum_round((double)x, out_fmt, TSC_ROUND_NEAREST_EVEN, NULL, &st);
    if (!(st.round_bit && st.sticky) || !isfinite(st.result)) return 0; /* an overflow is not an event */
    *err = st.error;
    return 1;
}

/* Which of the two int32 marks read as one uint64 holds m's lowest set bit (memory order). */
static inline int mark_index(uint64_t m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_ctzll(m) < 32;
#else
    return __builtin_ctzll(m) >= 32;
#endif
}

void tsc_census_row(const double *a, const float *v, int nv, int D, int block_k, tsc_format_t out_fmt, double l,
                    uint8_t *evt, tsc_census_t *acc) {
    int keep = tsc_format_mant_bits(out_fmt), narrow = keep < 23;
    int bias = (1 << (tsc_format_exp_bits(out_fmt) - 1)) - 1;
    double div = l > 0 ? l : 1.0;
    if (evt) memset(evt, 0, (size_t)D);
    for (int i0 = 0; i0 < D; i0 += CHUNK) {
        int n = D - i0 < CHUNK ? D - i0 : CHUNK;
        float s[CHUNK], prev[CHUNK];
        int32_t mark[CHUNK];
        for (int j = 0; j < nv; j++) {
            if (j % block_k == 0) memset(s, 0, sizeof s);
            float aj = (float)a[j];
            if (aj == 0.0f) continue;
            acc->additions += n;
            const float *vj = v + (size_t)j * D + i0;
            if (!key_step(aj, vj, s, prev, mark, n, narrow, 23 - keep, 1 - bias, bias - 1)) continue;
            if (n < CHUNK) memset(mark + n, 0, (size_t)(CHUNK - n) * sizeof mark[0]);
            for (int w = 0; w < CHUNK; w += 2) { /* the marks two at a time: most pairs are 0 */
                uint64_t m2;
                memcpy(&m2, mark + w, 8);
                for (; m2; m2 &= m2 - 1) { /* each mark is 0 or 1: one bit per marked feature */
                    int i = w + mark_index(m2);
                    double err;
                    if (!event_error(s[i], out_fmt, keep, bias, &err)) continue;
                    double e = err / div;
                    if (s[i] < 0) {
                        acc->events_neg++;
                        acc->err_neg += e;
                    } else {
                        acc->events_pos++;
                        acc->err_pos += e;
                    }
                    if (evt) evt[i0 + i] = 1;
                }
            }
        }
    }
}
