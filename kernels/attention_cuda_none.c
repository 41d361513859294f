/* attention_cuda_none.c: tsc_attn_cuda.h in a build without CUDA (nvcc was not found when the
 * build was configured, or TSC_WITH_CUDA=OFF, or a sanitizer/fuzz build): every entry point
 * exists and says so. A CUDA build compiles attention_cuda.cu instead of this body. */
#include "tsc_attn_cuda.h"

#ifndef TSC_HAVE_CUDA
int tsc_cuda_available(void) { return 0; }

const char *tsc_cuda_describe(void) { return "no CUDA device (this build of tilescope has no CUDA)"; }

tsc_status_t tsc_attn_cuda_run(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_cuda_io_t *io,
                               tsc_attn_tile_stats_t *tiles, void *stream) {
    (void)pol; (void)dims; (void)io; (void)tiles; (void)stream;
    return tsc_error_set(TSC_ERR_UNSUPPORTED, "attention (cuda): this build of tilescope has no CUDA (nvcc was "
                         "not found when it was configured, or TSC_WITH_CUDA was OFF)");
}

tsc_status_t tsc_attn_cuda_run_fast(const tsc_policy_t *pol, const tsc_attn_dims_t *dims,
                                    const tsc_attn_cuda_io_t *io, tsc_attn_tile_stats_t *tiles, void *stream) {
    return tsc_attn_cuda_run(pol, dims, io, tiles, stream);
}

tsc_status_t tsc_attn_cuda_census(const tsc_policy_t *pol, const tsc_attn_dims_t *dims, const tsc_attn_cuda_io_t *io,
                                  tsc_format_t fmt, tsc_attn_census_t *census, void *stream) {
    (void)fmt; (void)census;
    return tsc_attn_cuda_run(pol, dims, io, NULL, stream);
}
#else
typedef int tsc_attention_cuda_none_unused_t; /* the CUDA build: attention_cuda.cu defines them */
#endif
