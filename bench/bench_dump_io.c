/* bench_dump_io.c: write and read one GPT-2-small layer (B=8, H=12, T=1024, D=64; q, k, v, o, do in
 * BF16, about 63 MB) with tilescope's dump writer/reader and with h5py (bench/h5py_io.py, run as a
 * child in the same run on the same arrays and the same layout), and print GB/s and the ratios.
 *
 * usage: bench_dump_io --python PY --script bench/h5py_io.py [--reps N] [--dir DIR]
 *                      [--B 8] [--H 12] [--T 1024] [--D 64]
 * (bench/bench_dump_io.sh finds the python and the script.) Best of N repetitions each; files sit in
 * the page cache (warm), for both sides alike. Not a test: nothing is asserted except that the
 * values read back are the values written. The load average is printed at the start and the end;
 * a busy start means no ratio is claimed (bench_load.h). The last line is the README row.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_load.h"
#include "tsc_dump.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double json_num(const char *s, const char *key) {
    const char *p = strstr(s, key);
    if (!p) return -1;
    p = strchr(p, ':');
    return p ? strtod(p + 1, NULL) : -1;
}

static int die(const char *what) {
    fprintf(stderr, "bench_dump_io: %s: %s\n", what, tsc_error_last());
    return 1;
}

int main(int argc, char **argv) {
    const char *py = NULL, *script = NULL, *dir_arg = NULL;
    long reps = 3, B = 8, H = 12, T = 1024, D = 64;
    for (int i = 1; i < argc; i += 2) {  /* every option takes one value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "bench_dump_io: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--python")) py = v;
        else if (!strcmp(a, "--script")) script = v;
        else if (!strcmp(a, "--dir")) dir_arg = v;
        else if (!strcmp(a, "--reps")) reps = strtol(v, NULL, 10);
        else if (!strcmp(a, "--B")) B = strtol(v, NULL, 10);
        else if (!strcmp(a, "--H")) H = strtol(v, NULL, 10);
        else if (!strcmp(a, "--T")) T = strtol(v, NULL, 10);
        else if (!strcmp(a, "--D")) D = strtol(v, NULL, 10);
        else { fprintf(stderr, "bench_dump_io: unknown option %s\n", a); return 2; }
    }
    if (!py || !script || reps < 1 || B < 1 || H < 1 || T < 1 || D < 1) {
        fprintf(stderr, "usage: bench_dump_io --python PY --script h5py_io.py [--reps N] [--dir DIR] "
                        "[--B 8] [--H 12] [--T 1024] [--D 64]\n");
        return 2;
    }
    char dir[1024];
    if (dir_arg) snprintf(dir, sizeof dir, "%s", dir_arg);
    else {
        snprintf(dir, sizeof dir, "bench_dump_io_XXXXXX");
        if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    }
    size_t n = (size_t)(B * H * T * D);
    const char *names[5] = {"q", "k", "v", "o", "do"};
    uint16_t *arr = malloc(5 * n * sizeof(uint16_t));
    if (!arr) { fprintf(stderr, "out of memory\n"); return 1; }
    /* BF16 bits of values spread over a few binades, both signs (no NaN/Inf: h5py's check compares
     * bits after conversion) */
    uint64_t s = 42;
    for (size_t i = 0; i < 5 * n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t r = (uint32_t)(s >> 33);
        arr[i] = (uint16_t)(((r & 1) << 15) | ((120 + (r >> 1) % 16) << 7) | ((r >> 5) & 0x7f));
    }
    char path[1200], bin[1200], tsc_path[1200];
    snprintf(bin, sizeof bin, "%s/arrays.bin", dir);
    snprintf(tsc_path, sizeof tsc_path, "%s/tsc_layer.h5", dir);
    FILE *fp = fopen(bin, "wb");
    if (!fp || fwrite(arr, sizeof(uint16_t), 5 * n, fp) != 5 * n || fclose(fp) != 0) {
        fprintf(stderr, "bench_dump_io: writing %s: %s\n", bin, strerror(errno));
        return 1;
    }
    tsc_dump_meta_t m;
    tsc_dump_meta_init(&m);
    m.n_layer = 12; m.n_head = (int)H; m.n_kv_head = (int)H; m.head_dim = (int)D; m.d_model = 768;
    m.seq_len = (int)T; m.batch = (int)B; m.softmax_scale = 0.125; m.tile_q = m.tile_k = 512;
    snprintf(m.policy, sizeof m.policy, "bf16-fa2");
    snprintf(m.producer, sizeof m.producer, "bench_dump_io");
    uint64_t dims[4] = {(uint64_t)B, (uint64_t)H, (uint64_t)T, (uint64_t)D};
    double bytes = 5.0 * (double)n * 2.0;
    double w_best = 1e30, rr_best = 1e30, rf_best = 1e30, hw = 1e30, hr = 1e30, hf = 1e30;
    uint16_t *head16 = malloc((size_t)(T * D) * sizeof(uint16_t));
    float *head32 = malloc((size_t)(T * D) * sizeof(float));
    if (!head16 || !head32) { fprintf(stderr, "out of memory\n"); return 1; }
    long bad = 0;
    const int busy = bench_load_report("start");
    for (long r = 0; r < reps; r++) {
        /* start from no file, like the h5py side (freeing the old file's pages is not writing) */
        unlink(tsc_path);
        double t0 = now();
        tsc_dump_writer_t *w;
        if (tsc_dump_writer_open(&w, tsc_path, &m, NULL) != TSC_OK) return die("open writer");
        for (int k = 0; k < 5; k++)
            if (tsc_dump_writer_put(w, 0, 1, names[k], 4, dims, TSC_FMT_BF16, arr + (size_t)k * n, TSC_FMT_BF16) !=
                TSC_OK)
                return die("put");
        if (tsc_dump_writer_step_done(w, 0) != TSC_OK || tsc_dump_writer_close(w) != TSC_OK) return die("close");
        double t1 = now();
        if (t1 - t0 < w_best) w_best = t1 - t0;

        /* streaming reads, one head of one tensor at a time, as analysis reads */
        tsc_dump_t *d;
        t0 = now();
        if (tsc_dump_open(&d, tsc_path) != TSC_OK) return die("open");
        for (int k = 0; k < 5; k++)
            for (long b = 0; b < B; b++)
                for (long h = 0; h < H; h++)
                    if (tsc_dump_read_raw(d, 0, 1, names[k], (int)b, (int)h, head16) != TSC_OK) return die("read raw");
        tsc_dump_close(d);
        t1 = now();
        if (t1 - t0 < rr_best) rr_best = t1 - t0;

        t0 = now();
        if (tsc_dump_open(&d, tsc_path) != TSC_OK) return die("open");
        for (int k = 0; k < 5; k++)
            for (long b = 0; b < B; b++)
                for (long h = 0; h < H; h++) {
                    if (tsc_dump_read(d, 0, 1, names[k], (int)b, (int)h, head32) != TSC_OK) return die("read");
                    if (r == 0) {
                        const uint16_t *src = arr + (size_t)k * n + (size_t)(b * H + h) * (size_t)(T * D);
                        for (long i = 0; i < T * D; i++) {
                            uint32_t u;
                            memcpy(&u, &head32[i], 4);
                            bad += (u >> 16) != src[i] || (u & 0xffff);
                        }
                    }
                }
        tsc_dump_close(d);
        t1 = now();
        if (t1 - t0 < rf_best) rf_best = t1 - t0;
        /* h5py on the same arrays, interleaved with ours so that load on the machine hits both */
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s' %ld %ld %ld %ld 1", py, script, bin, dir, B, H, T, D);
        FILE *pp = popen(cmd, "r");
        char line[1024] = "";
        if (!pp || !fgets(line, sizeof line, pp)) { fprintf(stderr, "bench_dump_io: running %s failed\n", cmd); return 1; }
        if (pclose(pp) != 0) { fprintf(stderr, "bench_dump_io: %s failed\n", cmd); return 1; }
        double w_ = json_num(line, "\"write_s\""), r_ = json_num(line, "\"read_raw_s\""), f_ = json_num(line, "\"read_f32_s\"");
        if (w_ <= 0 || r_ <= 0 || f_ <= 0) { fprintf(stderr, "bench_dump_io: bad h5py output: %s\n", line); return 1; }
        if (w_ < hw) hw = w_;
        if (r_ < hr) hr = r_;
        if (f_ < hf) hf = f_;
    }
    if (bad) { fprintf(stderr, "bench_dump_io: %ld values read back differ\n", bad); return 1; }

    printf("one layer: B=%ld H=%ld T=%ld D=%ld, q k v o do in bf16, %.1f MB, uncompressed, chunk = one head, "
           "best of %ld, warm page cache\n", B, H, T, D, bytes / 1e6, reps);
    const double gw = bytes / w_best / 1e9, gr = bytes / rf_best / 1e9;
    const double hgw = bytes / hw / 1e9, hgr = bytes / hf / 1e9;
    printf("%-34s %10s %10s %8s\n", "operation", "tilescope", "h5py", "ratio");
    const char *op[3] = {"write (bits as given)", "read raw bits (tsc: head by head)", "read as float32 (tsc: head by head)"};
    const double ts_s[3] = {w_best, rr_best, rf_best}, py_s[3] = {hw, hr, hf};
    for (int i = 0; i < 3; i++) {
        printf("%-34s %7.2f GB/s %5.2f GB/s ", op[i], bytes / ts_s[i] / 1e9, bytes / py_s[i] / 1e9);
        if (busy) printf("%8s\n", "(busy)");
        else printf("%7.2fx\n", py_s[i] / ts_s[i]);
    }
    printf("(ratio = tilescope throughput / h5py throughput; h5py reads whole datasets, float32 through "
           "HDF5's conversion, ds.astype('float32')[()])\n");
    bench_load_report("end");
    if (busy) printf("%s\n", BENCH_NOT_CLAIMED);
    char ratio[96];
    if (busy) snprintf(ratio, sizeof ratio, "not claimed (machine busy)");
    else snprintf(ratio, sizeof ratio, "%.2fx, %.2fx", hw / w_best, hf / rf_best);
    printf("TABLE | one GPT-2-small layer, %.1f MB BF16, write and read as float32 | write %.2f GB/s, read %.2f GB/s | "
           "h5py %.2f, %.2f GB/s | %s |\n", bytes / 1e6, gw, gr, hgw, hgr, ratio);
    unlink(bin);
    unlink(tsc_path);
    if (!dir_arg) rmdir(dir);
    snprintf(path, sizeof path, "%s", dir);
    free(arr); free(head16); free(head32);
    return 0;
}
