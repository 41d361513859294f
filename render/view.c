/* view.c: `tilescope view`: one self-contained offline HTML file to browse a dump's attention
 * patterns (tsc_attn_view.h, docs/VIEW.md). Each pattern is embedded as a greyscale PNG whose
 * byte is the level of P on the log scale (0 = masked, 1..255 = P from TSC_ATTN_P_MIN to 1); the
 * page's script colours it with viridis. Every head has a max-pooled overview; full-resolution
 * patterns are added, heads with ties or sinks first, while the file stays within the budget. */
#include "tsc_attn_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tsc_colormap.h"
#include "tsc_escape.h"
#include "tsc_file.h"
#include "tsc_select.h"
#include "tsc_surface.h"
#include "attn_view_internal.h"
#include "figure_internal.h"
#include "render_internal.h"

extern const char tsc_view_page_head[], tsc_view_page_tail[];

void tsc_view_opts_init(tsc_view_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->max_steps = 4, o->overview = 128, o->max_mb = 20;
}

typedef struct {
    long long step;
    int b, layer, head, kv, ov_f;
    char *ov, *full;           /* data URLs (full: NULL until added) */
    int n_tied, n_sinks;
    int32_t *tied;             /* [n_tied] rows */
    int *sinks;                /* [n_sinks] keys */
    double *sink_share;        /* [n_sinks] share of all rows' P */
    double score;              /* order of full-resolution embedding */
} vhead_t;

/* The input tokens of one (step, batch row), embedded once in the page. */
typedef struct {
    long long step;
    int b;
    attn_tokens_t t;
} vtok_t;

typedef struct {
    const tsc_view_opts_t *o;
    attn_src_t src;
    vhead_t *h;
    int n, cap, n_steps, n_layers, n_skipped;
    int *batches, n_batches;   /* the batch rows shown */
    vtok_t *tok;               /* [n_steps * n_batches] at most */
    int n_tok;
} view_t;

/* The level of P on the page's log scale: 1 + round(254 · (log10 P − log10 P_MIN) / −log10 P_MIN). */
static uint8_t level(double p) {
    double lo = log10(TSC_ATTN_P_MIN), t = p > 0 ? (log10(p) - lo) / -lo : 0;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return (uint8_t)(1 + lround(254 * t));
}

/* The map's kept P (a square grid: every row kept, pooled or not) as levels, encoded as a PNG data
 * URL (0 where masked). */
static tsc_status_t encode(const tsc_attn_map_t *m, char **url) {
    const int n = m->p_cols;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, n, n);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return tsc_error_set(TSC_ERR_EXTERNAL, "view: cairo cannot make a %dx%d image", n, n);
    }
    cairo_surface_flush(img);
    unsigned char *px = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double mx = (!m->causal || b <= a) ? m->p[(size_t)a * n + b] : -1;
            uint32_t v = mx >= 0 ? level(mx) : 0; /* NaN, -1 (nothing visible) and masked: 0 */
            uint32_t argb = 0xFF000000u | v << 16 | v << 8 | v;
            memcpy(px + (size_t)a * stride + (size_t)b * 4, &argb, 4);
        }
    cairo_surface_mark_dirty(img);
    tsc_strbuf_t png, b;
    tsc_strbuf_init(&png), tsc_strbuf_init(&b);
    tsc_status_t st = tsc_surface_png(img, 1, &png);
    cairo_surface_destroy(img);
    if (st == TSC_OK) {
        tsc_strbuf_puts(&b, "data:image/png;base64,");
        tsc_render_base64(&b, (const unsigned char *)png.p, png.len);
        if ((st = tsc_strbuf_status(&b)) == TSC_OK) *url = tsc_strbuf_take(&b);
    }
    tsc_strbuf_free(&png), tsc_strbuf_free(&b);
    return st;
}

