/* ops.c: the element-wise operations of the models, instantiated for float and double. */
#include <math.h>
#include <string.h>

#include "model_internal.h"

/* FP32 tanh from one expf: 1 − 2 / (e^{2u} + 1) (±1 where e^{2u} overflows or vanishes); about
 * 3x faster than tanhf, within a few FP32 ulps of 1 + tanh where GELU uses it. */
static inline float tanh_f32(float u) { return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f); }

#define TSC_OPS_TMPL 1
#define real float
#define S _f
#define SQRT sqrtf
#define TANH tanh_f32
#define EXP expf
#define LOG logf
#include "ops_tmpl.c"
#undef real
#undef S
#undef SQRT
#undef TANH
#undef EXP
#undef LOG

#define real double
#define S _d
#define SQRT sqrt
#define TANH tanh
#define EXP exp
#define LOG log
#include "ops_tmpl.c"
#undef real
#undef S
