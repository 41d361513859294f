/* log.c: training-log reader (tsc_log.h): CSV/TSV tables with a header (TensorBoard and W&B exports
 * among them), nanoGPT and llm.c console output. */
#include "tsc_log.h"
#include "tsc_jv.h" /* tsc_read_file */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void tsc_log_free(tsc_log_t *lg) {
    if (!lg) return;
    for (int c = 0; c < lg->n_cols; c++) free(lg->cols[c]);
    free(lg->step);
    free(lg->values);
    free(lg);
}

int tsc_log_column(const tsc_log_t *lg, const char *name) {
    for (int c = 0; lg && c < lg->n_cols; c++)
        if (strcmp(lg->cols[c], name) == 0) return c;
    return -1;
}

size_t tsc_log_series(const tsc_log_t *lg, int c, double *x, double *y) {
    size_t k = 0;
    if (!lg || c < 0 || c >= lg->n_cols) return 0;
    for (size_t r = 0; r < lg->n_rows; r++) {
        double v = lg->values[r * (size_t)lg->n_cols + (size_t)c];
        if (isfinite(v) && isfinite(lg->step[r])) {
            x[k] = lg->step[r];
            y[k] = v;
            k++;
        }
    }
    return k;
}

/* Appends one row (step, values[n_cols]); grows the arrays geometrically. */
static tsc_status_t add_row(tsc_log_t *lg, size_t *cap, double step, const double *vals) {
    if (lg->n_rows == *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        double *s = realloc(lg->step, nc * sizeof *s);
        if (!s) return tsc_error_set(TSC_ERR_NOMEM, "log %s: out of memory at row %zu", lg->path, lg->n_rows);
        lg->step = s;
        double *v = realloc(lg->values, nc * (size_t)(lg->n_cols ? lg->n_cols : 1) * sizeof *v);
        if (!v) return tsc_error_set(TSC_ERR_NOMEM, "log %s: out of memory at row %zu", lg->path, lg->n_rows);
        lg->values = v;
        *cap = nc;
    }
    lg->step[lg->n_rows] = step;
    memcpy(lg->values + lg->n_rows * (size_t)lg->n_cols, vals, (size_t)lg->n_cols * sizeof *vals);
    lg->n_rows++;
    return TSC_OK;
}

static int add_col(tsc_log_t *lg, const char *name, size_t len) {
    if (lg->n_cols >= TSC_LOG_MAX_COLS) return -1;
    char *s = malloc(len + 1);
    if (!s) return -1;
    memcpy(s, name, len);
    s[len] = 0;
    lg->cols[lg->n_cols++] = s;
    return 0;
}

