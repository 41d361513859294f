/* suggest.c: "did you mean" for a mistyped command or option (cli.h). A command's options are the
 * words "--name" and "-x" of its usage text (every option is documented there), plus the options
 * every command accepts; the nearest by edit distance is suggested when it is close enough to
 * read as a typo, or the one option the word starts. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define MAX_WORD 64

/* Edit distance with adjacent transpositions (optimal string alignment) of a and b, each at
 * most MAX_WORD bytes (longer words are cut). */
static int edit_distance(const char *a, const char *b) {
    int n = (int)strnlen(a, MAX_WORD), m = (int)strnlen(b, MAX_WORD);
    int d[MAX_WORD + 1][MAX_WORD + 1];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[n][m];
}

/* The best candidate so far: the smallest distance, else the only candidate the word starts. */
typedef struct {
    const char *word;
    size_t len;             /* of word, up to a '=' */
    char best[MAX_WORD];
    int dist;               /* of best; INT_MAX-like when none */
    char prefix[MAX_WORD];  /* the one candidate starting with word ("" none, "\1" several) */
} nearest_t;

static void consider(nearest_t *s, const char *cand, size_t clen) {
    char c[MAX_WORD], w[MAX_WORD];
    if (clen >= MAX_WORD || s->len >= MAX_WORD) return;
    memcpy(c, cand, clen), c[clen] = '\0';
    memcpy(w, s->word, s->len), w[s->len] = '\0';
    int d = edit_distance(w, c);
    if (d < s->dist) s->dist = d, memcpy(s->best, c, clen + 1);
    if (s->len >= 3 && clen > s->len && strncmp(c, w, s->len) == 0 && strcmp(s->prefix, c) != 0)
        snprintf(s->prefix, sizeof s->prefix, "%s", s->prefix[0] ? "\1" : c);
}

/* The suggestion of s, or NULL: within 1 edit for words of 2 to 4 characters (dashes aside), 2 up to
 * 8, else 3; none for one letter (any other letter is one edit away). */
static const char *pick(const nearest_t *s) {
    size_t n = s->len;
    while (n && s->word[s->len - n] == '-') n--; /* dashes do not count towards the length */
    int max = n <= 1 ? 0 : n <= 4 ? 1 : n <= 8 ? 2 : 3;
    if (s->best[0] && s->dist > 0 && s->dist <= max) return s->best;
    if (s->prefix[0] && s->prefix[0] != '\1') return s->prefix;
    return s->best[0] && s->dist == 0 ? s->best : NULL;
}

static void nearest_init(nearest_t *s, const char *word) {
    memset(s, 0, sizeof *s);
    s->word = word;
    const char *eq = strchr(word, '=');
    s->len = eq ? (size_t)(eq - word) : strlen(word);
    s->dist = 1 << 20;
}

const char *tsc_cli_nearest_command(const char *word, char *buf, size_t cap) {
    nearest_t s;
    nearest_init(&s, word);
    for (const tsc_cli_cmd_t *c = tsc_cli_commands; c->name; c++) consider(&s, c->name, strlen(c->name));
    const char *p = pick(&s);
    if (!p || !strcmp(p, word)) return NULL;
    snprintf(buf, cap, "%s", p);
    return buf;
}

/* Every "--name" and "-x" word of text into s. */
static void consider_usage(nearest_t *s, const char *text) {
    for (const char *p = text; (p = strchr(p, '-')) != NULL;) {
        int start = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '-');
        const char *q = p;
        while (*q == '-' && q - p < 2) q++;
        const char *e = q;
        while (isalnum((unsigned char)*e) || (*e == '-' && e > q)) e++;
        if (start && e > q && isalpha((unsigned char)*q) && (q - p == 2 || e - q == 1)) consider(s, p, (size_t)(e - p));
        p = e > p ? e : p + 1;
    }
}

