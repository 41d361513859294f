/* census.c: the rounding census of P-bar V (tsc_census.h). */
#include "tsc_census.h"

#include "cpu_internal.h"

#include <math.h>
#include <string.h>

#include "tsc_accum.h"

enum { CHUNK = 64 };

static int dexp(double x) { /* exponent of |x|'s leading bit; x a non-zero finite normal double */
    int e;
    frexp(x, &e);
    return e;
} /* features per pass: the running sums stay in registers / L1 */

static inline uint32_t f32_bits(float x) {
    union {
        float f;
        uint32_t u;
    } b = {.f = x};
    return b.u;
}

/* One key for n <= CHUNK features: prev[i] = s[i], s[i] = fma(a, v[i], s[i]); carry[i] = 1 for a
 * *candidate* carry, from FP32 exponent fields only (so the loop vectorises): both operands and
 * the sum non-zero, the sum finite, and the sum's exponent above both operands' or the sum
 * subnormal. The product's exponent is taken one lower when its rounded value is a power of two
 * (rounding may have carried it up), and subnormal operands have field 0, so every true carry is a
 * candidate; the caller confirms each candidate exactly. Returns whether any is. */
TSC_SIMD_CLONES
static int key_step(float a, const float *restrict v, float *restrict s, float *restrict prev,
                    int32_t *restrict carry, int n) {
    int any = 0;
#pragma omp simd reduction(| : any)
    for (int i = 0; i < n; i++) {
        float si = s[i], vi = v[i], p = a * vi, sn = fmaf(a, vi, si);
        uint32_t bs = f32_bits(si), bp = f32_bits(p), bn = f32_bits(sn);
        int es = (int)((bs >> 23) & 0xff), ep = (int)((bp >> 23) & 0xff) - ((bp & 0x7fffff) == 0),
            en = (int)((bn >> 23) & 0xff);
        int c = (si != 0.0f) & (vi != 0.0f) & (sn != 0.0f) & (en != 0xff) & (((en > es) & (en > ep)) | (en == 0));
        carry[i] = c;
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

void tsc_census_row(const double *a, const float *v, int nv, int D, int block_k, tsc_format_t out_fmt, double l,
                    uint8_t *evt, tsc_census_t *acc) {
    int keep = tsc_format_mant_bits(out_fmt), narrow = keep < 23;
    int bias = (1 << (tsc_format_exp_bits(out_fmt) - 1)) - 1;
    double div = l > 0 ? l : 1.0;
    if (evt) memset(evt, 0, (size_t)D);
    for (int i0 = 0; i0 < D; i0 += CHUNK) {
        int n = D - i0 < CHUNK ? D - i0 : CHUNK;
        float s[CHUNK], prev[CHUNK];
        int32_t carry[CHUNK];
        for (int j = 0; j < nv; j++) {
            if (j % block_k == 0) memset(s, 0, sizeof s);
            float aj = (float)a[j];
            if (aj == 0.0f) continue;
            acc->additions += n;
            const float *vj = v + (size_t)j * D + i0;
            if (!key_step(aj, vj, s, prev, carry, n) || !narrow) continue;
            for (int i = 0; i < n; i++) {
                if (!carry[i]) continue;
                /* The exact test (tsc_accum's carry_shift = +1) from exponents of doubles: prev and
                 * the FP32 x FP32 product are exact in double; their double sum has the exact sum's
                 * exponent except within 2^-53 below a power of two, where the FP32 sum is that
                 * power of two and has no rounding bit anyway. */
                double pd = (double)aj * (double)vj[i];
                if (!(dexp(prev[i] + pd) > dexp(prev[i]) && dexp(prev[i] + pd) > dexp(pd))) continue;
                double err;
                int ev = event_error(s[i], out_fmt, keep, bias, &err);
                if (!ev) continue;
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