/* Trims spaces (and a trailing \r) of [*b, *e). */
static void trim(const char **b, const char **e) {
    while (*b < *e && isspace((unsigned char)**b)) (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

/* The field that starts at f on a line ending at e: [*x, *y) trimmed and without its quotes (a
 * "quoted" field may hold the delimiter). Returns the field's end (the next delim, or e). */
static const char *next_field(const char *f, const char *e, char delim, const char **x, const char **y) {
    const char *b = f;
    while (b < e && (*b == ' ' || *b == '\t') && *b != delim) b++;
    const char *fe;
    if (b < e && *b == '"') {
        const char *q = b + 1;
        while (q < e && !(*q == '"' && (q + 1 == e || q[1] != '"'))) q += *q == '"' ? 2 : 1;
        fe = q < e ? memchr(q, delim, (size_t)(e - q)) : NULL;
        *x = b + 1, *y = q < e ? q : e;
    } else {
        fe = memchr(f, delim, (size_t)(e - f));
        *x = f, *y = fe ? fe : e;
        trim(x, y);
    }
    return fe ? fe : e;
}

/* A table field: a number, or empty / nan / NA / null (not logged). 0 on success. */
static int field_number(const char *b, const char *e, double *out) {
    trim(&b, &e);
    if (b >= e) { *out = NAN; return 0; }
    size_t n = (size_t)(e - b);
    if ((n == 2 && strncasecmp(b, "na", 2) == 0) || (n == 3 && strncasecmp(b, "nan", 3) == 0) ||
        (n == 4 && strncasecmp(b, "null", 4) == 0)) {
        *out = NAN;
        return 0;
    }
    char buf[64];
    if (n >= sizeof buf) return -1;
    memcpy(buf, b, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || *end || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

static int is_skip(const char *b, const char *e) {
    trim(&b, &e);
    return b >= e || *b == '#';
}

/* ---------------------------------------------------------------- console output */

/* The columns of each console dialect (kind - TSC_LOG_NANOGPT). */
enum { NANO_TRAIN, NANO_VAL, NANO_ITER, NANO_TIME, NANO_MFU, NANO_N };
enum { LLMC_TRAIN, LLMC_VAL, LLMC_NORM, LLMC_LR, LLMC_TIME, LLMC_MFU, LLMC_TOKS, LLMC_HELLA, LLMC_N };
static const char *const nano_cols[NANO_N] = {"train_loss", "val_loss", "iter_loss", "time_ms", "mfu"};
static const char *const llmc_cols[LLMC_N] = {"train_loss", "val_loss", "grad_norm", "lr",
                                              "time_ms",    "mfu",      "tok_s",     "hellaswag"};

typedef struct {
    tsc_log_kind_t kind;  /* NANOGPT or LLMC: the dialect of the line */
    double step;
    double v[LLMC_N];
    const char *msg;      /* why a line that starts like a log line does not parse */
} console_t;

/* A number after the prefix word at p ("loss 1.5" with word "loss "); NAN when p lacks it. */
static double after_word(const char *p, const char *word) {
    size_t n = strlen(word);
    if (strncmp(p, word, n) != 0) return NAN;
    char *end;
    double v = strtod(p + n, &end);
    return end == p + n ? NAN : v;
}

/* llm.c's console line after "step": " K[/N] | loss X (z)| norm Y (z)| lr Z | T ms | M% bf16 MFU | R tok/s". */
static int llmc_step_line(char *p, console_t *c) {
    char *end;
    long long k = strtoll(p, &end, 10);
    if (*end == '/') { strtoll(end + 1, &end, 10); }
    c->kind = TSC_LOG_LLMC;
    c->step = (double)(k - 1);
    for (char *f = strchr(end, '|'), *nx; f; f = nx) {
        const char *x = f + 1;
        if ((nx = strchr(x, '|'))) *nx = 0; /* one field at a time */
        while (*x == ' ') x++;
        double v;
        if (!isnan(v = after_word(x, "loss "))) c->v[LLMC_TRAIN] = v;
        else if (!isnan(v = after_word(x, "norm "))) c->v[LLMC_NORM] = v;
        else if (!isnan(v = after_word(x, "lr "))) c->v[LLMC_LR] = v;
        else if (strstr(x, "MFU") && (v = strtod(x, NULL), 1)) c->v[LLMC_MFU] = v;
        else if (strstr(x, "tok/s") && (v = strtod(x, NULL), 1)) c->v[LLMC_TOKS] = v;
        else if (strstr(x, " ms") && (v = strtod(x, NULL), 1)) c->v[LLMC_TIME] = v;
    }
    if (isnan(c->v[LLMC_TRAIN])) { c->msg = "expected llm.c's 'step K/N | loss X | norm Y | ...'"; return -1; }
    return 1;
}

/* "step N..." of nanoGPT ("step N: train loss X, val loss Y"), train_gpt2.c ("step N: train loss X
 * (took Y ms)") or llm.c's console (llmc_step_line). */
static int step_line(char *p, console_t *c) {
    char *end;
    long long s = strtoll(p, &end, 10);
    if (*end == '/' || *end == '|' || (*end == ' ' && strchr(end, '|'))) return llmc_step_line(p, c);
    if (*end != ':') { c->msg = "expected ':' (nanoGPT) or '/' or '|' (llm.c) after the step number"; return -1; }
    c->step = (double)s;
    double tl, x;
    int used = 0;
    if (sscanf(end + 1, " train loss %lf%n", &tl, &used) == 1 && end[1 + used] == ',' &&
        sscanf(end + 1 + used, ", val loss %lf", &x) == 1) {
        c->kind = TSC_LOG_NANOGPT, c->v[NANO_TRAIN] = tl, c->v[NANO_VAL] = x;
        return 1;
    }
    if (used && sscanf(end + 1 + used, " (took %lf", &x) == 1) {
        c->kind = TSC_LOG_LLMC, c->v[LLMC_TRAIN] = tl, c->v[LLMC_TIME] = x;
        return 1;
    }
    c->msg = "expected 'step N: train loss X, val loss Y' (nanoGPT) or 'step N: train loss X (took Y ms)' (llm.c)";
    return -1;
}

/* llm.c's main.log: "s:N trl:X lr:Y norm:Z", "s:N tel:X", "s:N eval:X". */
static int main_log_line(char *p, console_t *c) {
    char *end;
    long long s = strtoll(p, &end, 10);
    c->kind = TSC_LOG_LLMC, c->step = (double)s;
    double v;
    if (!isnan(v = after_word(end, " trl:"))) {
        c->v[LLMC_TRAIN] = v;
        const char *lr = strstr(end, " lr:"), *nm = strstr(end, " norm:");
        if (lr) c->v[LLMC_LR] = strtod(lr + 4, NULL);
        if (nm) c->v[LLMC_NORM] = strtod(nm + 6, NULL);
    } else if (!isnan(v = after_word(end, " tel:"))) c->v[LLMC_VAL] = v;
    else if (!isnan(v = after_word(end, " eval:"))) c->v[LLMC_HELLA] = v;
    else { c->msg = "expected llm.c's main.log 's:N trl:X ...', 's:N tel:X' or 's:N eval:X'"; return -1; }
    return 1;
}

/* One console line. *next_val is the step an llm.c "val loss" line belongs to (the step after the
 * last "step K/N" line). Returns 1 parsed (c filled), 0 not a log line, -1 malformed (c->msg). */
static int console_line(const char *b, const char *e, double *next_val, console_t *c) {
    trim(&b, &e);
    char line[512];
    size_t n = (size_t)(e - b);
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, b, n);
    line[n] = 0;
    for (int k = 0; k < LLMC_N; k++) c->v[k] = NAN;
    c->msg = NULL;
    c->kind = TSC_LOG_NANOGPT;
    int r = 0;
    const char *q = line + (n < 5 ? n : 5);
    while (*q == ' ') q++;
    if (strncmp(line, "step ", 5) == 0 && isdigit((unsigned char)*q)) r = step_line((char *)q, c);
    else if (strncmp(line, "iter ", 5) == 0 && isdigit((unsigned char)line[5])) {
        char *end;
        c->kind = TSC_LOG_NANOGPT, c->step = (double)strtoll(line + 5, &end, 10);
        int used = 0;
        if (*end != ':') c->msg = "expected ':' after the step number", r = -1;
        else if (sscanf(end + 1, " loss %lf%n", &c->v[NANO_ITER], &used) != 1)
            c->msg = "expected 'iter N: loss X[, time Yms, mfu Z%]'", r = -1;
        else {
            const char *t = strstr(end + 1 + used, "time "), *m = strstr(end + 1 + used, "mfu ");
            if (t) c->v[NANO_TIME] = strtod(t + 5, NULL);
            if (m) c->v[NANO_MFU] = strtod(m + 4, NULL);
            r = 1;
        }
    } else if (strncmp(line, "val loss", 8) == 0) {
        c->kind = TSC_LOG_LLMC, c->step = *next_val;
        r = sscanf(line + 8, "%lf", &c->v[LLMC_VAL]) == 1 ? 1 : -1;
        if (r < 0) c->msg = "expected llm.c's 'val loss X'";
    } else if (strncmp(line, "HellaSwag: ", 11) == 0 && isdigit((unsigned char)line[11])) {
        const char *eq = strchr(line, '=');
        c->kind = TSC_LOG_LLMC, c->step = *next_val;
        r = eq && sscanf(eq + 1, "%lf", &c->v[LLMC_HELLA]) == 1 ? 1 : -1;
        if (r < 0) c->msg = "expected llm.c's 'HellaSwag: a/b = X'";
    } else if (strncmp(line, "s:", 2) == 0 && isdigit((unsigned char)line[2])) r = main_log_line(line + 2, c);
    if (r == 1 && c->kind == TSC_LOG_LLMC && strncmp(line, "step ", 5) == 0) *next_val = c->step + 1;
    for (int k = 0; r == 1 && k < LLMC_N; k++)
        if (isinf(c->v[k])) { c->msg = "infinite value"; r = -1; }
    return r;
}

/* ---------------------------------------------------------------- parsing */

typedef struct {
    tsc_log_t *lg;
    const char *where;
    size_t cap;
    long lineno;
    char delim;
    int step_col, n_fields;
} parse_t;

/* Iterates the lines of [*p, endt): [*lb, *le) is the next one; 0 at the end. */
static int next_line(const char **p, const char *endt, const char **lb, const char **le) {
    if (*p >= endt) return 0;
    const char *nl = memchr(*p, '\n', (size_t)(endt - *p));
    *lb = *p, *le = nl ? nl : endt;
    *p = nl ? nl + 1 : endt;
    return 1;
}

/* The whole text as console output of kind (NANOGPT or LLMC). */
static tsc_status_t parse_console(parse_t *ps, const char *text, const char *endt, tsc_log_kind_t kind) {
    tsc_log_t *lg = ps->lg;
    const char *const *names = kind == TSC_LOG_NANOGPT ? nano_cols : llmc_cols;
    int nc = kind == TSC_LOG_NANOGPT ? NANO_N : LLMC_N;
    lg->kind = kind;
    for (int k = 0; k < nc; k++)
        if (add_col(lg, names[k], strlen(names[k]))) return tsc_error_set(TSC_ERR_NOMEM, "log %s: out of memory", ps->where);
    const char *p = text, *lb, *le;
    double next_val = 0;
    tsc_status_t st;
    for (ps->lineno = 1; next_line(&p, endt, &lb, &le); ps->lineno++) {
        console_t c;
        int r = console_line(lb, le, &next_val, &c);
        if (r < 0)
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: malformed %s log line: %s", ps->where, ps->lineno,
                                 c.kind == TSC_LOG_LLMC ? "llm.c" : "nanoGPT", c.msg);
        if (r == 0) continue;
        if (c.kind != kind)
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: a %s line in a %s log (one run's output per file)", ps->where,
                                 ps->lineno, c.kind == TSC_LOG_LLMC ? "llm.c" : "nanoGPT",
                                 kind == TSC_LOG_LLMC ? "llm.c" : "nanoGPT");
        if ((st = add_row(lg, &ps->cap, c.step, c.v)) != TSC_OK) return st;
    }
    return TSC_OK;
}

/* A table header: the line has the delimiter and every field is a name (not empty, not a number).
 * Anything else (a banner such as "tokens per iteration will be: 491,520") is not. */
static int looks_like_header(const char *b, const char *e) {
    char delim = memchr(b, '\t', (size_t)(e - b)) ? '\t' : ',';
    if (!memchr(b, delim, (size_t)(e - b))) return 0;
    for (const char *f = b;;) {
        const char *x, *y, *fe = next_field(f, e, delim, &x, &y);
        double v;
        if (x >= y || field_number(x, y, &v) == 0) return 0;
        if (fe == e) return 1;
        f = fe + 1;
    }
}

static int name_is(const char *b, const char *e, const char *name) {
    return (size_t)(e - b) == strlen(name) && strncasecmp(b, name, (size_t)(e - b)) == 0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A column that is no loss of its own: wall time, W&B's bookkeeping and its min/max bands. */
static int is_aux_col(const char *s) {
    static const char *const aux[] = {"Wall time", "wall_time", "_runtime", "_timestamp", "timestamp", "time"};
    for (size_t i = 0; i < sizeof aux / sizeof aux[0]; i++)
        if (strcasecmp(s, aux[i]) == 0) return 1;
    return ends_with(s, "__MIN") || ends_with(s, "__MAX");
}

/* The header row: the columns, the step column, the kind and the default pick. */
static tsc_status_t table_header(parse_t *ps, const char *lb, const char *le) {
    tsc_log_t *lg = ps->lg;
    ps->delim = memchr(lb, '\t', (size_t)(le - lb)) ? '\t' : ',';
    lg->kind = ps->delim == '\t' ? TSC_LOG_TSV : TSC_LOG_CSV;
    for (const char *f = lb;;) {
        const char *b, *e, *fe = next_field(f, le, ps->delim, &b, &e);
        if (b == e)
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: header: column %d has no name", ps->where, ps->lineno,
                                 ps->n_fields + 1);
        if (ps->step_col < 0 && (name_is(b, e, "step") || name_is(b, e, "iter") || name_is(b, e, "_step"))) {
            ps->step_col = ps->n_fields;
            if (strncmp(b, "_step", 5) == 0) lg->kind = TSC_LOG_WANDB;
        } else if (add_col(lg, b, (size_t)(e - b))) {
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: header: more than %d columns", ps->where, ps->lineno,
                                 TSC_LOG_MAX_COLS);
        }
        ps->n_fields++;
        if (fe == le) break;
        f = fe + 1;
    }
    if (ps->step_col < 0)
        return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: header row has no 'step' column (expected e.g. "
                                             "step,train_loss,val_loss,lr,grad_norm)", ps->where, ps->lineno);
    int cand = 0;
    for (int c = 0; c < lg->n_cols; c++) {
        if (ends_with(lg->cols[c], "__MIN") || ends_with(lg->cols[c], "__MAX")) lg->kind = TSC_LOG_WANDB;
        if (!is_aux_col(lg->cols[c]) && cand++ == 0) lg->pick = c;
    }
    if (lg->n_cols == 2 && tsc_log_column(lg, "Wall time") == 0 && tsc_log_column(lg, "Value") == 1)
        lg->kind = TSC_LOG_TENSORBOARD;
    if (cand != 1) lg->pick = -1;
    return TSC_OK;
}

/* One data row of a table. */
static tsc_status_t table_row(parse_t *ps, const char *lb, const char *le) {
    tsc_log_t *lg = ps->lg;
    double vals[TSC_LOG_MAX_COLS + 1], step = NAN;
    int k = 0, vk = 0;
    for (const char *f = lb;;) {
        const char *b, *e, *fe = next_field(f, le, ps->delim, &b, &e);
        if (k < ps->n_fields) {
            double v;
            if (field_number(b, e, &v))
                return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: column %d (%s): expected a number, found '%.*s'",
                                     ps->where, ps->lineno, k + 1, k == ps->step_col ? "step" : lg->cols[vk],
                                     (int)((e - b) > 40 ? 40 : (e - b)), b);
            if (k == ps->step_col) step = v;
            else vals[vk++] = v;
        }
        k++;
        if (fe == le) break;
        f = fe + 1;
    }
    if (k != ps->n_fields)
        return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: expected %d fields (as in the header), found %d", ps->where,
                             ps->lineno, ps->n_fields, k);
    if (!isfinite(step))
        return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: the step field is empty or not finite", ps->where, ps->lineno);
    return add_row(lg, &ps->cap, step, vals);
}

