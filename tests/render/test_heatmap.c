/* Heatmaps: pixel probes on the in-memory image (planted cells, colour bar ends, masked and
 * non-finite cells, pooling that keeps extremes), image sizes, multi-panel layouts, and the
 * PNG/SVG/PDF files (read back with cairo, xmllint, pdfinfo). */
#include "tsc_test.h"
#include "tsc_heatmap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint32_t px(cairo_surface_t *s, int x, int y) {
    unsigned char *d = cairo_image_surface_get_data(s);
    return *(uint32_t *)(void *)(d + (size_t)y * cairo_image_surface_get_stride(s) + (size_t)x * 4);
}

/* Centre pixel of source cell (r, c) for an unpooled panel of rows x cols. Cells are laid out
 * uniformly over the plot rectangle, row 0 at the top. */
static void cell_centre(const tsc_heatmap_info_t *f, int rows, int cols, int r, int c, int *x, int *y) {
    *x = (int)(f->plot_x + (c + 0.5) * f->plot_w / cols);
    *y = (int)(f->plot_y + (r + 0.5) * f->plot_h / rows);
}

static int has_tool(const char *name) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

/* The planted matrix of cases 1, 2, 7, 8 and 9: 37 x 53, odd and asymmetric. */
enum { R = 37, C = 53 };

/* 1. A planted hot and cold cell in an odd, asymmetric matrix (37 x 53). Returns 0 when no image
 * came back (the remaining cases then do not run). */
static int test_planted(const tsc_heatmap_panel_t *p) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    tsc_heatmap_opts_init(&o);
    CHECK(tsc_heatmap_render(&o, p, 1, &img, f) == TSC_OK);
    CHECK(img != NULL);
    if (!img) return 0;
    /* 3.25 x 2.6 in at 300 dpi. */
    CHECK_EQ_INT(cairo_image_surface_get_width(img), 975);
    CHECK_EQ_INT(cairo_image_surface_get_height(img), 780);
    CHECK(f[0].shown_rows == R && f[0].shown_cols == C && f[0].pool_rows == 1 && f[0].pool_cols == 1);
    CHECK(f[0].norm.vmin == -1 && f[0].norm.vmax == 1);
    /* Published viridis ends, #fde725 and #440154. */
    uint32_t top = 0xFFFDE725u, bottom = 0xFF440154u;
    uint32_t middle = tsc_cmap_argb(TSC_CMAP_VIRIDIS, 0.5);
    int x, y;
    cell_centre(&f[0], R, C, 11, 29, &x, &y);
    CHECK_EQ_U32(px(img, x, y), top);
    cell_centre(&f[0], R, C, 30, 5, &x, &y);
    CHECK_EQ_U32(px(img, x, y), bottom);
    cell_centre(&f[0], R, C, 0, 0, &x, &y);
    CHECK_EQ_U32(px(img, x, y), middle);
    /* The hot colour appears inside the plot exactly as one cell-sized block at the right place. */
    int x0 = 1 << 30, x1 = -1, y0 = 1 << 30, y1 = -1;
    for (int yy = (int)f[0].plot_y; yy < (int)(f[0].plot_y + f[0].plot_h); yy++)
        for (int xx = (int)f[0].plot_x; xx < (int)(f[0].plot_x + f[0].plot_w); xx++)
            if (px(img, xx, yy) == top) {
                if (xx < x0) x0 = xx;
                if (xx > x1) x1 = xx;
                if (yy < y0) y0 = yy;
                if (yy > y1) y1 = yy;
            }
    double cw = f[0].plot_w / C, chh = f[0].plot_h / R;
    CHECKF(fabs((x1 - x0 + 1) - cw) <= 1.01 && fabs((y1 - y0 + 1) - chh) <= 1.01, "hot block %dx%d vs cell %.2fx%.2f",
           x1 - x0 + 1, y1 - y0 + 1, cw, chh);
    CHECKF(fabs((x0 + x1 + 1) / 2.0 - (f[0].plot_x + 29.5 * cw)) <= 1 &&
           fabs((y0 + y1 + 1) / 2.0 - (f[0].plot_y + 11.5 * chh)) <= 1, "hot block at (%d..%d, %d..%d)", x0, x1, y0, y1);
    /* The plot is framed: the pixel just left of it is dark, and it is inside the image. */
    uint32_t fr = px(img, (int)f[0].plot_x - 1, (int)(f[0].plot_y + f[0].plot_h / 2));
    CHECKF(((fr >> 16) & 255) < 128, "frame pixel 0x%08x", fr);
    CHECK(f[0].plot_x > 0 && f[0].plot_x + f[0].plot_w < 975 && f[0].plot_y > 0 && f[0].plot_y + f[0].plot_h < 780);
    /* Colour bar ends: top row t = 1, bottom row t = 0; right of the plot. */
    int cbx = (int)(f[0].cbar_x + f[0].cbar_w / 2);
    CHECK_EQ_U32(px(img, cbx, (int)f[0].cbar_y), top);
    CHECK_EQ_U32(px(img, cbx, (int)(f[0].cbar_y + f[0].cbar_h) - 1), bottom);
    CHECK(f[0].cbar_x > f[0].plot_x + f[0].plot_w && f[0].cbar_x + f[0].cbar_w < 975);
    cairo_surface_destroy(img);
    return 1;
}

