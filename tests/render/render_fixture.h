/* A small analysis folder for the in-memory drawing tests: summary.json only (no analysis.h5, no
 * dump), so figure 1 draws its links as "no evidence" except the measured delta, and every other
 * recipe is absent without gnuplot ever running. extra_heads adds head records (longer tables). */
#ifndef RENDER_FIXTURE_H
#define RENDER_FIXTURE_H
#include <stdio.h>

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
    fputs("]}\n", f);
    return fclose(f);
}
#endif
