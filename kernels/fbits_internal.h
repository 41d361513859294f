/* fbits_internal.h (private to kernels/): FP32 bit access and rounding an FP32 value to fewer
 * mantissa bits on its bits (BF16: drop 16, TF32: drop 13). Nearest-even adds half an ULP minus
 * one plus the kept LSB, so the carry happens exactly when the dropped part is above half an ULP
 * or a tie with an odd LSB; a carry into the exponent gives the next binade or Inf correctly. NaN
 * is quieted first (the carry could turn a NaN with a small payload into Inf). Written as a
 * select so element-wise loops vectorise; drop is a constant at every call site. */
#ifndef TSC_FBITS_INTERNAL_H
#define TSC_FBITS_INTERNAL_H
#include <stdint.h>
#include <string.h>

static inline uint32_t tsc_f32_bits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float tsc_f32_from_bits(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* u's float rounded to 23 - drop mantissa bits, nearest-even; the low drop bits of the result are 0 */
static inline uint32_t tsc_f32_keep_rne(uint32_t u, int drop) {
    uint32_t mask = ~0u << drop;
    uint32_t r = (u + ((1u << (drop - 1)) - 1u) + ((u >> drop) & 1u)) & mask;
    return (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) & mask : r;
}
/* the same toward zero (truncation) */
static inline uint32_t tsc_f32_keep_rz(uint32_t u, int drop) {
    uint32_t mask = ~0u << drop;
    return (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) & mask : u & mask;
}
#endif