/* 2. Diverging map, symmetric norm: zero is the neutral centre, bar ends are blue and red. */
static void test_diverging(float *a, const tsc_heatmap_panel_t *p) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    int x, y, cbx;
    tsc_heatmap_opts_init(&o);
    o.cmap = TSC_CMAP_COOLWARM;
    o.norm_kind = TSC_NORM_SYMMETRIC;
    a[11 * C + 29] = 4.0f;  /* asymmetric data: the scale must still be [-4, 4] */
    CHECK(tsc_heatmap_render(&o, p, 1, &img, f) == TSC_OK);
    CHECK(f[0].norm.vmin == -4 && f[0].norm.vmax == 4);
    cell_centre(&f[0], R, C, 0, 0, &x, &y);
    CHECK_EQ_U32(px(img, x, y), 0xFFDDDDDDu);  /* zero: the neutral centre (221, 221, 221) */
    cell_centre(&f[0], R, C, 30, 5, &x, &y);  /* -1 of [-4, 4] -> t = 0.375 (LUT resolution) */
    CHECK_EQ_U32(px(img, x, y), tsc_cmap_argb(TSC_CMAP_COOLWARM, floor(0.375 * 1023 + 0.5) / 1023));
    cbx = (int)(f[0].cbar_x + f[0].cbar_w / 2);
    /* Moreland's published ends: blue (59, 76, 192), red (180, 4, 38). */
    CHECK_EQ_U32(px(img, cbx, (int)(f[0].cbar_y + f[0].cbar_h) - 1), 0xFF3B4CC0u);
    CHECK_EQ_U32(px(img, cbx, (int)f[0].cbar_y), 0xFFB40426u);
    cairo_surface_destroy(img);
}

