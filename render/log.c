/* log.c: training-log reader (tsc_log.h): CSV/TSV tables with a header, nanoGPT console lines. */
#include "tsc_log.h"
#include "tsc_figure.h" /* tsc_read_file */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A table field: a number, or empty / nan / NA / null (not logged). 0 on success. */
static int field_number(const char *b, const char *e, double *out) {
    trim(&b, &e);
    if (b >= e) { *out = NAN; return 0; }
    size_t n = (size_t)(e - b);
    if (n < 8 && (strncasecmp(b, "nan", n) == 0 || strncasecmp(b, "na", n) == 0 || strncasecmp(b, "null", n) == 0) &&
        (n == 3 || n == 2 || n == 4)) {
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

/* nanoGPT: "step N: train loss A, val loss B" or "iter N: loss A, time Bms, mfu C%".
 * Returns 1 parsed, 0 not such a line, -1 such a line but malformed (msg says why). */
static int nano_line(const char *b, const char *e, double *step, double vals[5], const char **msg) {
    trim(&b, &e);
    char line[512];
    size_t n = (size_t)(e - b);
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, b, n);
    line[n] = 0;
    int is_step = strncmp(line, "step ", 5) == 0, is_iter = strncmp(line, "iter ", 5) == 0;
    if (!is_step && !is_iter) return 0;
    char *p = line + 5, *end;
    if (!isdigit((unsigned char)*p)) return 0; /* "step through ..." is prose, not a log line */
    for (int k = 0; k < 5; k++) vals[k] = NAN;
    long long s = strtoll(p, &end, 10);
    if (*end != ':') { *msg = "expected ':' after the step number"; return -1; }
    *step = (double)s;
    p = end + 1;
    if (is_step) {
        double tl, vl;
        if (sscanf(p, " train loss %lf, val loss %lf", &tl, &vl) != 2) {
            *msg = "expected 'step N: train loss X, val loss Y'";
            return -1;
        }
        vals[0] = tl, vals[1] = vl;
    } else {
        double l;
        int used = 0;
        if (sscanf(p, " loss %lf%n", &l, &used) != 1) { *msg = "expected 'iter N: loss X[, time Yms, mfu Z%]'"; return -1; }
        vals[2] = l;
        const char *t = strstr(p + used, "time ");
        if (t) vals[3] = strtod(t + 5, NULL);
        const char *m = strstr(p + used, "mfu ");
        if (m) vals[4] = strtod(m + 4, NULL);
    }
    for (int k = 0; k < 5; k++)
        if (isinf(vals[k])) { *msg = "infinite value"; return -1; }
    return 1;
}

/* The delimiter of a table line: a tab when it has one, else a comma. */
static char line_delim(const char *b, const char *e) { return memchr(b, '\t', (size_t)(e - b)) ? '\t' : ','; }

/* The header field that starts at f on a line ending at e: [*x, *y) trimmed and without
 * matching quotes. Returns the field's end (the next delim, or e). */
static const char *header_field(const char *f, const char *e, char delim, const char **x, const char **y) {
    const char *fe = memchr(f, delim, (size_t)(e - f));
    if (!fe) fe = e;
    *x = f, *y = fe;
    trim(x, y);
    if (*x < *y && (**x == '"' || **x == '\'') && *y - *x >= 2 && (*y)[-1] == **x) ++*x, --*y;
    return fe;
}

/* A table header: the line has a comma or a tab and every field is a name (letters, digits,
 * _ - . / and optional quotes, not starting with a digit or sign). Anything else (a nanoGPT banner such as
 * "tokens per iteration will be: 491,520") is console output. */
static int looks_like_header(const char *b, const char *e) {
    char delim = line_delim(b, e);
    if (!memchr(b, delim, (size_t)(e - b))) return 0;
    const char *f = b;
    for (;;) {
        const char *x, *y, *fe = header_field(f, e, delim, &x, &y);
        if (x < y && (isdigit((unsigned char)*x) || *x == '-' || *x == '+' || *x == '.')) return 0;
        for (const char *c = x; c < y; c++)
            if (!isalnum((unsigned char)*c) && !strchr("_-./ ()[]", *c)) return 0;
        if (fe == e) break;
        f = fe + 1;
    }
    return 1;
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
    snprintf(lg->path, sizeof lg->path, "%s", where);
    snprintf(lg->name, sizeof lg->name, "%s", name && *name ? name : base_name(where));
    size_t cap = 0;
    tsc_status_t st = TSC_OK;
    const char *p = text, *endt = text + len;
    long lineno = 0;
    int mode = -1;       /* -1 undecided, 0 table, 1 nanoGPT */
    char delim = ',';
    int step_col = -1, n_fields = 0;
    double vals[TSC_LOG_MAX_COLS + 1];
    while (p < endt) {
        const char *nl = memchr(p, '\n', (size_t)(endt - p));
        const char *le = nl ? nl : endt;
        const char *lb = p;
        p = nl ? nl + 1 : endt;
        lineno++;
        if (memchr(lb, '\0', (size_t)(le - lb))) {
            st = tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: a NUL byte: not a text log", where, lineno);
            goto fail;
        }
        if (is_skip(lb, le)) continue;
        if (mode < 0) {
            double s, v5[5];
            const char *msg = NULL;
            int r = nano_line(lb, le, &s, v5, &msg);
            if (r != 0 || !looks_like_header(lb, le)) {
                mode = 1;
                lg->kind = TSC_LOG_NANOGPT;
                static const char *nc[5] = {"train_loss", "val_loss", "iter_loss", "time_ms", "mfu"};
                for (int k = 0; k < 5; k++)
                    if (add_col(lg, nc[k], strlen(nc[k]))) {
                        st = tsc_error_set(TSC_ERR_NOMEM, "log %s: out of memory", where);
                        goto fail;
                    }
            } else {
                /* the header row of a table */
                mode = 0;
                delim = line_delim(lb, le);
                lg->kind = delim == '\t' ? TSC_LOG_TSV : TSC_LOG_CSV;
                const char *f = lb;
                for (;;) {
                    const char *b, *e, *fe = header_field(f, le, delim, &b, &e);
                    if (b == e) {
                        st = tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: header: column %d has no name", where, lineno,
                                           n_fields + 1);
                        goto fail;
                    }
                    if ((size_t)(e - b) == 4 && strncasecmp(b, "step", 4) == 0 && step_col < 0) step_col = n_fields;
                    else if ((size_t)(e - b) == 4 && strncasecmp(b, "iter", 4) == 0 && step_col < 0) step_col = n_fields;
                    else if (add_col(lg, b, (size_t)(e - b))) {
                        st = tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: header: more than %d columns", where, lineno,
                                           TSC_LOG_MAX_COLS);
                        goto fail;
                    }
                    n_fields++;
                    if (fe == le) break;
                    f = fe + 1;
                }
                if (step_col < 0) {
                    st = tsc_error_set(TSC_ERR_FORMAT,
                                       "%s:%ld: header row has no 'step' column (expected e.g. "
                                       "step,train_loss,val_loss,lr,grad_norm)", where, lineno);
                    goto fail;
                }
                continue;
            }
        }
        if (mode == 1) {
            double s;
            const char *msg = NULL;
            int r = nano_line(lb, le, &s, vals, &msg);
            if (r < 0) {
                st = tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: malformed nanoGPT log line: %s", where, lineno, msg);
                goto fail;
            }
            if (r == 0) continue;
            if ((st = add_row(lg, &cap, s, vals)) != TSC_OK) goto fail;
        } else {
            const char *f = lb;
            int k = 0, vk = 0;
            double step = NAN;
            for (;;) {
                const char *fe = memchr(f, delim, (size_t)(le - f));
                if (!fe) fe = le;
                if (k < n_fields) {
                    double v;
                    if (field_number(f, fe, &v)) {
                        const char *b = f, *e = fe;
                        trim(&b, &e);
                        st = tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: column %d (%s): expected a number, found '%.*s'",
                                           where, lineno, k + 1, k == step_col ? "step" : lg->cols[vk],
                                           (int)((e - b) > 40 ? 40 : (e - b)), b);
                        goto fail;
                    }
                    if (k == step_col) step = v;
                    else vals[vk++] = v;
                }
                k++;
                if (fe == le) break;
                f = fe + 1;
            }
            if (k != n_fields) {
                st = tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: expected %d fields (as in the header), found %d", where,
                                   lineno, n_fields, k);
                goto fail;
            }
            if (!isfinite(step)) {
                st = tsc_error_set(TSC_ERR_FORMAT, "%s:%ld: the step field is empty or not finite", where, lineno);
                goto fail;
            }
            if ((st = add_row(lg, &cap, step, vals)) != TSC_OK) goto fail;
        }
    }
    if (lg->n_rows == 0) {
        st = tsc_error_set(TSC_ERR_FORMAT,
                           mode == 1 ? "%s: no 'step N: train loss X, val loss Y' or 'iter N: loss X' line found"
                                     : "%s: no data rows (expected a header row with 'step' and at least one row)",
                           where);
        goto fail;
    }
    *out = lg;
    return TSC_OK;
fail:
    tsc_log_free(lg);
    return st;
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

tsc_status_t tsc_log_read_spec(const char *spec, tsc_log_t **out) {
    if (!spec || !out) return tsc_error_set(TSC_ERR_ARG, "--log: NULL argument");
    *out = NULL;
    const char *eq = strchr(spec, '=');
    if (!eq) {
        if (!*spec) return tsc_error_set(TSC_ERR_ARG, "--log: expected NAME=FILE or FILE, got an empty string");
        return tsc_log_read(spec, NULL, out);
    }
    char name[64];
    size_t n = (size_t)(eq - spec);
    if (n == 0 || n >= sizeof name || !eq[1])
        return tsc_error_set(TSC_ERR_ARG, "--log '%s': expected NAME=FILE (a name of 1..63 bytes and a file)", spec);
    memcpy(name, spec, n);
    name[n] = 0;
    return tsc_log_read(eq + 1, name, out);
}