static tsc_status_t parse_table(parse_t *ps, const char *text, const char *endt) {
    const char *p = text, *lb, *le;
    int have_header = 0;
    tsc_status_t st;
    for (ps->lineno = 1; next_line(&p, endt, &lb, &le); ps->lineno++) {
        if (is_skip(lb, le)) continue;
        if (!have_header) st = table_header(ps, lb, le), have_header = 1;
        else st = table_row(ps, lb, le);
        if (st != TSC_OK) return st;
    }
    return TSC_OK;
}

/* What the text is: a console dialect when any line is a console line (or the first meaningful
 * line is no table header), else a table. Also rejects NUL bytes. */
static tsc_status_t sniff(const char *where, const char *text, const char *endt, tsc_log_kind_t *kind) {
    const char *p = text, *lb, *le;
    int first = 1, header = 0;
    double nv = 0;
    *kind = TSC_LOG_NANOGPT;
    for (long lineno = 1; next_line(&p, endt, &lb, &le); lineno++) {
        if (memchr(lb, '\0', (size_t)(le - lb)))
            return tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: a NUL byte: not a text log", where, lineno);
        if (is_skip(lb, le)) continue;
        console_t c;
        if (console_line(lb, le, &nv, &c) != 0) {
            *kind = c.kind;
            return TSC_OK;
        }
        if (first) header = looks_like_header(lb, le), first = 0;
    }
    if (header) *kind = TSC_LOG_CSV;
    return TSC_OK;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

tsc_status_t tsc_log_parse(const char *text, size_t len, const char *where, const char *name, tsc_log_t **out) {
    if (!out || (!text && len)) return tsc_error_set(TSC_ERR_ARG, "tsc_log_parse: NULL argument");
    *out = NULL;
    if (!where) where = "<memory>";
    tsc_log_t *lg = calloc(1, sizeof *lg);
    if (!lg) return tsc_error_set(TSC_ERR_NOMEM, "log %s: out of memory", where);
    lg->pick = -1;
    snprintf(lg->path, sizeof lg->path, "%s", where);
    snprintf(lg->name, sizeof lg->name, "%s", name && *name ? name : base_name(where));
    parse_t ps = {lg, where, 0, 0, ',', -1, 0};
    tsc_log_kind_t kind;
    const char *endt = text + len;
    tsc_status_t st = sniff(where, text, endt, &kind);
    if (st == TSC_OK) st = kind == TSC_LOG_CSV ? parse_table(&ps, text, endt) : parse_console(&ps, text, endt, kind);
    if (st == TSC_OK && lg->n_rows == 0)
        st = tsc_error_set(TSC_ERR_FORMAT,
                           kind != TSC_LOG_CSV
                               ? "%s: no log line found (expected nanoGPT's 'step N: train loss X, val loss Y' or "
                                 "'iter N: loss X', or llm.c's 'step K/N | loss X | ...'; docs/LOGS.md)"
                               : "%s: no data rows (expected a header row with 'step' and at least one row)",
                           where);
    if (st != TSC_OK) {
        tsc_log_free(lg);
        return st;
    }
    *out = lg;
    return TSC_OK;
}

tsc_status_t tsc_log_read(const char *path, const char *name, tsc_log_t **out) {
    if (!path || !out) return tsc_error_set(TSC_ERR_ARG, "tsc_log_read: NULL argument");
    *out = NULL;
    char *buf;
    size_t len;
    tsc_status_t st = tsc_read_file(path, &buf, &len);
    if (st) return tsc_error_wrap(st, "log ");
    st = tsc_log_parse(buf, len, path, name, out);
    free(buf);
    return st;
}

void tsc_log_describe_columns(const tsc_log_t *lg, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "the columns are:");
    for (int c = 0; lg && c < lg->n_cols && k < cap; c++)
        k += (size_t)snprintf(buf + k, cap - k, "%s '%s'", c ? "," : "", lg->cols[c]);
}