/* 3. Causal mask and non-finite cells. */
static void test_masks(void) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    int x, y;
    enum { T = 40 };
    float *s = malloc(T * T * sizeof *s);
    for (int i = 0; i < T * T; i++) s[i] = (float)(i % 7) / 6.0f;
    s[20 * T + 3] = NAN;
    s[25 * T + 24] = INFINITY;
    s[2 * T + 30] = NAN;     /* masked: not counted as non-finite */
    tsc_heatmap_opts_init(&o);
    tsc_heatmap_panel_t pc = {.data = s, .rows = T, .cols = T, .causal = 1};
    CHECK(tsc_heatmap_render(&o, &pc, 1, &img, f) == TSC_OK);
    CHECK_EQ_INT(f[0].n_masked, T * (T - 1) / 2);
    CHECK_EQ_INT(f[0].n_nonfinite, 2);
    CHECK_STREQ(f[0].note, "hatched: 780 masked cells (causal upper triangle); magenta: 2 non-finite cells (NaN/Inf)");
    cell_centre(&f[0], T, T, 20, 3, &x, &y);
    CHECK_EQ_U32(px(img, x, y), TSC_CMAP_BAD_ARGB);
    cell_centre(&f[0], T, T, 25, 24, &x, &y);
    CHECK_EQ_U32(px(img, x, y), TSC_CMAP_BAD_ARGB);
    /* Every pixel of a masked cell is hatch grey or white (never a map colour), and both occur. */
    int n_hatch = 0, n_white = 0, n_other = 0;
    for (int r = 0; r < T; r++)
        for (int c = r + 1; c < T; c++) {
            int cx0 = (int)ceil(f[0].plot_x + c * f[0].plot_w / T), cx1 = (int)floor(f[0].plot_x + (c + 1) * f[0].plot_w / T);
            int cy0 = (int)ceil(f[0].plot_y + r * f[0].plot_h / T), cy1 = (int)floor(f[0].plot_y + (r + 1) * f[0].plot_h / T);
            for (int yy = cy0; yy < cy1; yy++)
                for (int xx = cx0; xx < cx1; xx++) {
                    uint32_t v = px(img, xx, yy);
                    if (v == 0xFF8C8C8Cu) n_hatch++;
                    else if (v == 0xFFFFFFFFu) n_white++;
                    else n_other++;
                }
        }
    CHECKF(n_hatch > 0 && n_white > n_hatch && n_other == 0, "masked pixels: %d hatch, %d white, %d other", n_hatch,
           n_white, n_other);
    cell_centre(&f[0], T, T, 39, 0, &x, &y);  /* unmasked: a map colour */
    CHECK_EQ_U32(px(img, x, y), tsc_cmap_argb(TSC_CMAP_VIRIDIS, floor((float)((39 * T) % 7) / 6.0f * 1023 + 0.5) / 1023));
    cairo_surface_destroy(img);
    /* A caller mask works the same way. */
    uint8_t *m = calloc(T * T, 1);
    m[7 * T + 7] = 1;
    pc.causal = 0; pc.mask = m;
    CHECK(tsc_heatmap_render(&o, &pc, 1, &img, f) == TSC_OK);
    CHECK_EQ_INT(f[0].n_masked, 1);
    CHECK_EQ_INT(f[0].n_nonfinite, 3);
    cairo_surface_destroy(img);
    free(s); free(m);
}

/* 4. Pooling keeps extremes: one -50 among values in [-1, 1] in a 1200 x 1100 matrix. */
static void test_pooling(void) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    enum { BR = 1200, BC = 1100 };
    float *b = malloc((size_t)BR * BC * sizeof *b);
    for (int i = 0; i < BR * BC; i++) b[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    b[(size_t)777 * BC + 333] = -50.0f;
    tsc_heatmap_opts_init(&o);
    o.cmap = TSC_CMAP_COOLWARM; o.norm_kind = TSC_NORM_SYMMETRIC;
    tsc_heatmap_panel_t pb = {.data = b, .rows = BR, .cols = BC};
    CHECK(tsc_heatmap_render(&o, &pb, 1, &img, f) == TSC_OK);
    int fy = f[0].pool_rows, fx = f[0].pool_cols;
    CHECK(fy > 1 && fx > 1);
    /* Smallest factor that fits the plot's pixels. */
    CHECK(f[0].shown_rows == (BR + fy - 1) / fy && f[0].shown_rows <= f[0].plot_h && (BR + fy - 2) / (fy - 1) > f[0].plot_h);
    CHECK(f[0].shown_cols == (BC + fx - 1) / fx && f[0].shown_cols <= f[0].plot_w);
    {
        int sx = (int)(f[0].plot_x + (333 / fx + 0.5) * f[0].plot_w / f[0].shown_cols);
        int sy = (int)(f[0].plot_y + (777 / fy + 0.5) * f[0].plot_h / f[0].shown_rows);
        CHECK_EQ_U32(px(img, sx, sy), tsc_cmap_argb(TSC_CMAP_COOLWARM, 0));
    }
    cairo_surface_destroy(img);
    /* Mean pooling averages the extreme away: the darkest blue no longer appears in the plot. */
    o.pool = TSC_POOL_MEAN;
    CHECK(tsc_heatmap_render(&o, &pb, 1, &img, f) == TSC_OK);
    {
        int found = 0;
        for (int yy = (int)f[0].plot_y; yy < (int)(f[0].plot_y + f[0].plot_h); yy++)
            for (int xx = (int)f[0].plot_x; xx < (int)(f[0].plot_x + f[0].plot_w); xx++)
                found |= px(img, xx, yy) == tsc_cmap_argb(TSC_CMAP_COOLWARM, 0);
        CHECK(!found);
    }
    cairo_surface_destroy(img);
    /* Refusing to pool a matrix that does not fit is an error, not silent sampling. */
    o.pool = TSC_POOL_NONE;
    CHECK(tsc_heatmap_render(&o, &pb, 1, &img, f) == TSC_ERR_ARG && img == NULL);
    CHECK(strstr(tsc_error_last(), "1200x1100") != NULL);
    /* An explicit factor is honoured (and shown). */
    o.pool = TSC_POOL_MAXABS; o.pool_factor = 10;
    CHECK(tsc_heatmap_render(&o, &pb, 1, &img, f) == TSC_OK);
    CHECK(f[0].pool_rows == 10 && f[0].pool_cols == 10 && f[0].shown_rows == 120 && f[0].shown_cols == 110);
    CHECK_STREQ(f[0].note, "1200x1100 shown as 120x110, max-|x| pooling 10x10");
    cairo_surface_destroy(img);
    free(b);
}

