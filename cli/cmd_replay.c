/* cmd_replay.c: `tilescope replay DUMP --policy P [--policy P2 ...] -o FILE`: recompute attention
 * forward and backward from a dump's q, k, v, do under precision policies, write the results
 * (docs/FORMAT.md §2) and compare every policy against the first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_attention.h"
#include "tsc_dump.h"
#include "tsc_h5.h"
#include "tsc_policy.h"
#include "tsc_select.h"

const char tsc_usage_replay[] =
    "usage: tilescope replay DUMP --policy P [--policy P2 ...] [-o FILE] [--steps SET]\n"
    "                        [--layers SET] [--heads SET] [--batches SET] [--forward-only]\n"
    "                        [--dump-tiles] [--json] [--quiet]\n"
    "\n"
    "Recomputes attention from the dump's captured q, k, v and do under each precision policy\n"
    "(the CPU reference of kernels/tsc_attention.h), writes o, lse, delta, dq, dk, dv per policy\n"
    "to FILE (docs/FORMAT.md section 2; written to a temporary name, then renamed) and prints\n"
    "how far each policy is from the first: max and mean absolute error and the relative error\n"
    "(max abs error / max |reference|) of O and delta, and the signed mean of the delta\n"
    "differences (the bias of PAPER.md section 4).\n"
    "\n"
    "  --policy P       a policy string (repeatable, at least one; the first is the reference),\n"
    "                   e.g. fp32, bf16-torch, bf16-fa2+stable:beta=2,eps=1e-3, bf16-torch+fp32:pv;\n"
    "                   an invalid string lists the presets and modifiers\n"
    "  -o FILE          output HDF5 file (default replay.h5)\n"
    "  --steps SET      steps to replay (all | N | start:stop[:stride] | a,b,...; default all)\n"
    "  --layers SET     layers to replay (default all)\n"
    "  --heads SET      query heads to replay (default all; dk/dv are then per query head)\n"
    "  --batches SET    batch rows to replay (default all)\n"
    "  --forward-only   skip the backward (then do is not needed; delta, dq, dk, dv not written)\n"
    "  --dump-tiles     use the dump's tile sizes (root tile_q, tile_k) in every policy instead of\n"
    "                   each preset's own (default: the preset's, or the policy's +tile)\n"
    "  --json           print the configuration and comparison as one JSON object on stdout\n"
    "  --quiet          print only the comparison table\n"
    "\n"
    "Exit status: 0 done, 1 the dump cannot be read or lacks a dataset the replay needs (do for\n"
    "the backward), 2 usage error.\n";

#define MAX_POLICIES 16

typedef struct {
    double o_max, o_sum, o_refmax, d_max, d_sum, d_refmax, d_signed;
    double n_o, n_d;
} cmp_t;

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Reads one per-head dataset slice for the selected batches and heads into dst [Bs, Hs, T, X]
 * (kv datasets map query head h to its kv head). Checks values are finite. */
static int load(tsc_dump_t *d, const char *dump_path, long long step, int layer, const char *name,
                const int *bs, int nb, const int *hs, int nh, int kv, size_t slice, float *dst) {
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    const int G = m->n_head / m->n_kv_head;
    for (int bi = 0; bi < nb; bi++)
        for (int hi = 0; hi < nh; hi++) {
            const int h = kv ? hs[hi] / G : hs[hi];
            float *out = dst + ((size_t)bi * nh + hi) * slice;
            if (tsc_dump_read(d, step, layer, name, bs[bi], h, out) != TSC_OK)
                return tsc_cli_fail("replay", "%s: %s", dump_path, tsc_error_last());
            for (size_t i = 0; i < slice; i++)
                if (!isfinite(out[i]))
                    return tsc_cli_fail("replay", "%s: step %lld layer %d dataset '%s' batch %d %s %d holds a "
                                        "non-finite value at element %zu (%g); a head never captured reads as "
                                        "NaN: select captured heads with --heads", dump_path, step, layer, name,
                                        bs[bi], kv ? "kv head" : "head", h, i, (double)out[i]);
        }
    return 0;
}

