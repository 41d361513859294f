/* Captures one step of a 1-layer model through the installed library and reads it back. */
#include <stdint.h>
#include <stdio.h>
#include <tsc_capture.h>
#include <tsc_dump.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1; m.n_head = 2; m.n_kv_head = 2; m.head_dim = 4; m.d_model = 8;
    m.seq_len = 3; m.batch = 1; m.causal = 1; m.softmax_scale = 0.5; m.tile_q = m.tile_k = 2;
    snprintf(m.policy, sizeof m.policy, "fp32");
    tsc_capture_t *cap;
    if (tsc_capture_open(&cap, argv[1], &m, NULL) != TSC_OK) goto fail;
    float q[1 * 2 * 3 * 4];
    for (int i = 0; i < 24; i++) q[i] = 0.25f * (float)i;
    uint64_t dims[4] = {1, 2, 3, 4};
    if (tsc_capture_step_begin(cap, 7) != TSC_OK) goto fail;
    if (tsc_capture_put(cap, 0, "q", TSC_FMT_FP32, 4, dims, q) != TSC_OK) goto fail;
    if (tsc_capture_step_end(cap) != TSC_OK) goto fail;
    if (tsc_capture_close(cap) != TSC_OK) goto fail;
    tsc_dump_t *d;
    if (tsc_dump_open(&d, argv[1]) != TSC_OK) goto fail;
    float head[3 * 4];
    if (tsc_dump_read(d, 7, 0, "q", 0, 1, head) != TSC_OK) goto fail;
    printf("q[b=0,h=1,t=2,d=3] = %g\n", head[11]);
    tsc_dump_close(d);
    return 0;
fail:
    fprintf(stderr, "consumer: %s\n", tsc_error_last());
    return 1;
}