static tsc_status_t add_head(view_t *v, const tsc_attn_map_t *m, int b) {
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 64;
        vhead_t *nh = realloc(v->h, sizeof *nh * (size_t)cap);
        if (!nh) return tsc_error_set(TSC_ERR_NOMEM, "view: out of memory");
        v->h = nh, v->cap = cap;
    }
    vhead_t *h = &v->h[v->n];
    memset(h, 0, sizeof *h);
    h->ov_f = m->pool;
    h->step = m->step, h->b = b, h->layer = m->layer, h->head = m->head, h->kv = m->kv_head;
    h->tied = malloc(sizeof(int32_t) * (size_t)(m->n_tied_rows + 1));
    h->sinks = malloc(sizeof(int) * (size_t)(m->n_sinks + 1));
    h->sink_share = malloc(sizeof(double) * (size_t)(m->n_sinks + 1));
    v->n++;
    if (!h->tied || !h->sinks || !h->sink_share) return tsc_error_set(TSC_ERR_NOMEM, "view: out of memory");
    for (int i = 0; i < m->T; i++)
        if (m->tie_eps_count[i] >= 2) h->tied[h->n_tied++] = i;
    for (int j = 0; j < m->T; j++)
        if (m->is_sink[j]) h->sink_share[h->n_sinks] = m->col_mass[j] / m->T, h->sinks[h->n_sinks++] = j;
    const tsc_jv_t *rec = attn_src_record(&v->src, m->step, m->layer, m->head);
    h->score = (rec && tsc_jv_num(rec, "flagged") > 0 ? 4.0 * m->T : 0) + h->n_tied + (double)m->T * h->n_sinks;
    return encode(m, &h->ov); /* computed pooled by ov_f (collect) */
}

static void view_free(view_t *v) {
    for (int i = 0; i < v->n; i++) free(v->h[i].ov), free(v->h[i].full), free(v->h[i].tied), free(v->h[i].sinks),
                                   free(v->h[i].sink_share);
    free(v->h);
    for (int i = 0; i < v->n_tok; i++) attn_tokens_free(&v->tok[i].t);
    free(v->tok), free(v->batches);
    attn_src_close(&v->src);
}

/* The steps shown: the selection, else the first max_steps. */
static tsc_status_t pick_steps(view_t *v, long long *steps, int *n) {
    tsc_dump_t *d = v->src.d;
    tsc_select_set_t set;
    tsc_select_set_all(&set);
    if (v->o->steps && tsc_select_set_parse(&set, v->o->steps) != TSC_OK) return tsc_error_wrap(TSC_ERR_ARG, "--steps: ");
    *n = 0;
    for (int i = 0; i < tsc_dump_n_steps(d); i++) {
        long long s = tsc_dump_step_at(d, i);
        if (tsc_select_set_has(&set, s) && (v->o->steps || *n < v->o->max_steps)) steps[(*n)++] = s;
    }
    if (*n == 0) {
        char ch[512];
        tsc_attn_map_choices(d, ch, sizeof ch);
        return tsc_error_set(TSC_ERR_MISSING, "view: --steps %s selects no step of %s (it has %s)", v->o->steps,
                             tsc_dump_path(d), ch);
    }
    return TSC_OK;
}

/* The batch rows shown: the selection (--batches), else the one row (--batch). */
static tsc_status_t pick_batches(view_t *v) {
    const int B = tsc_dump_meta(v->src.d)->batch;
    tsc_select_set_t set;
    tsc_select_set_all(&set);
    if (v->o->batches && tsc_select_set_parse(&set, v->o->batches) != TSC_OK)
        return tsc_error_wrap(TSC_ERR_ARG, "--batches: ");
    v->batches = malloc(sizeof(int) * (size_t)(B + 1));
    if (!v->batches) return tsc_error_set(TSC_ERR_NOMEM, "view: out of memory");
    v->n_batches = 0;
    for (int b = 0; b < B; b++)
        if (v->o->batches ? tsc_select_set_has(&set, b) : b == v->o->batch) v->batches[v->n_batches++] = b;
    if (v->n_batches == 0) {
        char what[96];
        if (v->o->batches) snprintf(what, sizeof what, "--batches %.40s selects no batch row of", v->o->batches);
        else snprintf(what, sizeof what, "batch row %d is not in", v->o->batch);
        return tsc_error_set(TSC_ERR_ARG, "view: %s %s (it has batch rows 0-%d)", what, tsc_dump_path(v->src.d), B - 1);
    }
    return TSC_OK;
}

