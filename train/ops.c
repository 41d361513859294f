/* ops.c: the element-wise operations of the models, instantiated for float and double. */
#include <math.h>
#include <string.h>

#include "model_internal.h"

#define TSC_OPS_TMPL 1
#define real float
#define S _f
#define SQRT sqrtf
#define TANH tanhf
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
