/* gnuplot curves: quoting, hostile labels that must stay text, every curve kind to PNG/PDF/SVG
 * with the right size, a missing gnuplot, a failing gnuplot. Without gnuplot installed only the
 * in-memory checks and the missing-program error run. */
#define _GNU_SOURCE  /* memmem */
#include "tsc_test.h"
#include "tsc_plot.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/tsc-plot-XXXXXX";

/* PNG width and height from the IHDR chunk (bytes 16..23, big-endian). 0 on a bad file. */
static int png_size(const char *path, uint32_t *w, uint32_t *h) {
    unsigned char b[24];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t k = fread(b, 1, sizeof b, f);
    fclose(f);
    if (k != sizeof b || memcmp(b, "\x89PNG\r\n\x1a\n", 8) || memcmp(b + 12, "IHDR", 4)) return 0;
    *w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    *h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    return 1;
}

static char *slurp_n(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    if (len) *len = (size_t)n;
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
    if (p) p[n] = '\0';
    fclose(f);
    return p;
}

static char *slurp(const char *path) { return slurp_n(path, NULL); }

static int exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

static int has_tool(const char *name) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

/* pdfinfo's "Page size:" line contains want (e.g. "234 x 172.8 pts"). */
static int pdf_page_is(const char *path, const char *want) {
    char cmd[600], line[256];
    snprintf(cmd, sizeof cmd, "pdfinfo '%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    int ok = 0;
    while (p && fgets(line, sizeof line, p))
        if (strstr(line, "Page size:") && strstr(line, want)) ok = 1;
    int rc = p ? pclose(p) : -1;
    return ok && rc == 0;
}

/* The curves every case draws from: 50 points x -> y (decaying) and y2 (i^2), and a 100000-point
 * series ly with a +3 spike on every 101st point. */
enum { N = 50, LONG = 100000 };
static double x[N], y[N], y2[N];
static double *ly;

static void make_data(void) {
    for (int i = 0; i < N; i++) { x[i] = i + 1; y[i] = 3.0 / (i + 1) + 0.1 * sin(i); y2[i] = i * i; }
    ly = malloc(LONG * sizeof *ly);
    for (int i = 0; i < LONG; i++) ly[i] = 2.0 + sin(i * 0.001) + ((i * 7919) % 101 == 0 ? 3.0 : 0.0);
}

/* Quoting: ' doubled, control characters to spaces, backquotes and @ verbatim (inert in '...'). */
static void test_quote(void) {
    char *q = tsc_plot_quote("it's `id` @m\n\"x\"\t!");
    CHECK_STREQ(q, "'it''s `id` @m \"x\" !'");
    free(q);
    q = tsc_plot_quote(NULL);
    CHECK_STREQ(q, "''");
    free(q);
    q = tsc_plot_quote("\xce\xb4 = rowsum(dO \xe2\x88\x98 O)");  /* UTF-8 kept */
    CHECK_STREQ(q, "'\xce\xb4 = rowsum(dO \xe2\x88\x98 O)'");
    free(q);
    q = tsc_plot_quote("bad \xff\xce end \xe2\x88");  /* invalid UTF-8: '?' each byte */
    CHECK_STREQ(q, "'bad ?" "? end ?" "?'");  /* split: no trigraphs */
    free(q);
}

/* Scripts: a label cannot start a new command, index axes get whole tick steps, argument errors. */
static void test_script(void) {
    tsc_plot_opts_t o;
    tsc_plot_opts_init(&o);
    tsc_plot_series_t s = {.name = "run", .x = x, .y = y, .n = N};
    char *script = NULL;
    /* A newline in a label cannot start a new command: the script has exactly one title line. */
    o.title = "a\nset output '|touch pwned'";
    CHECK(tsc_plot_script(&o, &s, 1, "out.svg", TSC_IMG_AUTO, &script) == TSC_OK);
    CHECK(script && strstr(script, "\nset title 'a set output ''|touch pwned'''\n") != NULL);
    CHECK(script && strstr(script, "set terminal svg noenhanced size 234,173") != NULL);
    free(script);
    /* Index axes (no x given) never get fractional tick steps. */
    tsc_plot_series_t few = {.name = "O", .y = y, .n = 5};
    CHECK(tsc_plot_script(&o, &few, 1, "out.svg", TSC_IMG_AUTO, &script) == TSC_OK);
    CHECK(script && strstr(script, "\nset xtics ('0' 0, '1' 1, '2' 2, '3' 3, '4' 4)\n") != NULL);
    free(script);
    /* Argument errors. */
    o.title = NULL;
    CHECK(tsc_plot_script(&o, &s, 1, "out\n.svg", TSC_IMG_AUTO, &script) == TSC_ERR_ARG);
    CHECK(tsc_plot_script(&o, &s, 1, "out.gif", TSC_IMG_AUTO, &script) == TSC_ERR_ARG);
    s.color = "red'); system('x";
    CHECK(tsc_plot_script(&o, &s, 1, "out.svg", TSC_IMG_AUTO, &script) == TSC_ERR_ARG);
    s.color = NULL;
    o.font_pt = 5;
    CHECK(tsc_plot_script(&o, &s, 1, "out.svg", TSC_IMG_AUTO, &script) == TSC_ERR_ARG);
    o.font_pt = 8;
}

/* Long series become an envelope of max_points bins, not a thinned line. */
static void test_envelope(void) {
    tsc_plot_opts_t o;
    tsc_plot_opts_init(&o);
    char *script = NULL;
    tsc_plot_series_t ls = {.name = "long", .y = ly, .n = LONG, .ema_alpha = 0.01};
    o.max_points = 500;
    CHECK(tsc_plot_script(&o, &ls, 1, "out.svg", TSC_IMG_AUTO, &script) == TSC_OK);
    if (script) {
        CHECK(strstr(script, "filledcurves") != NULL);
        /* 500 data lines in the block, and the spikes (+3) survive as bin maxima. */
        char *blk = strstr(script, "$d0 << EOD\n"), *end = blk ? strstr(blk + 10, "\nEOD\n") : NULL;
        int lines = 0, spikes = 0;
        for (char *p = blk ? strchr(blk, '\n') + 1 : NULL; p && end && p < end; p = strchr(p, '\n') + 1) {
            double bx, lo, hi, mean, ema;
            if (sscanf(p, "%lf %lf %lf %lf %lf", &bx, &lo, &hi, &mean, &ema) == 5) { lines++; spikes += hi > 3.5; }  /* no spike: y <= 3; spike: y >= 4 */
            if (!strchr(p, '\n')) break;
        }
        CHECK_EQ_INT(lines, 500);
        /* bins hold 200 consecutive points, so each holds a multiple of 101: a spike */
        CHECKF(spikes == 500, "%d bins keep a spike", spikes);
        free(script);
    }
}

/* A missing gnuplot: a clear error that says how to install it. Creates the temporary folder. */
static void test_missing_gnuplot(void) {
    tsc_plot_opts_t o;
    tsc_plot_opts_init(&o);
    tsc_plot_series_t s = {.name = "run", .x = x, .y = y, .n = N};
    CHECK(mkdtemp(dir) != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/missing.png", dir);
    o.gnuplot = "tsc-no-such-gnuplot";
    CHECK(tsc_plot_write(&o, &s, 1, path, TSC_IMG_AUTO) == TSC_ERR_EXTERNAL);
    CHECKF(strstr(tsc_error_last(), "gnuplot-nox") && strstr(tsc_error_last(), "not found"), "%s", tsc_error_last());
    CHECK(!exists(path));
}

/* A failing gnuplot: its exit status and message come back. */
static void test_failing_gnuplot(void) {
    CHECK(tsc_plot_run(NULL, "plot tsc_no_such_function(x)\n") == TSC_ERR_EXTERNAL);
    CHECKF(strstr(tsc_error_last(), "undefined function") != NULL, "%s", tsc_error_last());
}

/* Hostile strings everywhere: they reach the SVG as text and run nothing. */
static void test_hostile_strings(void) {
    tsc_plot_opts_t o;
    /* Run in the temporary directory: the commands, had they run, would create pwnedN here. */
    char oldcwd[4096];
    CHECK(getcwd(oldcwd, sizeof oldcwd) != NULL);
    CHECK(chdir(dir) == 0);
    char pwn[6][24];
    for (int i = 0; i < 6; i++) snprintf(pwn[i], sizeof pwn[i], "pwned%d", i);
    char t_title[1024], t_name[1024], t_xl[1024], t_cat[1024];
    snprintf(t_title, sizeof t_title, "x'); system(\"touch %s\"); print('", pwn[0]);
    snprintf(t_name, sizeof t_name, "run `touch %s` @q", pwn[1]);
    snprintf(t_xl, sizeof t_xl, "step\nset output '|touch %s'\nsystem(\"touch %s\")", pwn[2], pwn[3]);
    snprintf(t_cat, sizeof t_cat, "h''`touch %s`'", pwn[4]);
    tsc_plot_opts_init(&o);
    o.title = t_title; o.xlabel = t_xl; o.ylabel = "O_lp \xe2\x88\x92 O_hp"; o.y2label = "\"quoted\" \\ back";
    const char *cats[2] = {t_cat, "b"};
    o.categories = cats; o.n_categories = 2;
    double bars[2] = {1, 2};
    tsc_plot_series_t hs[2] = {{.name = t_name, .y = bars, .n = 2, .style = TSC_PLOT_BARS},
                               {.name = "line", .y = bars, .n = 2, .y2 = 1}};
    char hpath[600];
    snprintf(hpath, sizeof hpath, "it's `touch %s`.svg", pwn[5]);
    CHECKF(tsc_plot_write(&o, hs, 2, hpath, TSC_IMG_AUTO) == TSC_OK, "%s", tsc_error_last());
    for (int i = 0; i < 6; i++) CHECKF(!exists(pwn[i]), "%s was created", pwn[i]);
    char *svg = slurp(hpath);
    CHECK(svg != NULL);
    if (svg) {
        char want[600];
        snprintf(want, sizeof want, "system(\"touch %s\")", pwn[0]);  /* the title, as text */
        CHECK(strstr(svg, want) != NULL);
        snprintf(want, sizeof want, "run `touch %s` @q", pwn[1]);
        CHECK(strstr(svg, want) != NULL);
        snprintf(want, sizeof want, "step set output '|touch %s' system", pwn[2]);
        CHECK(strstr(svg, want) != NULL);
        CHECK(strstr(svg, "O_lp \xe2\x88\x92 O_hp") != NULL);  /* noenhanced: no subscript */
        free(svg);
    }
    if (has_tool("xmllint")) {
        /* The name holds a backquote: pass it through an environment variable. */
        setenv("TSC_T_SVG", hpath, 1);
        CHECK(system("xmllint --noout \"$TSC_T_SVG\"") == 0);
    }
    CHECK(chdir(oldcwd) == 0);
}

/* Every curve kind, to each terminal, with the expected size. */
static void test_curve_kinds(void) {
    tsc_plot_opts_t o;
    char path[512];
    const char *cats[1] = {"b"};
    double bars[2] = {1, 2};
    double cum[N], feat[N];
    for (int i = 0; i < N; i++) { cum[i] = (i ? cum[i - 1] : 0) + 1e-5 * (i % 3); feat[i] = (i % 7) - 3.0; }
    struct kind { const char *name; tsc_plot_series_t s[3]; int n; int logx, logy; } kinds[] = {
        {"runs_ema", {{.name = "bf16", .x = x, .y = y, .n = N, .ema_alpha = 0.2}, {.name = "fp32", .x = x, .y = y2, .n = N, .ema_alpha = 0.2}}, 2, 0, 1},
        {"loglog", {{.name = "orig", .x = x, .y = y, .n = N}, {.name = "stable", .x = x, .y = y2, .n = N, .style = TSC_PLOT_POINTS}}, 2, 1, 1},
        {"envelope", {{.name = "loss", .y = ly, .n = LONG, .ema_alpha = 0.001}}, 1, 0, 0},
        {"dual", {{.name = "val loss", .x = x, .y = y, .n = N}, {.name = "rows with ties", .x = x, .y = y2, .n = N, .y2 = 1, .style = TSC_PLOT_STEPS}}, 2, 0, 0},
        {"bars", {{.name = "W_Q", .y = bars, .n = 2, .style = TSC_PLOT_BARS}, {.name = "W_K", .y = bars, .n = 2, .style = TSC_PLOT_BARS}}, 2, 0, 0},
        {"features", {{.name = "dO", .y = feat, .n = N, .style = TSC_PLOT_IMPULSES}, {.name = "O", .y = y, .n = N, .style = TSC_PLOT_LINESPOINTS}}, 2, 0, 0},
        {"tokens", {{.name = "cumulative", .y = cum, .n = N, .style = TSC_PLOT_STEPS}}, 1, 0, 0},
    };
    const char *ext[3] = {"png", "pdf", "svg"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        tsc_plot_opts_init(&o);
        o.title = kinds[k].name; o.xlabel = "x"; o.ylabel = "y"; o.y2label = "y2";
        o.logx = kinds[k].logx; o.logy = kinds[k].logy; o.dpi = 150;
        o.height_in = 2.5;  /* 180 pt: pdfcairo rounds page sizes to whole points */
        if (!strcmp(kinds[k].name, "bars")) { o.categories = cats; o.n_categories = 1; }
        for (int e = 0; e < 3; e++) {
            snprintf(path, sizeof path, "%s/%s.%s", dir, kinds[k].name, ext[e]);
            tsc_status_t st = tsc_plot_write(&o, kinds[k].s, kinds[k].n, path, TSC_IMG_AUTO);
            CHECKF(st == TSC_OK, "%s: %s", path, tsc_error_last());
            struct stat sb;
            CHECKF(stat(path, &sb) == 0 && sb.st_size > 500, "%s is empty or missing", path);
            if (e == 0) {
                mode_t um = umask(0);
                umask(um);
                CHECK((sb.st_mode & 0777) == (0666 & ~um));  /* not a temporary file's 0600 */
                uint32_t w = 0, h = 0;
                CHECKF(png_size(path, &w, &h) && w == 488 && h == 375, "%s: %ux%u, expected 488x375", path, w, h);
            } else if (e == 1 && has_tool("pdfinfo")) {
                CHECKF(pdf_page_is(path, "234 x 180 pts"), "%s: page size", path);
            } else if (e == 2) {
                char *t = slurp(path);
                CHECKF(t && strstr(t, "width=\"234\" height=\"180\""), "%s: svg size", path);
                free(t);
            }
        }
    }
}

/* Reproducible: with SOURCE_DATE_EPOCH the same plot gives the same PDF bytes. */
static void test_reproducible_pdf(void) {
    tsc_plot_opts_t o;
    tsc_plot_series_t runs[2] = {{.name = "bf16", .x = x, .y = y, .n = N, .ema_alpha = 0.2},
                                 {.name = "fp32", .x = x, .y = y2, .n = N, .ema_alpha = 0.2}};
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/r1.pdf", dir);
    snprintf(p2, sizeof p2, "%s/r2.pdf", dir);
    tsc_plot_opts_init(&o);
    CHECK(tsc_plot_write(&o, runs, 2, p1, TSC_IMG_AUTO) == TSC_OK);
    sleep(1);  /* a different wall-clock second */
    CHECK(tsc_plot_write(&o, runs, 2, p2, TSC_IMG_AUTO) == TSC_OK);
    size_t n1 = 0, n2 = 0;
    char *b1 = slurp_n(p1, &n1), *b2 = slurp_n(p2, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    CHECK(b1 && memmem(b1, n1, "/CreationDate (D:20231114221320", 31) != NULL);
    free(b1); free(b2);
    unsetenv("SOURCE_DATE_EPOCH");
}


/* Parses "set AXtics ('lab' v, ...)" of script: the labels into lab[], their values into val[]. */
static int tick_list(const char *script, const char *ax, char lab[][48], double *val, int cap) {
    char key[32];
    snprintf(key, sizeof key, "set %stics (", ax);
    const char *p = strstr(script, key);
    if (!p) return -1;
    p += strlen(key);
    int n = 0;
    while (*p == '\'' && n < cap) {
        const char *e = strchr(p + 1, '\'');
        if (!e) return -1;
        snprintf(lab[n], 48, "%.*s", (int)(e - p - 1), p + 1);
        val[n] = strtod(e + 1, (char **)&p);
        n++;
        if (*p == ',') p += 2;
    }
    return n;
}

/* Ticks: every label of every linear axis is distinct, even over a range narrow against its
 * magnitude (a jump of 7e-8 at 0.0039); an axis of integers (steps, keys) has whole ticks only; the
 * range starts below the first value, so a spike at key 0 is not drawn on the axis; the 9th-16th
 * series (a second cycle of the 8 colours) are dashed, so 12 heads are 12 distinct styles. */
static void test_ticks_and_styles(void) {
    static double narrow[13], steps[2] = {0, 1}, keys[1024], lines[12][2];
    for (int i = 0; i < 13; i++) narrow[i] = 0.0039 + (i >= 6 ? 6.9e-8 : 0);
    for (int i = 0; i < 1024; i++) keys[i] = i ? 1e-6 : 0.5;
    tsc_plot_opts_t o;
    tsc_plot_opts_init(&o);
    char lab[64][48], *script = NULL;
    double val[64];
    struct { tsc_plot_series_t s; const char *ax; int integer; } cases[] = {
        {{.y = narrow, .n = 13, .x_origin = 122, .style = TSC_PLOT_LINESPOINTS}, "y", 0},
        {{.y = narrow, .n = 13, .x_origin = 122, .style = TSC_PLOT_LINESPOINTS}, "x", 1},
        {{.x = steps, .y = steps, .n = 2}, "x", 1},
        {{.y = keys, .n = 1024}, "x", 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        CHECK(tsc_plot_script(&o, &cases[c].s, 1, "o.png", TSC_IMG_AUTO, &script) == TSC_OK);
        int n = script ? tick_list(script, cases[c].ax, lab, val, 64) : -1;
        CHECKF(n >= 2, "case %zu: %d %s ticks", c, n, cases[c].ax);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < i; j++) CHECKF(strcmp(lab[i], lab[j]) != 0, "case %zu: tick label '%s' twice", c, lab[i]);
            if (cases[c].integer) CHECKF(val[i] == floor(val[i]), "case %zu: fractional tick %g", c, val[i]);
        }
        double lo = NAN, hi = NAN;
        const char *r = script ? strstr(script, cases[c].ax[0] == 'x' ? "set xrange [" : "set yrange [") : NULL;
        if (r) sscanf(r + 12, "%lf:%lf", &lo, &hi);
        double d0 = cases[c].ax[0] == 'x' ? (cases[c].s.x ? cases[c].s.x[0] : cases[c].s.x_origin) : 0.0039;
        CHECKF(lo < d0, "case %zu: range starts at %g, not below the first value %g", c, lo, d0);
        free(script);
        script = NULL;
    }
    tsc_plot_series_t heads[12];
    for (int h = 0; h < 12; h++) {
        lines[h][0] = h, lines[h][1] = h + 1;
        heads[h] = (tsc_plot_series_t){.name = "h", .x = steps, .y = lines[h], .n = 2, .style = TSC_PLOT_LINESPOINTS};
    }
    CHECK(tsc_plot_script(&o, heads, 12, "o.png", TSC_IMG_AUTO, &script) == TSC_OK);
    char seen[12][64];
    int ns = 0;
    for (const char *p = script ? strstr(script, "\nplot ") : NULL; p && (p = strstr(p, "lc rgb '")); p++) {
        char col[16] = "", dt[16] = "";
        sscanf(p, "lc rgb '%15[^']' dt %15s", col, dt);
        snprintf(seen[ns], sizeof seen[ns], "%s/%s", col, dt);
        for (int j = 0; j < ns; j++) CHECKF(strcmp(seen[j], seen[ns]) != 0, "style %s used twice", seen[ns]);
        if (++ns == 12) break;
    }
    CHECKF(ns == 12, "found %d styled series of 12", ns);
    free(script);
}

/* end_labels: no key; a label per named series right of the plot, in its colour, level with its last
 * finite point in graph units of the range the script sets, in that order from the bottom, and at
 * least a line of text apart; a series that ends early is named at its end; a log axis narrower than
 * a decade gets ticks. */
static void test_end_labels(void) {
    static double x[4] = {0, 1, 2, 3}, a[4] = {5, 4, 3.5, 3.0}, b[4] = {5, 4, 3.2, 3.05}, c[4] = {5, 5, 5.5, 6},
                  d[4] = {5, 4.5, NAN, NAN};
    tsc_plot_series_t s[5] = {{.name = "low", .x = x, .y = a, .n = 4}, {.name = "near", .x = x, .y = b, .n = 4},
                              {.name = "high", .x = x, .y = c, .n = 4, .color = "#123456"}, {.x = x, .y = a, .n = 4},
                              {.name = "short", .x = x, .y = d, .n = 4, .color = "#654321"}};
    for (int logy = 0; logy < 2; logy++) {
        tsc_plot_opts_t o;
        tsc_plot_opts_init(&o);
        o.end_labels = 1, o.logy = logy;
        char *script = NULL;
        CHECK(tsc_plot_script(&o, s, 5, "o.png", TSC_IMG_AUTO, &script) == TSC_OK);
        if (!script) continue;
        CHECK(strstr(script, "\nunset key\n") && !strstr(script, "\nset key"));
        /* a series that stops early (at x = 1 of 0..3) is named where it ends, with a cross there */
        CHECKF(strstr(script, "set label 'short' at first 1, first 4.5 left offset char 0.6,0.5 tc rgb '#654321' "
                              "point pt 2 ps 0.8 lc rgb '#654321' front\n") != NULL, "logy %d: 'short' not at its end", logy);
        CHECK(!strstr(script, "set label 'short' at graph"));
        double lo = NAN, hi = NAN, g[3] = {NAN, NAN, NAN};
        const char *r = strstr(script, "set yrange [");
        if (r) sscanf(r + 12, "%lf:%lf", &lo, &hi);
        CHECKF(lo < 3.0 && hi > 6 && lo > 0, "logy %d: y range [%g, %g]", logy, lo, hi);
        const char *names[3] = {"low", "near", "high"}, *cols[3] = {"#", "#", "#123456"};
        for (int i = 0; i < 3; i++) {
            char want[64], col[16] = "";
            snprintf(want, sizeof want, "set label '%s' at graph 1.02, graph ", names[i]);
            const char *p = strstr(script, want);
            CHECKF(p != NULL, "logy %d: no label '%s'", logy, names[i]);
            if (p) sscanf(p + strlen(want), "%lf left tc rgb '%15[^']'", &g[i], col);
            CHECKF(!strncmp(col, cols[i], strlen(cols[i])), "logy %d: '%s' in colour '%s'", logy, names[i], col);
        }
        CHECK(!strstr(script, "set label '' ")); /* the unnamed series has none */
        double y3 = logy ? (log(3.0) - log(lo)) / (log(hi) - log(lo)) : (3.0 - lo) / (hi - lo);
        double y6 = logy ? (log(6.0) - log(lo)) / (log(hi) - log(lo)) : (6.0 - lo) / (hi - lo);
        const double sep = 1.15 * o.font_pt / (o.height_in * 72 * 0.6);
        CHECKF(fabs(g[0] - y3) < 1e-3, "logy %d: 'low' at graph %g, its end at %g", logy, g[0], y3);
        CHECKF(g[1] >= g[0] + sep - 1e-3 && g[1] < g[0] + 2 * sep, "logy %d: 'near' (3.05, nudged) at %g, 'low' at %g", logy, g[1], g[0]);
        CHECKF(fabs(g[2] - y6) < 1e-3, "logy %d: 'high' at graph %g, its end at %g", logy, g[2], y6);
        char lab[64][48];
        double val[64];
        int n = tick_list(script, "y", lab, val, 64);
        CHECKF(n >= 3, "logy %d: %d y ticks on a range of [%g, %g]", logy, n, lo, hi);
        free(script);
    }
}

int main(void) {
    make_data();
    test_end_labels();
    test_quote();
    test_script();
    test_envelope();
    test_ticks_and_styles();
    test_missing_gnuplot();
    if (!has_tool("gnuplot")) {
        printf("SKIP: gnuplot not installed (apt-get install gnuplot-nox): file checks not run\n");
        rmdir(dir);
        free(ly);
        return tsc_test_done();
    }
    test_failing_gnuplot();
    test_hostile_strings();
    test_curve_kinds();
    test_reproducible_pdf();
    CHECK(tsc_test_rmtree(dir) == 0);
    free(ly);
    return tsc_test_done();
}