/* Every (step, batch row, layer, head): the map, its overview and numbers; and each (step, batch
 * row)'s tokens. */
static tsc_status_t collect(view_t *v) {
    const tsc_dump_meta_t *mt = tsc_dump_meta(v->src.d);
    int ns = tsc_dump_n_steps(v->src.d);
    long long *steps = malloc(sizeof(long long) * (size_t)(ns + 1));
    int *layers = malloc(sizeof(int) * (size_t)(mt->n_layer + 1));
    tsc_status_t st = steps && layers ? pick_steps(v, steps, &v->n_steps) : tsc_error_set(TSC_ERR_NOMEM, "view: out of memory");
    if (st == TSC_OK) st = pick_batches(v);
    if (st == TSC_OK && !(v->tok = calloc((size_t)v->n_steps * (size_t)v->n_batches, sizeof *v->tok)))
        st = tsc_error_set(TSC_ERR_NOMEM, "view: out of memory");
    for (int si = 0; st == TSC_OK && si < v->n_steps; si++) {
        int nl = 0;
        st = tsc_dump_layers(v->src.d, steps[si], layers, mt->n_layer, &nl);
        if (nl > v->n_layers) v->n_layers = nl;
        for (int bi = 0; st == TSC_OK && bi < v->n_batches; bi++) {
            const int b = v->batches[bi];
            vtok_t *t = &v->tok[v->n_tok];
            st = attn_tokens_read(v->src.d, steps[si], b, &t->t);
            if (st == TSC_OK && t->t.kind > 0) t->step = steps[si], t->b = b, v->n_tok++;
            for (int li = 0; st == TSC_OK && li < nl && li < mt->n_layer; li++)
                for (int h = 0; st == TSC_OK && h < mt->n_head; h++) {
                    tsc_attn_map_t m;
                    tsc_attn_map_keep_t ov = {.row0 = 0, .row1 = 0,
                                              .pool = (mt->seq_len + v->o->overview - 1) / v->o->overview};
                    st = tsc_attn_map_compute_kept(v->src.d, steps[si], layers[li], h, b, v->src.policy, 0, &ov, &m);
                    if (st == TSC_ERR_NONFINITE) { /* a head the capture did not keep (NaN) has no tile */
                        tsc_error_clear();
                        st = TSC_OK;
                        v->n_skipped++;
                    } else if (st == TSC_OK) {
                        st = add_head(v, &m, b);
                    }
                    tsc_attn_map_free(&m);
                }
        }
    }
    free(steps), free(layers);
    return st;
}

static void kv_text(tsc_json_t *j, const char *label, const char *text) {
    tsc_json_array_begin(j);
    tsc_json_string(j, label);
    tsc_json_string(j, text);
    tsc_json_array_end(j);
}

