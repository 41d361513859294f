/* flags.c: table-driven flag parsing shared by the commands (cli.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tsc_select.h"

int tsc_cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return tsc_cli_usage_error(cmd, "%s expects an integer in [%ld, %ld], got '%s'", flag, lo, hi, s);
    *out = v;
    return 0;
}

int tsc_cli_parse_double(const char *cmd, const char *flag, const char *s, double lo, double hi,
                         double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return tsc_cli_usage_error(cmd, "%s expects a number in [%g, %g], got '%s'", flag, lo, hi, s);
    *out = v;
    return 0;
}

/* For a flag that takes a value: argv[++*i], or NULL after the usage error "FLAG needs a value"
 * (with the value as the usage text names it, tsc_cli_value_name). */
static const char *flag_arg(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        char what[256];
        if (tsc_cli_value_name(cmd, argv[*i], what, sizeof what))
            tsc_cli_usage_error(cmd, "%s needs a value: %s", argv[*i], what);
        else
            tsc_cli_usage_error(cmd, "%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* A bound of the table as a long: one beyond long's range (LONG_MAX is not a double) is long's own end. */
static long bound(double x) { return x >= (double)LONG_MAX ? LONG_MAX : x <= (double)LONG_MIN ? LONG_MIN : (long)x; }

static int flag_value(const char *cmd, const char *a, const char *v, const tsc_cli_flag_t *f) {
    if (f->kind == TSC_CLI_STR) {
        *(const char **)f->dst = v;
        return 0;
    }
    if (f->kind == TSC_CLI_LIST) {
        tsc_cli_list_t *l = f->dst;
        if (l->n >= l->cap) return tsc_cli_usage_error(cmd, "at most %d %s", l->cap, f->name);
        l->v[l->n++] = v;
        return 0;
    }
    if (f->kind == TSC_CLI_SET)
        return tsc_select_set_parse(f->dst, v) == TSC_OK ? 0 : tsc_cli_usage_error(cmd, "%s: %s", a, tsc_error_last());
    if (f->kind == TSC_CLI_DOUBLE) return tsc_cli_parse_double(cmd, a, v, f->lo, f->hi, f->dst);
    long n = 0;
    int rc = tsc_cli_parse_long(cmd, a, v, bound(f->lo), bound(f->hi), &n);
    if (rc) return rc;
    switch (f->kind) {
    case TSC_CLI_INT: *(int *)f->dst = (int)n; break;
    case TSC_CLI_LONG: *(long *)f->dst = n; break;
    case TSC_CLI_LLONG: *(long long *)f->dst = n; break;
    case TSC_CLI_WHOLE: *(double *)f->dst = (double)n; break;
    default: return tsc_cli_usage_error(cmd, "%s: a flag of no known kind", f->name);
    }
    return 0;
}

int tsc_cli_flag(const char *cmd, int argc, char **argv, int *i, const tsc_cli_flag_t *f, size_t n) {
    const char *a = argv[*i], *v;
    for (size_t k = 0; k < n; k++) {
        if (strcmp(a, f[k].name) != 0 && !(f[k].alias && strcmp(a, f[k].alias) == 0)) continue;
        if (f[k].kind == TSC_CLI_ON || f[k].kind == TSC_CLI_OFF) {
            *(int *)f[k].dst = f[k].kind == TSC_CLI_ON;
            return 0;
        }
        if (!(v = flag_arg(cmd, argc, argv, i))) return 2;
        return flag_value(cmd, a, v, &f[k]);
    }
    return -1;
}

int tsc_cli_operand(const char *cmd, const char *a, int lone_dash, const char **slot) {
    if (a[0] == '-' && (a[1] || !lone_dash)) return tsc_cli_unknown_option(cmd, a);
    if (!slot) return tsc_cli_usage_error(cmd, "unknown argument '%s'", a);
    if (*slot) return tsc_cli_usage_error(cmd, "unexpected argument '%s' ('%s' was given already)", a, *slot);
    *slot = a;
    return 0;
}

int tsc_cli_args(const char *cmd, int argc, char **argv, const tsc_cli_flag_t *f, size_t n, tsc_cli_flag_fn more,
                 void *ctx, int lone_dash, const char **operand) {
    for (int i = 0; i < argc; i++) {
        int rc = more ? more(cmd, argc, argv, &i, ctx) : -1;
        if (rc < 0) rc = tsc_cli_flag(cmd, argc, argv, &i, f, n);
        if (rc < 0) rc = tsc_cli_operand(cmd, argv[i], lone_dash, operand);
        if (rc) return rc;
    }
    return 0;
}
