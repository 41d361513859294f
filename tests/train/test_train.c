/* test_train.c: the training loop (train/train.c) on the built-in text: the loss falls; the same
 * seed gives the same log and checkpoint byte for byte; a run killed with SIGKILL after a
 * checkpoint resumes to exactly the uninterrupted run; bad settings are named. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsc_test.h"
#include "tsc_train.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    if (b) b[n] = 0;
    *len = (size_t)n;
    return b;
}

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static void tiny_opts(tsc_train_opts_t *o) {
    tsc_train_opts_init(o);
    o->model = "gpt2-tiny";
    o->batch = 8;
    o->steps = 30;
    o->val_every = 10;
    o->val_batches = 2;
    o->stats_every = 10;
    o->ckpt_every = 10;
    o->threads = 2;
}

/* The val_loss column of log.csv at the first and last rows that have one. */
static int val_first_last(const char *log, double *first, double *last) {
    size_t n;
    char *t = slurp(log, &n);
    if (!t) return -1;
    int found = 0;
    for (char *line = strchr(t, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        char *p = line + 1;
        for (int col = 0; col < 3 && p; col++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
        if (p && *p != ',') {
            double v = strtod(p, NULL);
            if (!found++) *first = v;
            *last = v;
        }
    }
    free(t);
    return found >= 2 ? 0 : -1;
}

static void kill_at_25(void *user, const tsc_train_report_t *r) {
    (void)user;
    if (r->step == 24) raise(SIGKILL);
}

/* The child of the kill test runs in a fresh process image (exec), since OpenMP's thread pool does
 * not survive fork(). */
static int child_main(const char *dir) {
    tsc_train_opts_t k;
    tiny_opts(&k);
    k.report = kill_at_25;
    (void)tsc_train_run(&k, dir); /* killed at step 25: the parent checks what the run left */
    return 3;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--child")) return child_main(argv[2]);
    char tmp[] = "/tmp/tsc_train_XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    char a[256], b[256], c[256], p1[700], p2[700];
    snprintf(a, sizeof a, "%s/a", tmp);
    snprintf(b, sizeof b, "%s/b", tmp);
    snprintf(c, sizeof c, "%s/c", tmp);

    /* The loss falls on the default text (King James Bible, byte-level). */
    tsc_train_opts_t o;
    tiny_opts(&o);
    o.steps = 150;
    o.lr = 3e-3;
    o.val_every = 149;
    o.ckpt_every = 1000;
    char loss_dir[256];
    snprintf(loss_dir, sizeof loss_dir, "%s/loss", tmp);
    tsc_status_t st = tsc_train_run(&o, loss_dir);
    CHECKF(st == TSC_OK, "%s", tsc_error_last());
    double v0 = NAN, v1 = NAN;
    snprintf(p1, sizeof p1, "%s/log.csv", loss_dir);
    CHECK(val_first_last(p1, &v0, &v1) == 0);
    printf("gpt2-tiny on kjv, 150 steps: val loss %.4f -> %.4f (ln 256 = %.4f)\n", v0, v1, log(256.0));
    CHECK_NEAR(v0, log(256.0), 0.3);       /* init: near uniform over 256 bytes */
    CHECKF(v1 < v0 - 1.5, "val loss fell only from %.4f to %.4f", v0, v1);

    /* Same seed twice: identical log and checkpoint. */
    tiny_opts(&o);
    CHECKF(tsc_train_run(&o, a) == TSC_OK, "%s", tsc_error_last());
    CHECKF(tsc_train_run(&o, b) == TSC_OK, "%s", tsc_error_last());
    const char *files[] = {"log.csv", "wq_norms.csv", "batches.csv", "ckpt.bin"};
    for (int i = 0; i < 4; i++) {
        snprintf(p1, sizeof p1, "%s/%s", a, files[i]);
        snprintf(p2, sizeof p2, "%s/%s", b, files[i]);
        CHECKF(same_file(p1, p2), "%s differs between two runs of one seed", files[i]);
    }
    /* Another seed: another log. */
    o.seed = 7;
    char d7[300];
    snprintf(d7, sizeof d7, "%s/seed7", tmp);
    CHECKF(tsc_train_run(&o, d7) == TSC_OK, "%s", tsc_error_last());
    snprintf(p2, sizeof p2, "%s/log.csv", d7);
    snprintf(p1, sizeof p1, "%s/log.csv", a);
    CHECK(!same_file(p1, p2));

    /* SIGKILL at step 24 (checkpoint at 20), then resume: the uninterrupted run, bit for bit. */
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "--child", c, (char *)NULL);
        _exit(4);
    }
    int wst = 0;
    waitpid(pid, &wst, 0);
    CHECKF(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "the child was not killed (status %d)", wst);
    CHECKF(tsc_train_resume(c, 0, NULL, NULL) == TSC_OK, "%s", tsc_error_last());
    for (int i = 0; i < 4; i++) {
        snprintf(p1, sizeof p1, "%s/%s", a, files[i]);
        snprintf(p2, sizeof p2, "%s/%s", c, files[i]);
        CHECKF(same_file(p1, p2), "%s after kill + resume differs from the uninterrupted run", files[i]);
    }
    /* A finished run cannot resume without more steps; a new run into a used folder is refused. */
    CHECK(tsc_train_resume(c, 0, NULL, NULL) == TSC_ERR_ARG);
    CHECK(tsc_train_run(&o, c) == TSC_ERR_IO && strstr(tsc_error_last(), "holds a run already"));

    /* Bad settings, each named. */
    tiny_opts(&o);
    o.model = "gpt3-huge";
    snprintf(p1, sizeof p1, "%s/bad1", tmp);
    CHECK(tsc_train_run(&o, p1) == TSC_ERR_ARG && strstr(tsc_error_last(), "gpt3-huge"));
    tiny_opts(&o);
    o.attn_policy[o.n_attn_policy++] = "5=bf16-torch";
    snprintf(p1, sizeof p1, "%s/bad2", tmp);
    CHECK(tsc_train_run(&o, p1) == TSC_ERR_ARG && strstr(tsc_error_last(), "no layer 5"));
    tiny_opts(&o);
    o.data = "/nonexistent/text.txt";
    snprintf(p1, sizeof p1, "%s/bad3", tmp);
    CHECK(tsc_train_run(&o, p1) != TSC_OK && strstr(tsc_error_last(), "/nonexistent/text.txt"));

    uint64_t mask;
    tsc_policy_t pol;
    CHECK(tsc_train_policy_spec("0,1=bf16-torch+stable:beta=2,eps=1e-3", 2, &mask, &pol) == TSC_OK && mask == 3);
    CHECK(tsc_train_policy_spec("1=bf16-fa2", 2, &mask, &pol) == TSC_OK && mask == 2);
    CHECK(tsc_train_policy_spec("bf16-fa2", 3, &mask, &pol) == TSC_OK && mask == 7);
    CHECK(tsc_train_policy_spec("1=nonsense", 2, &mask, &pol) == TSC_ERR_ARG);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) return 1;
    printf("%d passed, %d failed\n", tsc_t_pass, tsc_t_fail);
    return tsc_t_fail ? 1 : 0;
}