/* The analysis' numbers of one head as [label, text] pairs. */
static void head_numbers(const view_t *v, const vhead_t *h, tsc_json_t *j) {
    static const struct { const char *label, *path; } nums[] = {
        {"flagged (pooled over steps)", "flagged"}, {"delta biased (this step)", "delta_biased"},
        {"O_lp - O_hp mean (ULP)", "o.mean_ulp"}, {"O_lp - O_hp signed mean", "o.signed_mean"},
        {"delta_lp - delta_hp sum", "delta.sum"}, {"delta cumulative sum", "delta.cumsum"},
        {"delta sign test p", "delta.p_sign"}, {"rows with >= 2 maxima (exact)", "ties.rows_multi_max"},
        {"rows with >= 2 maxima (within eps)", "ties.rows_multi_max_eps"}, {"P-bar = 1 entries", "ties.pbar_one"},
        {"census events (neg)", "census.events_neg"}, {"census events (pos)", "census.events_pos"}};
    const tsc_jv_t *rec = attn_src_record(&v->src, h->step, h->layer, h->head);
    char buf[512];
    for (size_t i = 0; rec && i < sizeof nums / sizeof nums[0]; i++) {
        const tsc_jv_t *x = tsc_jv_path(rec, nums[i].path);
        if (!x) continue;
        if (x->type == TSC_JV_BOOL) snprintf(buf, sizeof buf, "%s", x->num ? "yes" : "no");
        else if (x->type == TSC_JV_NUMBER) snprintf(buf, sizeof buf, "%.6g", x->num);
        else continue;
        kv_text(j, nums[i].label, buf);
    }
    size_t len = 0;
    buf[0] = '\0';
    for (size_t k = 0; rec && k < tsc_jv_len(rec, "ties.sink_keys") && len < sizeof buf; k++) {
        char a[48], b[48];
        snprintf(a, sizeof a, "ties.sink_keys.%zu", k), snprintf(b, sizeof b, "ties.sink_counts.%zu", k);
        if (tsc_jv_num(rec, a) >= 0)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%skey %g: %g rows", len ? "; " : "", tsc_jv_num(rec, a),
                                    tsc_jv_num(rec, b));
    }
    if (buf[0]) kv_text(j, "row max at key (analysis sink counts)", buf);
    double *nrm = NULL;
    int rank = 0;
    long long dims[4] = {0};
    char ds[96];
    snprintf(ds, sizeof ds, "step_%08lld/layer_%03d/wq_head_norm", h->step, h->layer);
    if (v->src.an && tsc_fig_read_ds(v->src.an, ds, &nrm, &rank, dims) == TSC_OK && rank == 1 && h->head < dims[0]) {
        snprintf(buf, sizeof buf, "%.6g", nrm[h->head]);
        kv_text(j, "W_Q spectral norm (this head)", buf);
    }
    tsc_error_clear();
    free(nrm);
}

static void head_json(const view_t *v, const vhead_t *h, tsc_json_t *j) {
    tsc_json_object_begin(j);
    tsc_json_kv_int(j, "s", h->step);
    tsc_json_kv_int(j, "b", h->b);
    tsc_json_kv_int(j, "l", h->layer);
    tsc_json_kv_int(j, "h", h->head);
    tsc_json_kv_int(j, "kv", h->kv);
    tsc_json_kv_int(j, "ovf", h->ov_f);
    tsc_json_kv_string(j, "ov", h->ov);
    tsc_json_kv_string(j, "full", h->full);
    tsc_json_key(j, "tied");
    tsc_json_array_begin(j);
    for (int i = 0; i < h->n_tied; i++) tsc_json_int(j, h->tied[i]);
    tsc_json_array_end(j);
    tsc_json_key(j, "sinks");
    tsc_json_array_begin(j);
    for (int i = 0; i < h->n_sinks; i++) {
        tsc_json_array_begin(j);
        tsc_json_int(j, h->sinks[i]);
        tsc_json_number(j, h->sink_share[i]);
        tsc_json_array_end(j);
    }
    tsc_json_array_end(j);
    tsc_json_key(j, "rec");
    tsc_json_array_begin(j);
    head_numbers(v, h, j);
    tsc_json_array_end(j);
    tsc_json_object_end(j);
}

