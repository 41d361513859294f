/* test_outputs.c: the capture layer's output files go through util/tsc_file.h: a link planted at a
 * predictable temporary name is never written through, a FIFO, device or directory is refused as
 * output (before anything is opened, so nothing blocks), and a failed write leaves nothing under
 * the final name (and no temporary). */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsc_capture.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_synth.h"
#include "tsc_test.h"

static char dir[256];
static const char victim_text[] = "precious data, not to be overwritten\n";

/* Number of entries of dir whose name starts with prefix and contains ".tmp." (leftover temporaries). */
static int count_tmp(const char *prefix) {
    DIR *dp = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (dp && (e = readdir(dp)))
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && strstr(e->d_name, ".tmp.")) n++;
    if (dp) closedir(dp);
    return n;
}

/* Plants symbolic links to victim at "<out>.tmp.<pid>" (the old pattern) and at
 * "<out>.tmp.<pid>.<n>" for n < 64 (the new one's first names). Returns how many. */
static int plant_links(const char *out, const char *victim) {
    char p[512];
    int n = 0;
    snprintf(p, sizeof p, "%s.tmp.%ld", out, (long)getpid());
    n += symlink(victim, p) == 0;
    for (int i = 0; i < 64; i++) {
        snprintf(p, sizeof p, "%s.tmp.%ld.%d", out, (long)getpid(), i);
        n += symlink(victim, p) == 0;
    }
    return n;
}

static void remove_links(const char *out) {
    char p[512];
    snprintf(p, sizeof p, "%s.tmp.%ld", out, (long)getpid());
    unlink(p);
    for (int i = 0; i < 64; i++) {
        snprintf(p, sizeof p, "%s.tmp.%ld.%d", out, (long)getpid(), i);
        unlink(p);
    }
}

static tsc_dump_meta_t small_meta(void) {
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 1; m.n_head = 2; m.n_kv_head = 2; m.head_dim = 4; m.d_model = 8; m.seq_len = 8; m.batch = 1;
    snprintf(m.producer, sizeof m.producer, "test_outputs");
    return m;
}

/* Captures a kept session of out (small_meta): one step (q of layer 0 = 0, 1, ..., 63), or none
 * when step < 0; the session folder's path into session. */
static void make_session(const char *out, long long step, char *session, size_t cap) {
    tsc_dump_meta_t m = small_meta();
    tsc_capture_opts_t co = {.keep_session = 1};
    tsc_capture_t *c;
    CHECK(tsc_capture_open(&c, out, &m, &co) == TSC_OK);
    float q[2 * 8 * 4];
    for (int i = 0; i < 64; i++) q[i] = (float)i;
    uint64_t dq[4] = {1, 2, 8, 4};
    if (step >= 0) {
        CHECK(tsc_capture_step_begin(c, step) == TSC_OK);
        CHECK(tsc_capture_put(c, 0, "q", TSC_FMT_FP32, 4, dq, q) == TSC_OK);
        CHECK(tsc_capture_step_end(c) == TSC_OK);
    }
    CHECK(tsc_capture_close(c) == TSC_OK);
    snprintf(session, cap, "%s.capture", out);
}

static void test_symlinks_not_followed(void) {
    char victim[300], out[300], packed[300];
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    snprintf(out, sizeof out, "%s/synth.h5", dir);
    tsc_test_write_text(victim, victim_text);
    CHECK_EQ_INT(plant_links(out, victim), 65);
    tsc_synth_opts_t o;
    tsc_synth_opts_init(&o);
    o.steps = "0";
    CHECKF(tsc_synth_write(out, &o) == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_test_file_is(victim, victim_text));
    tsc_dump_t *d;
    CHECK(tsc_dump_open(&d, out) == TSC_OK);  /* the real output is a complete dump */
    if (d) CHECK_EQ_INT(tsc_dump_n_steps(d), 1);
    tsc_dump_close(d);
    remove_links(out);

    /* tsc_h5_create directly: its temporary is not the link either */
    snprintf(out, sizeof out, "%s/direct.h5", dir);
    plant_links(out, victim);
    tsc_h5_file_t f;
    CHECK(tsc_h5_create(&f, out) == TSC_OK);
    struct stat st;
    CHECK(lstat(f.tmp, &st) == 0 && S_ISREG(st.st_mode));
    CHECK(strncmp(f.tmp, out, strlen(out)) == 0);
    CHECK(tsc_h5_attr_write_long(f.fid, "answer", 42) == TSC_OK);
    CHECK(tsc_h5_commit(&f) == TSC_OK);
    CHECK(tsc_test_file_is(victim, victim_text));
    hid_t fid;
    long v = 0;
    CHECK(tsc_h5_open(&fid, out, 0) == TSC_OK);
    CHECK(tsc_h5_attr_read_long(fid, "answer", &v) == TSC_OK && v == 42);
    H5Fclose(fid);
    remove_links(out);

    /* packing a capture session */
    snprintf(out, sizeof out, "%s/cap.h5", dir);
    snprintf(packed, sizeof packed, "%s/packed.h5", dir);
    char session[320];
    make_session(out, 3, session, sizeof session);
    plant_links(packed, victim);
    CHECKF(tsc_capture_pack(session, packed, 0) == TSC_OK, "%s", tsc_error_last());
    CHECK(tsc_test_file_is(victim, victim_text));
    CHECK(tsc_dump_open(&d, packed) == TSC_OK);
    if (d) {
        float back[32];
        CHECK(tsc_dump_read(d, 3, 0, "q", 0, 1, back) == TSC_OK);
        int ok = 1;
        for (int i = 0; i < 32; i++) ok &= back[i] == (float)(32 + i); /* head 1 of the session's q */
        CHECK(ok);
    }
    tsc_dump_close(d);
    remove_links(packed);
    CHECK_EQ_INT(count_tmp("packed.h5"), 0);
}