static int write_group(tsc_h5_file_t *f, const char *path, int f64, const void *o, const void *lse,
                       const void *delta, const void *dq, const void *dk, const void *dv, int nb, int nh, int T,
                       int D, const char *policy, int bwd) {
    hid_t g;
    if (tsc_h5_group_create(f->fid, path, &g) != TSC_OK) return -1;
    uint64_t d4[4] = {(uint64_t)nb, (uint64_t)nh, (uint64_t)T, (uint64_t)D}, d3[3] = {(uint64_t)nb, (uint64_t)nh,
                                                                                       (uint64_t)T};
    const char *l4 = "batch,head,token,feature", *l3 = "batch,head,token";
    tsc_status_t st = tsc_h5_attr_write_str(g, "policy", policy);
#define W(name, rank, dims, data, labels)                                                          \
    if (st == TSC_OK)                                                                              \
        st = f64 ? tsc_h5_write_doubles(g, name, rank, dims, (const double *)(data), labels, NULL) \
                 : tsc_h5_write_floats(g, name, rank, dims, (const float *)(data), labels, NULL);
    W("o", 4, d4, o, l4)
    W("lse", 3, d3, lse, l3)
    if (bwd) {
        W("delta", 3, d3, delta, l3)
        W("dq", 4, d4, dq, l4)
        W("dk", 4, d4, dk, l4)
        W("dv", 4, d4, dv, l4)
    }
#undef W
    H5Gclose(g);
    return st == TSC_OK ? 0 : -1;
}