/* 5. Multi-panel grids: 2 x 2, shared scale (one bar) and per-panel scales (four bars). */
static void test_grid(void) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    int x, y;
    tsc_heatmap_opts_init(&o);
    o.width_in = 6.5; o.height_in = 5; o.grid_cols = 2; o.dpi = 100;
    float *q = malloc(4 * 24 * 16 * sizeof *q);
    tsc_heatmap_panel_t pq[4];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 24 * 16; i++) q[k * 384 + i] = (float)((k + 1) * (i % 13));
        pq[k] = (tsc_heatmap_panel_t){.data = q + k * 384, .rows = 24, .cols = 16, .title = "panel"};
    }
    CHECK(tsc_heatmap_render(&o, pq, 4, &img, f) == TSC_OK);
    CHECK(f[0].norm.vmax == 48 && f[3].norm.vmax == 48 && f[0].cbar_x == f[3].cbar_x);
    CHECK(f[1].plot_x > f[0].plot_x + f[0].plot_w && f[2].plot_y > f[0].plot_y + f[0].plot_h);
    CHECK(fabs(f[0].plot_w - f[3].plot_w) <= 1 && fabs(f[0].plot_h - f[3].plot_h) <= 1);
    /* Panel 0 tops out at 12 of 48: its brightest cell is not the bar's top colour. */
    cell_centre(&f[0], 24, 16, 0, 12, &x, &y);
    CHECK(px(img, x, y) != tsc_cmap_argb(TSC_CMAP_VIRIDIS, 1));
    cairo_surface_destroy(img);
    o.per_panel_scale = 1;
    CHECK(tsc_heatmap_render(&o, pq, 4, &img, f) == TSC_OK);
    CHECK(f[0].norm.vmax == 12 && f[3].norm.vmax == 48 && f[0].cbar_x != f[1].cbar_x);
    cell_centre(&f[0], 24, 16, 0, 12, &x, &y);
    CHECK_EQ_U32(px(img, x, y), tsc_cmap_argb(TSC_CMAP_VIRIDIS, 1));
    cairo_surface_destroy(img);
    free(q);
}

/* 6. Fixed norms: log scale for probabilities. */
static void test_fixed_norms(void) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    int x, y;
    tsc_heatmap_opts_init(&o);
    float pr[3 * 4] = {1e-6f, 1e-3f, 1.0f, 0.0f, 1e-4f, 1e-2f, 0.5f, 0.25f, 1e-5f, 1e-6f, 1e-6f, 1e-6f};
    tsc_heatmap_panel_t pp = {.data = pr, .rows = 3, .cols = 4};
    o.fixed_norm = 1;
    CHECK(tsc_norm_init(&o.norm, TSC_NORM_LOG, 1e-6, 1) == TSC_OK);
    CHECK(tsc_heatmap_render(&o, &pp, 1, &img, f) == TSC_OK);
    cell_centre(&f[0], 3, 4, 0, 1, &x, &y);  /* 1e-3: the geometric middle */
    CHECK_EQ_U32(px(img, x, y), tsc_cmap_argb(TSC_CMAP_VIRIDIS, 0.5));
    cell_centre(&f[0], 3, 4, 0, 3, &x, &y);  /* 0: clipped to the lowest colour */
    CHECK_EQ_U32(px(img, x, y), tsc_cmap_argb(TSC_CMAP_VIRIDIS, 0));
    CHECK_STREQ(f[0].note, "1 cells <= 0 shown at the lowest colour");
    cairo_surface_destroy(img);
    CHECK(tsc_norm_init(&o.norm, TSC_NORM_LINEAR, 0, 0.5) == TSC_OK);  /* data reach 1: say so */
    CHECK(tsc_heatmap_render(&o, &pp, 1, &img, f) == TSC_OK);
    CHECK_STREQ(f[0].note, "data range [0, 1] exceeds the colour scale: clipped to its ends");
    cairo_surface_destroy(img);
    o.norm.kind = TSC_NORM_LOG;
    o.norm.vmin = 0;  /* invalid fixed log norm */
    CHECK(tsc_heatmap_render(&o, &pp, 1, &img, f) == TSC_ERR_ARG);
}