/* FILE[:COLUMN] of a --log spec: the first ':' whose left part is an existing file splits them. */
static void split_column(const char *fc, char *file, size_t cap, const char **column) {
    *column = NULL;
    snprintf(file, cap, "%s", fc);
    struct stat sb;
    if (stat(fc, &sb) == 0) return;
    for (const char *c = strchr(fc, ':'); c; c = strchr(c + 1, ':')) {
        size_t n = (size_t)(c - fc);
        if (n >= cap) break;
        memcpy(file, fc, n);
        file[n] = 0;
        if (stat(file, &sb) == 0 && S_ISREG(sb.st_mode)) {
            *column = c + 1;
            return;
        }
    }
    snprintf(file, cap, "%s", fc);
}

tsc_status_t tsc_log_read_spec(const char *spec, tsc_log_t **out) {
    if (!spec || !out) return tsc_error_set(TSC_ERR_ARG, "--log: NULL argument");
    *out = NULL;
    const char *eq = strchr(spec, '='), *fc = eq ? eq + 1 : spec;
    char name[64] = "";
    if (eq) {
        size_t n = (size_t)(eq - spec);
        if (n == 0 || n >= sizeof name || !eq[1])
            return tsc_error_set(TSC_ERR_ARG, "--log '%s': expected NAME=FILE[:COLUMN] (a name of 1..63 bytes and a file)",
                                 spec);
        memcpy(name, spec, n);
        name[n] = 0;
    } else if (!*spec) {
        return tsc_error_set(TSC_ERR_ARG, "--log: expected [NAME=]FILE[:COLUMN], got an empty string");
    }
    char file[1024];
    const char *column;
    split_column(fc, file, sizeof file, &column);
    tsc_status_t st = tsc_log_read(file, eq ? name : NULL, out);
    if (st != TSC_OK || !column) return st;
    int c = tsc_log_column(*out, column);
    if (c < 0) {
        char cols[1024];
        tsc_log_describe_columns(*out, cols, sizeof cols);
        st = tsc_error_set(TSC_ERR_ARG, "--log %s: %s has no column '%s'; %s", spec, file, column, cols);
        tsc_log_free(*out);
        *out = NULL;
        return st;
    }
    (*out)->pick = c;
    return TSC_OK;
}

