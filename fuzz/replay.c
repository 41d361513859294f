/* replay.c: runs files through the fuzz targets without libFuzzer (a ctest test of the normal
 * build, and of `make asan`): every committed input of fuzz/corpus/<target>/ and
 * fuzz/regressions/<target>/ must go through its target without a crash, a sanitizer report or a
 * failed TSC_FUZZ_CHECK.
 *
 *   tsc_fuzz_replay TARGET PATH...     PATH: a file, or a folder whose files are all replayed
 *
 * Exit status 0 when every input ran (a crash ends the process with the crash's status). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*target_fn)(const uint8_t *data, size_t size);

int tsc_fuzz_dump(const uint8_t *data, size_t size);
int tsc_fuzz_log(const uint8_t *data, size_t size);
int tsc_fuzz_json(const uint8_t *data, size_t size);
int tsc_fuzz_policy(const uint8_t *data, size_t size);
int tsc_fuzz_select(const uint8_t *data, size_t size);
int tsc_fuzz_safetensors(const uint8_t *data, size_t size);
int tsc_fuzz_ckpt(const uint8_t *data, size_t size);
int tsc_fuzz_pt(const uint8_t *data, size_t size);
int tsc_fuzz_npz(const uint8_t *data, size_t size);
int tsc_fuzz_pickle(const uint8_t *data, size_t size);

static const struct {
    const char *name;
    target_fn fn;
} targets[] = {
    {"dump", tsc_fuzz_dump}, {"safetensors", tsc_fuzz_safetensors}, {"log", tsc_fuzz_log}, {"json", tsc_fuzz_json},
    {"policy", tsc_fuzz_policy}, {"select", tsc_fuzz_select}, {"ckpt", tsc_fuzz_ckpt},
    {"pt", tsc_fuzz_pt}, {"npz", tsc_fuzz_npz}, {"pickle", tsc_fuzz_pickle},
};

static int run_file(target_fn fn, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "tsc_fuzz_replay: cannot open %s\n", path); return -1; }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb, cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        if (k == 0) break;
        n += k;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) { free(buf); fprintf(stderr, "tsc_fuzz_replay: cannot read %s\n", path); return -1; }
    fprintf(stderr, "replay %s (%zu bytes)\n", path, n);
    /* an exact-size copy, so an overread past the input is caught under ASan */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return -1; }
    if (n) memcpy(exact, buf, n);
    free(buf);
    fn(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every regular file of dir (not starting with '.', README excepted), in name order. */
static int run_dir(target_fn fn, const char *dir, int *count) {
    DIR *dp = opendir(dir);
    if (!dp) { fprintf(stderr, "tsc_fuzz_replay: cannot open folder %s\n", dir); return -1; }
    char **names = NULL;
    size_t nn = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        if (e->d_name[0] == '.' || !strncmp(e->d_name, "README", 6)) continue;
        if (nn == cap) {
            char **nb = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *nb);
            if (!nb) { rc = -1; break; }
            names = nb;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[nn] = malloc(len))) { rc = -1; break; }
        snprintf(names[nn++], len, "%s/%s", dir, e->d_name);
    }
    closedir(dp);
    if (nn) qsort(names, nn, sizeof *names, cmp_str);
    for (size_t i = 0; i < nn; i++) {
        struct stat sb;
        if (rc == 0 && stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) {
            if (run_file(fn, names[i]) != 0) rc = -1;
            else ++*count;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tsc_fuzz_replay TARGET PATH...\n");
        return 2;
    }
    target_fn fn = NULL;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (!strcmp(argv[1], targets[i].name)) fn = targets[i].fn;
    if (!fn) {
        fprintf(stderr, "tsc_fuzz_replay: unknown target '%s' (dump, safetensors, log, json, policy, select, ckpt)\n",
                argv[1]);
        return 2;
    }
    int count = 0;
    for (int i = 2; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) continue; /* a target without regressions has no folder */
        int rc = S_ISDIR(sb.st_mode) ? run_dir(fn, argv[i], &count) : run_file(fn, argv[i]);
        if (!S_ISDIR(sb.st_mode) && rc == 0) count++;
        if (rc != 0) return 1;
    }
    printf("tsc_fuzz_replay %s: %d inputs, no crash\n", argv[1], count);
    return 0;
}