/* 7. Argument errors: text below 7 pt, a figure too small for its text, empty data. */
static void test_arg_errors(const tsc_heatmap_panel_t *p) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    tsc_heatmap_opts_init(&o);
    o.font_pt = 6;
    CHECK(tsc_heatmap_render(&o, p, 1, &img, f) == TSC_ERR_ARG && strstr(tsc_error_last(), "7"));
    tsc_heatmap_opts_init(&o);
    o.width_in = 0.6; o.height_in = 0.6;
    CHECK(tsc_heatmap_render(&o, p, 1, &img, f) == TSC_ERR_ARG);
    tsc_heatmap_opts_init(&o);
    tsc_heatmap_panel_t pe = {.data = NULL, .rows = 3, .cols = 3};
    CHECK(tsc_heatmap_render(&o, &pe, 1, &img, f) == TSC_ERR_ARG);
}

/* 8. Square cells (equal aspect) and long category labels (drawn vertically). */
static void test_aspect_and_labels(const tsc_heatmap_panel_t *p) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    cairo_surface_t *img = NULL;
    tsc_heatmap_opts_init(&o);
    o.equal_aspect = 1;
    o.width_in = 6.5;
    CHECK(tsc_heatmap_render(&o, p, 1, &img, f) == TSC_OK);
    CHECKF(fabs(f[0].plot_w / f[0].plot_h - (double)C / R) < 0.01, "plot %gx%g for %dx%d cells", f[0].plot_w,
           f[0].plot_h, R, C);
    cairo_surface_destroy(img);
    const char *names[4] = {"layer 0 W_Q", "layer 0 W_K", "bad UTF-8 \xff\xce", NULL};
    float w4[2 * 4] = {1, 2, 3, 4, 5, 6, 7, NAN};
    tsc_heatmap_panel_t pw = {.data = w4, .rows = 2, .cols = 4, .xtick_labels = names, .ytick_labels = names};
    tsc_heatmap_opts_init(&o);
    o.width_in = 1.6; o.height_in = 2.4;
    CHECK(tsc_heatmap_render(&o, &pw, 1, &img, f) == TSC_OK);
    CHECK_EQ_INT(f[0].n_nonfinite, 1);
    cairo_surface_destroy(img);
}