static void test_special_targets_refused(void) {
    char fifo[300], sub[300];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(sub, sizeof sub, "%s/subdir", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(mkdir(sub, 0700) == 0);
    /* an HDF5 output, a dump, a synth, a capture session and a pack onto each */
    const char *targets[2] = {fifo, sub};
    const char *what[2] = {"FIFO", "directory"};
    for (int i = 0; i < 2; i++) {
        tsc_h5_file_t f;
        CHECK(tsc_h5_create(&f, targets[i]) == TSC_ERR_IO);
        CHECKF(strstr(tsc_error_last(), what[i]) != NULL, "%s", tsc_error_last());
        CHECK(f.fid < 0);
        tsc_h5_abort(&f);  /* safe after a failed create */
        tsc_dump_meta_t m = small_meta();
        tsc_dump_writer_t *w = (tsc_dump_writer_t *)1;
        CHECK(tsc_dump_writer_open(&w, targets[i], &m, NULL) == TSC_ERR_IO);
        CHECK(w == NULL);
        tsc_synth_opts_t o;
        tsc_synth_opts_init(&o);
        o.steps = "0";
        CHECK(tsc_synth_write(targets[i], &o) == TSC_ERR_IO);
        CHECKF(strstr(tsc_error_last(), what[i]) != NULL, "%s", tsc_error_last());
        tsc_capture_t *cap = (tsc_capture_t *)1;
        CHECK(tsc_capture_open(&cap, targets[i], &m, NULL) == TSC_ERR_IO);
        CHECK(cap == NULL);
        char session[320];
        snprintf(session, sizeof session, "%s.capture", targets[i]);
        CHECK(!tsc_test_exists(session));  /* refused before the session folder is made */
    }
    /* packing a real session onto the FIFO */
    char out[300], session[320];
    snprintf(out, sizeof out, "%s/cap2.h5", dir);
    make_session(out, -1, session, sizeof session);
    CHECK(tsc_capture_pack(session, fifo, 1) == TSC_ERR_IO);
    CHECKF(strstr(tsc_error_last(), "FIFO") != NULL, "%s", tsc_error_last());
    CHECK(tsc_test_exists(session));  /* not removed after a failed pack */
    struct stat st;
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_EQ_INT(count_tmp("fifo"), 0);
    CHECK_EQ_INT(count_tmp("subdir"), 0);
}

static void test_failed_write_leaves_nothing(void) {
    char out[300], old[300];
    snprintf(out, sizeof out, "%s/failed.h5", dir);
    tsc_dump_meta_t m = small_meta();
    tsc_dump_writer_t *w;
    CHECK(tsc_dump_writer_open(&w, out, &m, NULL) == TSC_OK);
    float q[64] = {0};
    uint64_t bad[4] = {1, 2, 8, 5};  /* D = 4 in the metadata */
    CHECK(tsc_dump_writer_put(w, 0, 0, "q", 4, bad, TSC_FMT_FP32, q, TSC_FMT_FP32) == TSC_ERR_SHAPE);
    tsc_dump_writer_abort(w);
    CHECK(!tsc_test_exists(out));
    CHECK_EQ_INT(count_tmp("failed.h5"), 0);

    /* an existing file under the final name is left as it was */
    snprintf(old, sizeof old, "%s/kept.h5", dir);
    tsc_test_write_text(old, victim_text);
    CHECK(tsc_dump_writer_open(&w, old, &m, NULL) == TSC_OK);
    tsc_dump_writer_abort(w);
    CHECK(tsc_test_file_is(old, victim_text));
    CHECK_EQ_INT(count_tmp("kept.h5"), 0);

    /* a synth refused on its options (a layer the shape does not have) leaves nothing either */
    tsc_synth_opts_t o;
    tsc_synth_opts_init(&o);
    o.steps = "0";
    o.layers = "7";
    CHECK(tsc_synth_write(out, &o) == TSC_ERR_ARG);
    CHECK(!tsc_test_exists(out));

    /* a pack whose step file is corrupt: the copy fails inside HDF5 */
    char cap_out[300], session[320], step[400], packed[300];
    snprintf(cap_out, sizeof cap_out, "%s/cap3.h5", dir);
    snprintf(packed, sizeof packed, "%s/packed3.h5", dir);
    make_session(cap_out, 0, session, sizeof session);
    snprintf(step, sizeof step, "%s/step_00000000.h5", session);
    tsc_test_write_text(step, "garbage where a step file was\n");
    CHECK(tsc_capture_pack(session, packed, 1) != TSC_OK);
    CHECK(!tsc_test_exists(packed));
    CHECK_EQ_INT(count_tmp("packed3.h5"), 0);
    CHECK(tsc_test_exists(session));
}

int main(void) {
    alarm(60);  /* a FIFO opened for writing would block: fail instead of hanging */
    snprintf(dir, sizeof dir, "/tmp/tsc_outputs_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_symlinks_not_followed();
    test_special_targets_refused();
    test_failed_write_leaves_nothing();
    tsc_test_rmtree(dir);
    return tsc_test_done();
}