static void meta_json(const view_t *v, tsc_json_t *j) {
    const tsc_dump_meta_t *mt = tsc_dump_meta(v->src.d);
    tsc_json_key(j, "meta");
    tsc_json_object_begin(j);
    tsc_json_kv_string(j, "dump", tsc_fig_base(v->src.dump_path));
    tsc_json_kv_string(j, "analysis", v->src.an ? tsc_fig_base(tsc_figure_src_dir(v->src.an)) : NULL);
    tsc_json_kv_string(j, "policy", v->src.policy);
    tsc_json_kv_string(j, "policy_source", v->src.policy_source);
    tsc_json_kv_int(j, "T", mt->seq_len);
    tsc_json_kv_int(j, "H", mt->n_head);
    tsc_json_kv_int(j, "Hkv", mt->n_kv_head);
    tsc_json_kv_int(j, "causal", mt->causal);
    tsc_json_key(j, "batches");
    tsc_json_array_begin(j);
    for (int i = 0; i < v->n_batches; i++) tsc_json_int(j, v->batches[i]);
    tsc_json_array_end(j);
    tsc_json_kv_number(j, "pmin", TSC_ATTN_P_MIN);
    tsc_json_kv_number(j, "tie_eps", TSC_ATTN_MAP_TIE_EPS);
    tsc_json_kv_number(j, "sink_share", TSC_ATTN_MAP_SINK_SHARE);
    tsc_json_kv_number(j, "sink_uniform", TSC_ATTN_MAP_SINK_UNIFORM);
    tsc_json_kv_number(j, "max_mb", v->o->max_mb);
    tsc_json_object_end(j);
    tsc_json_key(j, "lut");
    tsc_json_array_begin(j);
    for (int i = 0; i < 256; i++) tsc_json_int(j, tsc_cmap_argb(TSC_CMAP_VIRIDIS, i < 1 ? 0 : (i - 1) / 254.0) & 0xFFFFFF);
    tsc_json_array_end(j);
}

/* Each (step, batch row)'s tokens, once: the text in display form (tsc_dump.h; characters that
 * reorder text as \uXXXX) when the dump has it, else the ids. Strings from the file: the page sets
 * them as text only (textContent, fillText). */
static void tokens_json(const view_t *v, tsc_json_t *j) {
    char t[TSC_DUMP_TOKEN_TEXT_CAP + 64];
    tsc_json_key(j, "tokens");
    tsc_json_array_begin(j);
    for (int i = 0; i < v->n_tok; i++) {
        const vtok_t *k = &v->tok[i];
        tsc_json_object_begin(j);
        tsc_json_kv_int(j, "s", k->step);
        tsc_json_kv_int(j, "b", k->b);
        tsc_json_key(j, k->t.kind == 2 ? "text" : "ids");
        tsc_json_array_begin(j);
        for (int x = 0; x < k->t.T; x++) {
            if (k->t.kind == 2) attn_token_text(&k->t, x, t, sizeof t), tsc_json_string(j, t);
            else tsc_json_int(j, k->t.ids[x]);
        }
        tsc_json_array_end(j);
        tsc_json_object_end(j);
    }
    tsc_json_array_end(j);
}

/* The page: head, data, tail. The data is JSON inside a <script> element, written by the one writer of
 * script data (tsc_esc_script_json: < > & as \u escapes), so no string from the dump (its file name,
 * the analysis folder's name) can end the element or hide its end ("</script>", "<!--<script>"). */
static tsc_status_t page(const view_t *v, tsc_strbuf_t *out) {
    tsc_json_t j;
    tsc_json_init(&j);
    tsc_json_object_begin(&j);
    meta_json(v, &j);
    tokens_json(v, &j);
    tsc_json_key(&j, "heads");
    tsc_json_array_begin(&j);
    for (int i = 0; i < v->n; i++) head_json(v, &v->h[i], &j);
    tsc_json_array_end(&j);
    tsc_json_object_end(&j);
    tsc_status_t st = tsc_json_status(&j);
    if (st == TSC_OK) {
        tsc_strbuf_clear(out);
        tsc_strbuf_puts(out, tsc_view_page_head);
        tsc_esc_script_json(out, tsc_json_text(&j, NULL));
        tsc_strbuf_puts(out, tsc_view_page_tail);
        st = tsc_strbuf_status(out);
    }
    tsc_json_free(&j);
    return st;
}

static int by_score(const void *a, const void *b) {
    const vhead_t *x = *(const vhead_t *const *)a, *y = *(const vhead_t *const *)b;
    return x->score < y->score ? 1 : x->score > y->score ? -1 : 0;
}

