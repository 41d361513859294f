/* Shared by the in-memory drawing tests: a small analysis folder (render_fixture_write) and pixel
 * probes of a drawn image (render_px, render_count_rgb). */
#ifndef RENDER_FIXTURE_H
#define RENDER_FIXTURE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cairo.h>

/* The RGB (no alpha) of pixel (x, y) of an ARGB32 image surface. */
static inline uint32_t render_px(cairo_surface_t *img, int x, int y) {
    const unsigned char *d = cairo_image_surface_get_data(img);
    return ((const uint32_t *)(const void *)(d + (size_t)y * cairo_image_surface_get_stride(img)))[x] & 0xffffff;
}

/* Pixels within tol levels of rgb in each channel inside [x0, x1) x [y0, y1). */
static inline long render_count_rgb(cairo_surface_t *img, int x0, int y0, int x1, int y1, uint32_t rgb, int tol) {
    cairo_surface_flush(img);
    long n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            uint32_t p = render_px(img, x, y);
            int ok = 1;
            for (int sh = 0; sh < 24; sh += 8) ok &= abs((int)((p >> sh) & 255) - (int)((rgb >> sh) & 255)) <= tol;
            n += ok;
        }
    return n;
}

/* A small analysis folder: summary.json only (no analysis.h5, no dump), so figure 1 draws its
 * links as "no evidence" except the measured delta, and every other recipe is absent without
 * gnuplot ever running. extra_heads adds head records (longer tables). */

static int render_fixture_write(const char *dir, int extra_heads) {
    char path[300];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs("{\"format\": \"tilescope-summary\", \"format_version\": 1, \"producer\": \"test\",\n"
          " \"dump\": \"/nonexistent/dump.h5\", \"lp\": \"bf16\", \"hp\": \"fp32\", \"selection\": \"all\",\n"
          " \"geometry\": {\"batch\": 1, \"n_head\": 2, \"n_kv_head\": 2, \"seq_len\": 16, \"head_dim\": 8,\n"
          "              \"d_model\": 16, \"softmax_scale\": 0.35},\n"
          " \"computed_over\": {\"steps\": 1, \"head_records\": 2, \"rows_per_head\": 16, \"step_list\": [0]},\n"
          " \"flag_rule\": {\"alpha\": 0.01},\n"
          " \"n_flagged_heads\": 0, \"flagged_heads\": [],\n"
          " \"heads\": [{\"step\": 0, \"layer\": 0, \"head\": 0, \"flagged\": false, \"delta\": {\"cumsum\": 0.5}},\n"
          "           {\"step\": 0, \"layer\": 0, \"head\": 1, \"flagged\": false, \"delta\": {\"cumsum\": -0.25}}", f);
    for (int i = 0; i < extra_heads; i++)
        fprintf(f, ",\n  {\"step\": 0, \"layer\": %d, \"head\": %d, \"flagged\": false, \"delta\": {\"cumsum\": 0.125}}",
                1 + i / 8, i % 8);
    /* the pooled records the analysis writes beside them, one per (layer, head) */
    fputs("],\n \"per_head\": [{\"layer\": 0, \"head\": 0, \"steps\": 1, \"flagged\": false, \"delta_biased_steps\": 0,"
          " \"delta_cumsum\": 0.5},\n  {\"layer\": 0, \"head\": 1, \"steps\": 1, \"flagged\": false,"
          " \"delta_biased_steps\": 0, \"delta_cumsum\": -0.25}", f);
    for (int i = 0; i < extra_heads; i++)
        fprintf(f, ",\n  {\"layer\": %d, \"head\": %d, \"steps\": 1, \"flagged\": false, \"delta_biased_steps\": 0, "
                   "\"delta_cumsum\": 0.125}", 1 + i / 8, i % 8);
    fputs("]}\n", f);
    return fclose(f);
}
#endif
