/* fuzz_ckpt.c: the readers of a training run's checkpoint (train/ckpt.c) on the input. Input that
 * starts with the checkpoint magic "TSCKPT01" is a whole ckpt.bin: its fixed header is decoded
 * (tsc_ckpt_parse_header, the input's length as the file's size) and, when accepted, the settings
 * text it frames goes to the settings parser; any other input is a settings text (run.cfg) for
 * tsc_train_cfg_parse. Invariants:
 *   - an accepted header frames exactly the input: tsc_ckpt_size(cfg_len, n, elsize) == size, with
 *     elsize the size of its precision's elements;
 *   - accepted settings pass tsc_train_opts_check (every numeric setting inside the bounds of its
 *     `tilescope train` flag: the bounds resume applies), print (tsc_train_cfg_text), and the printed
 *     text parses back to settings that print the same text;
 *   - a refusal names the file it was given.
 * Seeds: fuzz/corpus/ckpt/ (a run.cfg of `tilescope train` with every optional setting, the same
 * framed as a small checkpoint, an fp64 one, settings out of bounds, a torn header). */
#include "fuzz_target.h"

#include "train_internal.h"
#include "tsc_model.h"

static void check_settings(const char *text, const char *what) {
    tsc_train_cfg_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return;
    }
    if (tsc_train_cfg_parse(text, what, a) == TSC_OK) {
        TSC_FUZZ_CHECK(tsc_train_opts_check(&a->o, what) == TSC_OK, "accepted settings fail the bounds: %s",
                       tsc_error_last());
        char *t1 = tsc_train_cfg_text(&a->o, a->o.threads);
        TSC_FUZZ_CHECK(t1 != NULL, "accepted settings do not print");
        TSC_FUZZ_CHECK(tsc_train_cfg_parse(t1, "printed", b) == TSC_OK, "settings print as '%s', which does not parse: %s",
                       t1, tsc_error_last());
        char *t2 = tsc_train_cfg_text(&b->o, b->o.threads);
        TSC_FUZZ_CHECK(t2 && strcmp(t1, t2) == 0, "settings print as '%s', which prints as '%s'", t1, t2 ? t2 : "");
        tsc_model_config_t mc;
        if (tsc_model_config_parse(a->o.model, &mc) == TSC_OK) (void)tsc_model_config_n_params(&mc);
        free(t1);
        free(t2);
    } else {
        TSC_FUZZ_CHECK(strstr(tsc_error_last(), what) != NULL, "a refusal does not name the file: %s", tsc_error_last());
    }
    free(a);
    free(b);
}

TSC_FUZZ_TARGET(ckpt) {
    if (size >= 8 && memcmp(data, "TSCKPT01", 8) == 0) {
        tsc_ckpt_t c;
        memset(&c, 0, sizeof c);
        size_t cfg_len = 0;
        if (tsc_ckpt_parse_header(data, size, size, "fuzz.bin", &c, &cfg_len) != TSC_OK) {
            TSC_FUZZ_CHECK(strstr(tsc_error_last(), "fuzz.bin") != NULL, "a refusal does not name the file: %s",
                           tsc_error_last());
            return 0;
        }
        TSC_FUZZ_CHECK(tsc_ckpt_size(cfg_len, c.n, c.elsize) == size && 40 + cfg_len <= size,
                       "an accepted header frames %llu bytes of a %zu-byte file",
                       tsc_ckpt_size(cfg_len, c.n, c.elsize), size);
        TSC_FUZZ_CHECK(c.elsize == (c.prec == TSC_PREC_FP64 ? 8u : 4u) && c.steps_done >= 0,
                       "accepted header: prec %d, elsize %zu, steps %lld", c.prec, c.elsize, c.steps_done);
        if (memchr(data + 40, 0, cfg_len)) return 0; /* tsc_ckpt_load_header refuses a NUL in the settings */
        char *text = tsc_fuzz_cstr(data + 40, cfg_len);
        if (text) check_settings(text, "fuzz.bin");
        free(text);
        return 0;
    }
    char *text = tsc_fuzz_cstr(data, size);
    if (text) check_settings(text, "run.cfg");
    free(text);
    return 0;
}