/* Adds full-resolution patterns, best score first, while the page stays within the budget. */
static tsc_status_t add_full(view_t *v, size_t base, int *n_full) {
    const size_t budget = (size_t)(v->o->max_mb * 1e6);
    vhead_t **order = malloc(sizeof *order * (size_t)(v->n + 1));
    if (!order) return tsc_error_set(TSC_ERR_NOMEM, "view: out of memory");
    for (int i = 0; i < v->n; i++) order[i] = &v->h[i];
    qsort(order, (size_t)v->n, sizeof *order, by_score);
    size_t total = base;
    tsc_status_t st = TSC_OK;
    *n_full = 0;
    /* cairo's image edge is at most 32767 pixels: a longer context keeps its overviews only (not
     * computed at all: a full map is T x T floats) */
    const int fits = tsc_dump_meta(v->src.d)->seq_len <= 32767;
    for (int i = 0; st == TSC_OK && i < v->n; i++) {
        vhead_t *h = order[i];
        if (h->ov_f == 1) { /* the overview is the full pattern */
            (*n_full)++;
            continue;
        }
        if (!fits) break;
        tsc_attn_map_t m;
        st = tsc_attn_map_compute(v->src.d, h->step, h->layer, h->head, h->b, v->src.policy, 0, &m);
        char *url = NULL;
        if (st == TSC_OK) st = encode(&m, &url);
        tsc_attn_map_free(&m);
        if (st == TSC_ERR_UNSUPPORTED || st == TSC_ERR_EXTERNAL) { /* over the memory budget or cairo's */
            tsc_error_clear(); /* image size (long contexts): the overviews stay, no full pattern */
            st = TSC_OK;
            break;
        }
        if (st != TSC_OK) break;
        if (total + strlen(url) + 16 > budget) { free(url); break; }
        total += strlen(url) + 16;
        h->full = url;
        (*n_full)++;
    }
    free(order);
    return st;
}

tsc_status_t tsc_view_write(const tsc_view_opts_t *o, const char *path, tsc_view_info_t *info) {
    if (!o || !path) return tsc_error_set(TSC_ERR_ARG, "tsc_view_write: NULL argument");
    if (o->overview < 1 || o->max_steps < 1 || !(o->max_mb > 0))
        return tsc_error_set(TSC_ERR_ARG, "view: overview, max_steps and max_mb must be positive");
    view_t v;
    memset(&v, 0, sizeof v);
    v.o = o;
    tsc_strbuf_t html;
    tsc_strbuf_init(&html);
    int n_full = 0;
    tsc_status_t st = tsc_out_check(path);
    if (st == TSC_OK) st = attn_src_open(o->source, o->dump, o->policy, &v.src);
    if (st == TSC_OK) st = collect(&v);
    if (st == TSC_OK) st = page(&v, &html);
    if (st == TSC_OK && html.len > (size_t)(o->max_mb * 1e6))
        st = tsc_error_set(TSC_ERR_UNSUPPORTED, "view: the overviews alone take %.3g MB, above the budget of %g MB: "
                           "pass --max-mb %.2g or more, fewer --steps, or a smaller --overview", html.len / 1e6,
                           o->max_mb, ceil(html.len / 1e4) / 100);
    if (st == TSC_OK) st = add_full(&v, html.len, &n_full);
    if (st == TSC_OK && n_full) st = page(&v, &html);
    if (st == TSC_OK) st = tsc_out_write_all(path, html.p, html.len);
    if (st == TSC_OK && info) {
        const tsc_dump_meta_t *mt = tsc_dump_meta(v.src.d);
        info->n_steps = v.n_steps, info->n_layers = v.n_layers, info->n_heads = mt->n_head;
        info->n_batches = v.n_batches, info->n_tokens = v.n_tok;
        info->n_full = n_full, info->bytes = html.len, info->n_skipped = v.n_skipped;
    }
    tsc_strbuf_free(&html);
    view_free(&v);
    return st;
}