const char *tsc_cli_nearest_option(const char *cmd, const char *word, char *buf, size_t cap) {
    nearest_t s;
    nearest_init(&s, word);
    const tsc_cli_cmd_t *c = cmd ? tsc_cli_find(cmd) : NULL;
    if (c) consider_usage(&s, c->usage);
    if (cmd) consider_usage(&s, tsc_cli_global_usage);
    consider_usage(&s, cmd ? "--help -h" : "--help -h --version");
    const char *p = pick(&s);
    if (!p) return NULL;
    snprintf(buf, cap, "%s", p);
    return buf;
}

/* 1 when the word w[0..len) ends in a ']' or ')' it did not open ("S]" of "[--seed S]"). */
static int unclosed(const char *w, size_t len) {
    char close = w[len - 1], open = close == ']' ? '[' : '(';
    int depth = 0;
    if (close != ']' && close != ')') return 0;
    for (size_t k = 0; k < len; k++) depth += (w[k] == open) - (w[k] == close);
    return depth < 0;
}

/* The value word of flag in text (tsc_cli_value_name) into buf, or NULL. */
static const char *value_in(const char *text, const char *flag, char *buf, size_t cap) {
    size_t fl = strlen(flag);
    for (const char *p = text; (p = strstr(p, flag)) != NULL; p += fl) {
        const char *v = p + fl + 1;
        if ((p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-')) || v[-1] != ' ') continue;
        size_t len = strcspn(v, " \n"), end = len;
        while (len && (strchr(".,;:", v[len - 1]) || unclosed(v, len))) len--; /* "[--seed S]", "(--steps N: ..." */
        if (!len || !(isupper((unsigned char)v[0]) || v[0] == '[' || memchr(v, '|', len) || memchr(v, '=', len)))
            continue;
        size_t remark = 0; /* " (...)" closed on the same line */
        if (end == len && v[len] == ' ' && v[len + 1] == '(' && v[len + strcspn(v + len, ")\n")] == ')')
            remark = strcspn(v + len, ")\n") + 1;
        snprintf(buf, cap, "%.*s", (int)(len + remark), v);
        return buf;
    }
    return NULL;
}

const char *tsc_cli_value_name(const char *cmd, const char *flag, char *buf, size_t cap) {
    const tsc_cli_cmd_t *c = cmd ? tsc_cli_find(cmd) : NULL;
    const char *v = c ? value_in(c->usage, flag, buf, cap) : NULL;
    return v ? v : value_in(tsc_cli_global_usage, flag, buf, cap);
}

/* Options of other commands a user carries over, and what this command calls them: the edit distance
 * cannot find these ("--policy" is nowhere near "--lp"). */
static const struct {
    const char *cmd, *word, *hint;
} carried[] = {
    {"diagnose", "--policy", "diagnose takes the run's low-precision policy as --lp P (and the reference as --hp P)"},
    {"analyze", "--policy", "analyze takes the run's low-precision policy as --lp P (and the reference as --hp P)"},
    {"train", "--policy", "train takes the attention policy as --attn-policy [L=]POLICY"},
    {"repro", "--policy", "repro fixes its runs' policies; --dose FMT changes the low-precision ones"},
};

int tsc_cli_unknown_option(const char *cmd, const char *word) {
    char near[MAX_WORD];
    const char *eq = strchr(word, '=');
    for (size_t i = 0; cmd && i < sizeof carried / sizeof carried[0]; i++) {
        const size_t n = strlen(carried[i].word);
        if (!strcmp(cmd, carried[i].cmd) && !strncmp(word, carried[i].word, n) && (!word[n] || word[n] == '='))
            return tsc_cli_usage_error(cmd, "unknown option '%s': %s", word, carried[i].hint);
    }
    if (!tsc_cli_nearest_option(cmd, word, near, sizeof near) || !strcmp(near, word))
        return tsc_cli_usage_error(cmd, "unknown option '%s'", word);
    if (eq && strlen(near) == (size_t)(eq - word) && !strncmp(near, word, (size_t)(eq - word)))
        return tsc_cli_usage_error(cmd, "unknown option '%s': write '%s %s' (the value follows after a space)", word,
                                   near, eq + 1);
    return tsc_cli_usage_error(cmd, "unknown option '%s'; did you mean '%s'?", word, near);
}