int tsc_log_loss_column(const tsc_log_t *lg, int val) {
    static const char *const train[] = {"iter_loss", "train_loss", "train/loss", "loss"};
    static const char *const valid[] = {"val_loss", "val/loss", "val", "valid_loss", "eval_loss"};
    if (!lg) return -1;
    if (lg->pick >= 0 && lg->pick < lg->n_cols) return lg->pick;
    const char *const *names = val ? valid : train;
    size_t n = val ? sizeof valid / sizeof valid[0] : sizeof train / sizeof train[0];
    for (size_t i = 0; i < n; i++) {
        int c = tsc_log_column(lg, names[i]);
        if (c >= 0) return c;
        /* W&B's "<run> - train/loss" */
        char suffix[32];
        snprintf(suffix, sizeof suffix, " - %s", names[i]);
        for (c = 0; c < lg->n_cols; c++)
            if (ends_with(lg->cols[c], suffix)) return c;
    }
    return -1;
}

void tsc_log_cover(const tsc_log_t *lg, int c, const long long *steps, size_t n, tsc_log_cover_t *out) {
    out->first = out->last = NAN;
    out->n_steps = n, out->n_outside = 0, out->first_outside = -1;
    for (size_t r = 0; lg && r < lg->n_rows; r++) {
        int any = 0;
        for (int k = 0; k < lg->n_cols; k++)
            if ((c < 0 || k == c) && isfinite(lg->values[r * (size_t)lg->n_cols + (size_t)k])) any = 1;
        if (!any) continue;
        double s = lg->step[r];
        if (isnan(out->first) || s < out->first) out->first = s;
        if (isnan(out->last) || s > out->last) out->last = s;
    }
    for (size_t i = 0; i < n; i++) {
        double s = (double)steps[i];
        if (isnan(out->first) || s < out->first || s > out->last) {
            if (out->n_outside++ == 0) out->first_outside = steps[i];
        }
    }
}

double tsc_log_half_life(const double *x, size_t n) {
    double span = n ? x[n - 1] - x[0] : 0;
    double want = fmax(1, fmax(span / 100, n > 1 ? span / (double)(n - 1) : 1));
    double p = pow(10, floor(log10(want)));
    return want <= p ? p : want <= 2 * p ? 2 * p : want <= 5 * p ? 5 * p : 10 * p;
}

void tsc_log_smooth(const double *x, const double *y, size_t n, double half_life, double *out) {
    double m = 0, w = 0, mean_dx = n > 1 ? (x[n - 1] - x[0]) / (double)(n - 1) : 1;
    if (!(mean_dx > 0)) mean_dx = 1;
    for (size_t i = 0; i < n; i++) {
        double dx = i ? x[i] - x[i - 1] : 0;
        double decay = pow(0.5, fmax(dx, 0) / half_life), gain = 1 - pow(0.5, (dx > 0 ? dx : mean_dx) / half_life);
        m = decay * m + gain * y[i];
        w = decay * w + gain;
        out[i] = m / w;
    }
}