/* 9. Files: PNG (read back), SVG (well-formed XML), PDF (pdfinfo: page size in points). */
static void test_files(const tsc_heatmap_panel_t *p, const char *dir) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    int x, y;
    char path[256], cmd[512];
    tsc_heatmap_opts_init(&o);
    o.title = "planted \"cell\" <&>";  /* markup characters stay text */
    o.cbar_label = "value"; o.cbar_units = "ULP";
    snprintf(path, sizeof path, "%s/h.png", dir);
    CHECK(tsc_heatmap_write(&o, p, 1, path, TSC_IMG_AUTO, f) == TSC_OK);
    {   /* Permissions as for any new file (0666 & ~umask), not a temporary file's 0600. */
        mode_t um = umask(0);
        umask(um);
        struct stat sb;
        CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == (0666 & ~um));
    }
    cairo_surface_t *back = cairo_image_surface_create_from_png(path);
    CHECK(cairo_surface_status(back) == CAIRO_STATUS_SUCCESS);
    CHECK_EQ_INT(cairo_image_surface_get_width(back), 975);
    CHECK_EQ_INT(cairo_image_surface_get_height(back), 780);
    cell_centre(&f[0], R, C, 11, 29, &x, &y);
    CHECK_EQ_U32(px(back, x, y), tsc_cmap_argb(TSC_CMAP_VIRIDIS, 1));
    cairo_surface_destroy(back);
    snprintf(path, sizeof path, "%s/h.svg", dir);
    CHECK(tsc_heatmap_write(&o, p, 1, path, TSC_IMG_AUTO, f) == TSC_OK);
    CHECK(f[0].plot_w > 0 && f[0].plot_w < 234);  /* points, inside a 234 pt wide page */
    if (has_tool("xmllint")) {
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
        CHECK(system(cmd) == 0);
    }
    snprintf(path, sizeof path, "%s/h.pdf", dir);
    CHECK(tsc_heatmap_write(&o, p, 1, path, TSC_IMG_AUTO, f) == TSC_OK);
    if (has_tool("pdfinfo")) {
        snprintf(cmd, sizeof cmd, "pdfinfo '%s' 2>&1", path);
        FILE *pi = popen(cmd, "r");
        char line[256];
        int size_ok = 0;
        while (pi && fgets(line, sizeof line, pi))
            if (strstr(line, "Page size:") && strstr(line, "234 x 187.2 pts")) size_ok = 1;
        CHECK(pi && pclose(pi) == 0);
        CHECK(size_ok);
    }
}

/* 9 (cont.). Reproducible PDF bytes, and write errors that leave no file behind. */
static void test_file_repro_and_errors(const tsc_heatmap_panel_t *p, const char *dir) {
    tsc_heatmap_opts_t o;
    tsc_heatmap_info_t f[4];
    char path[256], cmd[512];
    tsc_heatmap_opts_init(&o);
    o.title = "planted \"cell\" <&>";
    o.cbar_label = "value"; o.cbar_units = "ULP";
    /* Reproducible: with SOURCE_DATE_EPOCH the same figure gives the same PDF bytes. */
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
    snprintf(path, sizeof path, "%s/h.pdf", dir);
    CHECK(tsc_heatmap_write(&o, p, 1, path, TSC_IMG_AUTO, f) == TSC_OK);
    snprintf(cmd, sizeof cmd, "%s/h2.pdf", dir);
    sleep(1);  /* a different wall-clock second */
    CHECK(tsc_heatmap_write(&o, p, 1, cmd, TSC_IMG_AUTO, f) == TSC_OK);
    {
        char c2[1300];
        snprintf(c2, sizeof c2, "cmp -s '%s' '%s'", path, cmd);
        CHECK(system(c2) == 0);
    }
    unsetenv("SOURCE_DATE_EPOCH");
    /* Unknown extension, unwritable directory: errors naming the path, no file left behind. */
    snprintf(path, sizeof path, "%s/h.bmp", dir);
    CHECK(tsc_heatmap_write(&o, p, 1, path, TSC_IMG_AUTO, f) == TSC_ERR_ARG && strstr(tsc_error_last(), "h.bmp"));
    snprintf(path, sizeof path, "%s/no/such/dir/h.png", dir);
    CHECK(tsc_heatmap_write(&o, p, 1, path, TSC_IMG_AUTO, f) == TSC_ERR_IO && strstr(tsc_error_last(), "no/such"));
    snprintf(cmd, sizeof cmd, "test $(ls '%s' | wc -l) -eq 4 && rm -r '%s'", dir, dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    float *a = calloc(R * C, sizeof *a);
    a[11 * C + 29] = 1.0f;   /* hot */
    a[30 * C + 5] = -1.0f;   /* cold */
    tsc_heatmap_panel_t p = {.data = a, .rows = R, .cols = C, .title = "planted", .xlabel = "key", .ylabel = "query"};
    if (!test_planted(&p)) return tsc_test_done();
    test_diverging(a, &p);  /* leaves the hot cell at 4 for the cases below */
    test_masks();
    test_pooling();
    test_grid();
    test_fixed_norms();
    test_arg_errors(&p);
    test_aspect_and_labels(&p);
    char dir[] = "/tmp/tsc-heatmap-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    test_files(&p, dir);
    test_file_repro_and_errors(&p, dir);
    free(a);
    return tsc_test_done();
}