int tsc_cmd_replay(int argc, char **argv) {
    const char *dump_path = NULL, *out_path = "replay.h5";
    const char *pol_str[MAX_POLICIES];
    int n_pol = 0, json = 0, quiet = 0, fwd_only = 0, dump_tiles = 0;
    tsc_select_t sel;
    tsc_select_init(&sel);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        tsc_select_set_t *set = NULL;
        if (strcmp(a, "--policy") == 0) {
            const char *v = tsc_cli_value("replay", argc, argv, &i);
            if (!v) return 2;
            if (n_pol == MAX_POLICIES)
                return tsc_cli_usage_error("replay", "at most %d --policy flags", MAX_POLICIES);
            pol_str[n_pol++] = v;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (!(out_path = tsc_cli_value("replay", argc, argv, &i))) return 2;
        } else if (strcmp(a, "--steps") == 0) set = &sel.steps;
        else if (strcmp(a, "--layers") == 0) set = &sel.layers;
        else if (strcmp(a, "--heads") == 0) set = &sel.heads;
        else if (strcmp(a, "--batches") == 0) set = &sel.batches;
        else if (strcmp(a, "--json") == 0) json = 1;
        else if (strcmp(a, "--quiet") == 0) quiet = 1;
        else if (strcmp(a, "--forward-only") == 0) fwd_only = 1;
        else if (strcmp(a, "--dump-tiles") == 0) dump_tiles = 1;
        else if (a[0] == '-' && a[1]) return tsc_cli_usage_error("replay", "unknown flag '%s'", a);
        else if (!dump_path) dump_path = a;
        else return tsc_cli_usage_error("replay", "more than one DUMP ('%s' and '%s')", dump_path, a);
        if (set) {
            const char *v = tsc_cli_value("replay", argc, argv, &i);
            if (!v) return 2;
            if (tsc_select_set_parse(set, v) != TSC_OK)
                return tsc_cli_usage_error("replay", "%s: %s", a, tsc_error_last());
        }
    }
    if (!dump_path) return tsc_cli_usage_error("replay", "no DUMP given");
    if (n_pol == 0) return tsc_cli_usage_error("replay", "no --policy given (e.g. --policy fp32 --policy bf16-torch)");
    tsc_policy_t pol[MAX_POLICIES];
    char pol_name[MAX_POLICIES][TSC_POLICY_STR_MAX];
    for (int p = 0; p < n_pol; p++)
        if (tsc_policy_parse(pol_str[p], &pol[p]) != TSC_OK)
            return tsc_cli_usage_error("replay", "--policy: %s", tsc_error_last());

    tsc_dump_t *d = NULL;
    if (tsc_dump_open(&d, dump_path) != TSC_OK) return tsc_cli_fail("replay", "%s", tsc_error_last());
    const tsc_dump_meta_t *m = tsc_dump_meta(d);
    for (int p = 0; p < n_pol; p++) {
        if (dump_tiles) {
            if (m->tile_q < 1 || m->tile_q > 65536 || m->tile_k < 1 || m->tile_k > 65536) {
                tsc_dump_close(d);
                return tsc_cli_fail("replay", "%s: tile sizes %d x %d are not usable with --dump-tiles", dump_path,
                                    m->tile_q, m->tile_k);
            }
            pol[p].block_q = m->tile_q;
            pol[p].block_k = m->tile_k;
        }
        if (tsc_policy_format(&pol[p], pol_name[p], sizeof pol_name[p]) != TSC_OK)
            snprintf(pol_name[p], sizeof pol_name[p], "%s", pol_str[p]);
    }
    const int T = m->seq_len, D = m->head_dim;
    int rc = 1;
    int *hs = malloc(sizeof(int) * (size_t)m->n_head), *bs = malloc(sizeof(int) * (size_t)m->batch);
    long long *steps = malloc(sizeof(long long) * (size_t)(tsc_dump_n_steps(d) + 1));
    int *layers = malloc(sizeof(int) * (size_t)(m->n_layer + 1));
    float *in = NULL;
    void *outb = NULL, *ref = NULL;
    tsc_h5_file_t f;
    f.fid = H5I_INVALID_HID;
    int file_open = 0;
    cmp_t cmp[MAX_POLICIES];
    memset(cmp, 0, sizeof cmp);
    if (!hs || !bs || !steps || !layers) {
        tsc_cli_fail("replay", "out of memory");
        goto done;
    }
    int nh = 0, nb = 0, ns = 0;
    for (int h = 0; h < m->n_head; h++)
        if (tsc_select_set_has(&sel.heads, h)) hs[nh++] = h;
    for (int b = 0; b < m->batch; b++)
        if (tsc_select_set_has(&sel.batches, b)) bs[nb++] = b;
    for (int i = 0; i < tsc_dump_n_steps(d); i++)
        if (tsc_select_set_has(&sel.steps, tsc_dump_step_at(d, i))) steps[ns++] = tsc_dump_step_at(d, i);
    if (nh == 0 || nb == 0 || ns == 0) {
        tsc_cli_fail("replay", "%s: the selection leaves nothing to replay (%d steps, %d heads, %d batch rows "
                     "selected; the dump has %d steps, %d heads, B=%d)", dump_path, ns, nh, nb,
                     tsc_dump_n_steps(d), m->n_head, m->batch);
        goto done;
    }
    /* every (step, layer) to replay, checked up front so a missing dataset fails before work */
    int n_jobs = 0;
    const char *need[4] = {"q", "k", "v", "do"};
    for (int si = 0; si < ns; si++) {
        int n_l = 0;
        if (tsc_dump_layers(d, steps[si], layers, m->n_layer, &n_l) != TSC_OK) {
            tsc_cli_fail("replay", "%s", tsc_error_last());
            goto done;
        }
        for (int li = 0; li < n_l && li < m->n_layer; li++) {
            if (!tsc_select_set_has(&sel.layers, layers[li])) continue;
            for (int k = 0; k < (fwd_only ? 3 : 4); k++) {
                tsc_dump_dataset_info_t info;
                if (tsc_dump_dataset_info(d, steps[si], layers[li], need[k], &info) != TSC_OK) {
                    tsc_cli_fail("replay", "%s: step %lld layer %d: dataset '%s' is missing or unusable (%s)%s",
                                 dump_path, steps[si], layers[li], need[k], tsc_error_last(),
                                 k == 3 ? "; the backward replay needs do (use --forward-only to skip it)" : "");
                    goto done;
                }
            }
            n_jobs++;
        }
    }
    if (n_jobs == 0) {
        tsc_cli_fail("replay", "%s: no selected layer in the selected steps", dump_path);
        goto done;
    }
    char selbuf[512];
    tsc_select_format(&sel, selbuf, sizeof selbuf);
    if (!json && !quiet) {
        printf("replay %s: B=%d H=%d Hkv=%d T=%d D=%d causal=%d scale=%g, run policy '%s'\n", dump_path, m->batch,
               m->n_head, m->n_kv_head, T, D, m->causal, m->softmax_scale, m->policy);
        printf("  selection %s: %d (step, layer) pairs, %d heads, %d batch rows; %s\n", selbuf, n_jobs, nh, nb,
               fwd_only ? "forward only" : "forward and backward");
        for (int p = 0; p < n_pol; p++) printf("  policy %d: %s%s\n", p, pol_name[p], p == 0 ? " (reference)" : "");
        printf("  output %s\n", out_path);
        fflush(stdout);
    }

    const size_t TD = (size_t)T * D, nq = (size_t)nb * nh * TD, nr = (size_t)nb * nh * T;
    in = malloc(sizeof(float) * 4 * nq);
    outb = malloc(sizeof(double) * (4 * nq + 2 * nr));  /* o lse delta dq dk dv, widest type */
    ref = malloc(sizeof(double) * (nq + nr));           /* policy 0's o and delta, as double */
    if (!in || !outb || !ref) {
        tsc_cli_fail("replay", "out of memory for %d heads of [%d, %d]", nb * nh, T, D);
        goto done;
    }
    if (tsc_h5_create(&f, out_path) != TSC_OK) {
        tsc_cli_fail("replay", "%s", tsc_error_last());
        goto done;
    }
    file_open = 1;
    {
        tsc_status_t st = tsc_h5_attr_write_str(f.fid, "format", "tilescope-replay");
        if (st == TSC_OK) st = tsc_h5_attr_write_long(f.fid, "format_version", 1);
        if (st == TSC_OK) st = tsc_h5_attr_write_str(f.fid, "source", dump_path);
        if (st == TSC_OK) st = tsc_h5_attr_write_str(f.fid, "source_policy", m->policy);
        if (st == TSC_OK) st = tsc_h5_attr_write_str(f.fid, "selection", selbuf);
        if (st == TSC_OK) st = tsc_h5_attr_write_str(f.fid, "producer", "tilescope replay " TSC_VERSION);
        if (st == TSC_OK) st = tsc_h5_attr_write_long(f.fid, "n_policies", n_pol);
        if (st == TSC_OK) st = tsc_h5_attr_write_long(f.fid, "backward", !fwd_only);
        long geo[7] = {m->batch, m->n_head, m->n_kv_head, T, D, m->causal, 0};
        const char *geo_names[6] = {"batch", "n_head", "n_kv_head", "seq_len", "head_dim", "causal"};
        for (int i = 0; i < 6 && st == TSC_OK; i++) st = tsc_h5_attr_write_long(f.fid, geo_names[i], geo[i]);
        if (st == TSC_OK) st = tsc_h5_attr_write_double(f.fid, "softmax_scale", m->softmax_scale);
        long hl[1024], bl[1024];
        for (int i = 0; i < nh && i < 1024; i++) hl[i] = hs[i];
        for (int i = 0; i < nb && i < 1024; i++) bl[i] = bs[i];
        if (st == TSC_OK) st = tsc_h5_attr_write_longs(f.fid, "heads", hl, (size_t)(nh < 1024 ? nh : 1024));
        if (st == TSC_OK) st = tsc_h5_attr_write_longs(f.fid, "batches", bl, (size_t)(nb < 1024 ? nb : 1024));
        if (st != TSC_OK) {
            tsc_cli_fail("replay", "%s", tsc_error_last());
            goto done;
        }
    }

    const int tty = isatty(2) && !json;
    int job = 0;
    for (int si = 0; si < ns; si++) {
        int n_l = 0;
        tsc_dump_layers(d, steps[si], layers, m->n_layer, &n_l);
        for (int li = 0; li < n_l && li < m->n_layer; li++) {
            const int L = layers[li];
            if (!tsc_select_set_has(&sel.layers, L)) continue;
            float *q = in, *k = q + nq, *v = k + nq, *dO = v + nq;
            if (load(d, dump_path, steps[si], L, "q", bs, nb, hs, nh, 0, TD, q) ||
                load(d, dump_path, steps[si], L, "k", bs, nb, hs, nh, 1, TD, k) ||
                load(d, dump_path, steps[si], L, "v", bs, nb, hs, nh, 1, TD, v) ||
                (!fwd_only && load(d, dump_path, steps[si], L, "do", bs, nb, hs, nh, 0, TD, dO)))
                goto done;
            /* each selected query head gets its own copy of its kv head: H = Hkv = heads selected */
            tsc_attn_dims_t dims = {nb, nh, nh, T, D, m->causal, m->softmax_scale};
            for (int p = 0; p < n_pol; p++) {
                const int f64 = tsc_policy_uses_fp64(&pol[p]);
                const size_t es = f64 ? sizeof(double) : sizeof(float);
                double *qd = NULL;
                char *ob = outb;
                tsc_attn_io_t io = {f64 ? TSC_ATTN_F64 : TSC_ATTN_F32, q, k, v, fwd_only ? NULL : dO,
                                    ob, ob + nq * es, ob + (nq + nr) * es, ob + (nq + 2 * nr) * es,
                                    ob + (2 * nq + 2 * nr) * es, ob + (3 * nq + 2 * nr) * es};
                if (f64) {
                    qd = malloc(sizeof(double) * 4 * nq);
                    if (!qd) {
                        tsc_cli_fail("replay", "out of memory");
                        goto done;
                    }
                    for (size_t i = 0; i < 4 * nq; i++) qd[i] = in[i];
                    io.q = qd; io.k = qd + nq; io.v = qd + 2 * nq; io.dout = fwd_only ? NULL : qd + 3 * nq;
                }
                tsc_status_t st = tsc_attn_run(&pol[p], &dims, &io, NULL, 0);
                free(qd);
                if (st != TSC_OK) {
                    tsc_cli_fail("replay", "step %lld layer %d policy %s: %s", steps[si], L, pol_name[p],
                                 tsc_error_last());
                    goto done;
                }
                char path[96];
                snprintf(path, sizeof path, "step_%08lld/layer_%03d/policy_%d", steps[si], L, p);
                if (write_group(&f, path, f64, io.o, io.lse, io.delta, io.dq, io.dk, io.dv, nb, nh, T, D,
                                pol_name[p], !fwd_only)) {
                    tsc_cli_fail("replay", "%s", tsc_error_last());
                    goto done;
                }
                /* comparison against policy 0, in double */
                double *r_o = ref, *r_d = (double *)ref + nq;
                for (size_t i = 0; i < nq + (fwd_only ? 0 : nr); i++) {
                    const int is_o = i < nq;
                    size_t j = is_o ? i : i - nq;
                    double x = f64 ? ((double *)(is_o ? io.o : io.delta))[j] : ((float *)(is_o ? io.o : io.delta))[j];
                    if (p == 0) {
                        (is_o ? r_o : r_d)[j] = x;
                        continue;
                    }
                    double r = (is_o ? r_o : r_d)[j], diff = x - r, ad = fabs(diff);
                    cmp_t *c = &cmp[p];
                    if (is_o) {
                        c->o_max = ad > c->o_max ? ad : c->o_max;
                        c->o_sum += ad;
                        c->o_refmax = fabs(r) > c->o_refmax ? fabs(r) : c->o_refmax;
                        c->n_o++;
                    } else {
                        c->d_max = ad > c->d_max ? ad : c->d_max;
                        c->d_sum += ad;
                        c->d_signed += diff;
                        c->d_refmax = fabs(r) > c->d_refmax ? fabs(r) : c->d_refmax;
                        c->n_d++;
                    }
                }
            }
            char lpath[64];
            snprintf(lpath, sizeof lpath, "step_%08lld/layer_%03d", steps[si], L);
            hid_t g;
            if (tsc_h5_group_create(f.fid, lpath, &g) != TSC_OK) {
                tsc_cli_fail("replay", "%s", tsc_error_last());
                goto done;
            }
            H5Gclose(g);
            job++;
            if (tty) {
                fprintf(stderr, "\rreplay: %d/%d (step %lld, layer %d)", job, n_jobs, steps[si], L);
                if (job == n_jobs) fputc('\n', stderr);
            }
        }
    }
    for (int p = 0; p < n_pol; p++) {
        char gp[32];
        snprintf(gp, sizeof gp, "policy_%d", p);
        hid_t g;
        tsc_status_t st = tsc_h5_group_create(f.fid, gp, &g);
        if (st != TSC_OK) {
            tsc_cli_fail("replay", "%s", tsc_error_last());
            goto done;
        }
        const cmp_t *c = &cmp[p];
        st = tsc_h5_attr_write_str(g, "policy", pol_name[p]);
        if (st == TSC_OK && p > 0) {
            double vals[8] = {c->o_max, c->n_o ? c->o_sum / c->n_o : 0, c->o_refmax ? c->o_max / c->o_refmax : 0,
                              c->d_max, c->n_d ? c->d_sum / c->n_d : 0, c->d_refmax ? c->d_max / c->d_refmax : 0,
                              c->n_d ? c->d_signed / c->n_d : 0, c->d_signed};
            const char *names[8] = {"o_max_abs", "o_mean_abs", "o_rel", "delta_max_abs", "delta_mean_abs",
                                    "delta_rel", "delta_signed_mean", "delta_signed_sum"};
            for (int i = 0; i < 8 && st == TSC_OK; i++) st = tsc_h5_attr_write_double(g, names[i], vals[i]);
        }
        H5Gclose(g);
        if (st != TSC_OK) {
            tsc_cli_fail("replay", "%s", tsc_error_last());
            goto done;
        }
    }
    file_open = 0;
    if (tsc_h5_commit(&f) != TSC_OK) {
        tsc_cli_fail("replay", "%s", tsc_error_last());
        goto done;
    }

    if (json) {
        printf("{\"dump\": ");
        json_str(stdout, dump_path);
        printf(", \"output\": ");
        json_str(stdout, out_path);
        printf(", \"selection\": ");
        json_str(stdout, selbuf);
        printf(", \"pairs\": %d, \"heads\": [", n_jobs);
        for (int i = 0; i < nh; i++) printf("%s%d", i ? ", " : "", hs[i]);
        printf("], \"backward\": %s, \"policies\": [", fwd_only ? "false" : "true");
        for (int p = 0; p < n_pol; p++) {
            const cmp_t *c = &cmp[p];
            printf("%s{\"policy\": ", p ? ", " : "");
            json_str(stdout, pol_name[p]);
            if (p > 0) {
                printf(", \"o\": {\"max_abs\": %.9g, \"mean_abs\": %.9g, \"rel\": %.9g}", c->o_max,
                       c->n_o ? c->o_sum / c->n_o : 0, c->o_refmax ? c->o_max / c->o_refmax : 0);
                if (!fwd_only)
                    printf(", \"delta\": {\"max_abs\": %.9g, \"mean_abs\": %.9g, \"rel\": %.9g, \"signed_mean\": %.9g, "
                           "\"signed_sum\": %.9g}", c->d_max, c->n_d ? c->d_sum / c->n_d : 0,
                           c->d_refmax ? c->d_max / c->d_refmax : 0, c->n_d ? c->d_signed / c->n_d : 0, c->d_signed);
            }
            printf("}");
        }
        printf("]}\n");
    } else {
        printf("%-40s %10s %10s %10s %10s %10s %10s %11s\n", "policy vs reference", "O max", "O mean", "O rel",
               "delta max", "delta mean", "delta rel", "delta bias");
        printf("%-40s (reference)\n", pol_name[0]);
        for (int p = 1; p < n_pol; p++) {
            const cmp_t *c = &cmp[p];
            printf("%-40s %10.3e %10.3e %10.3e", pol_name[p], c->o_max, c->n_o ? c->o_sum / c->n_o : 0,
                   c->o_refmax ? c->o_max / c->o_refmax : 0);
            if (fwd_only) printf(" %10s %10s %10s %11s\n", "-", "-", "-", "-");
            else
                printf(" %10.3e %10.3e %10.3e %+11.3e\n", c->d_max, c->n_d ? c->d_sum / c->n_d : 0,
                       c->d_refmax ? c->d_max / c->d_refmax : 0, c->n_d ? c->d_signed / c->n_d : 0);
        }
        if (!quiet) printf("wrote %s\n", out_path);
    }
    rc = 0;
done:
    if (file_open) tsc_h5_abort(&f);
    free(in);
    free(outb);
    free(ref);
    free(hs);
    free(bs);
    free(steps);
    free(layers);
    tsc_dump_close(d);
    return rc;
}
