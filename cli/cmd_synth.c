/* cmd_synth.c: `tilescope synth -o FILE`: a dump with planted, documented structure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tsc_synth.h"

const char tsc_usage_synth[] =
    "usage: tilescope synth -o FILE [--shape NAME] [--seed N] [--steps SET] [--layers SET]\n"
    "                       [--seq-len T] [--batch B] [--ranks N] [--no-plant] [--policy P]\n"
    "                       [--deflate N] [--quiet]\n"
    "\n"
    "Writes a dump (format v1) with planted structure, deterministic for a seed: the test and demo\n"
    "input of replay, analyze and figure.\n"
    "\n"
    "  -o FILE          output dump (written to a temporary name, then renamed)\n"
    "  --shape NAME     tiny (default) | gpt2-small | llama-gqa (below)\n"
    "  --seed N         integer in [0, 2^62], default 1\n"
    "  --steps SET      steps to write (N | start:stop[:stride] | a,b,...), default: the shape's\n"
    "  --layers SET     layers to write, default all (e.g. --layers 1: only the planted layer)\n"
    "  --seq-len T      sequence length instead of the shape's (long-context dumps, T <= 131072)\n"
    "  --batch B        sequences per step instead of the shape's 1 (rows drawn independently)\n"
    "  --ranks N        a data-parallel run of N ranks: FILE is the manifest, FILE's name with\n"
    "                   .rank<r>.h5 each rank's dump with B/N of the rows (N divides B); the rows\n"
    "                   hold the values of the one dump (docs/DISTRIBUTED.md)\n"
    "  --no-plant       plain random structure everywhere (no ties, no sign bias): for\n"
    "                   false-positive tests; the planted_* attributes are then empty\n"
    "  --policy P       precision policy o and lse are computed under (default bf16-torch with\n"
    "                   the shape's tiles); stored in the root attribute 'policy'\n"
    "  --deflate N      lossless compression level 0..9 (default 0, none)\n"
    "  -q, --quiet      do not print the configuration line or the progress\n"
    "Progress (with the time left) goes to stderr: a bar on a terminal, else a line every 10%.\n"
    "\n"
    "Shapes (layers and heads 0-based):\n"
    "  tiny        B=1, 2 layers, 4 heads, T=64, D=16, C=64, tiles 16, steps 0:3.\n"
    "              Planted: layer 1, heads 1,3; tie keys 0 (sink) and 8; features 4,9;\n"
    "              x channels 45,56.\n"
    "  gpt2-small  B=1, 12 layers, 12 heads, T=1024, D=64, C=768, tiles 512, step 0.\n"
    "              Planted: layer 1, heads 0,6,7,8,10,11 (the paper's 1,7,8,9,11,12 1-based);\n"
    "              tie keys 0 and 128; features 20,57; x channels 546,678.\n"
    "  llama-gqa   B=1, 4 layers, 8 query heads on 2 kv heads, T=256, D=64, C=512, tiles 64,\n"
    "              steps 0:2. Planted: layer 1, heads 1,2 (kv head 0); tie keys 0 and 32;\n"
    "              features 20,57; x channels 364,452.\n"
    "\n"
    "What is planted, in the planted layer and heads (docs/FORMAT.md section 1.6):\n"
    "  - planted rows t = p, p+2, p+4, ... (p = the second tie key) have exactly two maxima in\n"
    "    their scores, at the sink key 0 and at key p: the two key vectors are bit-identical, so\n"
    "    alpha*q.k ties in any arithmetic (tied score 14); every other visible score is at least\n"
    "    11 below (docs/MECHANISM.md section 5: the non-tied mass stays below half an ULP of the sum, so\n"
    "    a bf16-torch replay rounds the tied P*V sums down: a negative bias);\n"
    "  - V of the planted kv heads: the planted features ~ N(-2.2, 0.4) at every token;\n"
    "  - dO of the planted heads: negative at the planted features, 1e-3 * N(-1, 0.25);\n"
    "  - x: channels c1, c2 carry +4 and -3 at every token (shared columns of (PK)^T X);\n"
    "    w_q of the planted heads has an extra rank-1 part along them (largest spectral norm).\n"
    "Every other row has a unique maximum (margin >= 1 after BF16 rounding); V, dO elsewhere\n"
    "~ N(0,1) (dO x 1e-3): no ties and no sign bias. Stored: q k v o do x w_q w_k w_v w_o in\n"
    "bf16, lse in fp32; o and lse from the CPU reference under the policy. The planted lists\n"
    "are root attributes planted_layers, planted_heads, planted_kv_heads, planted_features,\n"
    "planted_sink_keys, planted_tie_keys, planted_rows_start, planted_rows_stride,\n"
    "planted_x_channels (see `tilescope info`).\n";

/* The synthesis' callback into the progress on stderr: (step, layer) pairs written. */
static void progress(void *ctx, int done, int total) { tsc_cli_progress_report(ctx, "(step, layer) pairs written", done, total); }

int tsc_cmd_synth(int argc, char **argv) {
    tsc_synth_opts_t o;
    tsc_synth_opts_init(&o);
    const char *out = NULL;
    int quiet = 0;
    long long seed = -1;
    const tsc_cli_flag_t flags[] = {{"--output", "-o", TSC_CLI_STR, &out, 0, 0},
                                    {"--shape", NULL, TSC_CLI_STR, &o.shape, 0, 0},
                                    {"--seed", NULL, TSC_CLI_LLONG, &seed, 0, 4611686018427387904.0},
                                    {"--steps", NULL, TSC_CLI_STR, &o.steps, 0, 0},
                                    {"--layers", NULL, TSC_CLI_STR, &o.layers, 0, 0},
                                    {"--seq-len", NULL, TSC_CLI_INT, &o.seq_len, 1, 131072},
                                    {"--batch", NULL, TSC_CLI_INT, &o.batch, 1, 4096},
                                    {"--ranks", NULL, TSC_CLI_INT, &o.ranks, 1, 4096},
                                    {"--policy", NULL, TSC_CLI_STR, &o.policy, 0, 0},
                                    {"--deflate", NULL, TSC_CLI_INT, &o.deflate, 0, 9},
                                    {"--no-plant", NULL, TSC_CLI_OFF, &o.plant, 0, 0},
                                    {"--quiet", "-q", TSC_CLI_ON, &quiet, 0, 0}};
    int rc = tsc_cli_args("synth", argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 0, NULL);
    if (rc) return rc;
    if (seed >= 0) o.seed = (uint64_t)seed;
    if (!out) return tsc_cli_usage_error("synth", "no output file (-o FILE)");
    tsc_synth_shape_t sh;
    if (tsc_synth_shape_get(o.shape, &sh) != TSC_OK) return tsc_cli_usage_error("synth", "%s", tsc_error_last());
    if (!quiet)
        fprintf(stderr, "tilescope synth: %s, shape %s, seed %llu, steps %s, layers %s, %s%s\n", out, sh.name,
                (unsigned long long)o.seed, o.steps ? o.steps : sh.default_steps, o.layers ? o.layers : "all",
                o.plant ? "planted" : "no planted structure", o.deflate ? ", deflate" : "");
    tsc_cli_progress_t pr;
    if (tsc_cli_progress_init(&pr, "synth", quiet)) o.progress = progress, o.progress_ctx = &pr;
    tsc_status_t st = tsc_synth_write(out, &o);
    if (st == TSC_ERR_ARG) return tsc_cli_usage_error("synth", "%s", tsc_error_last());
    if (st != TSC_OK) return tsc_cli_fail("synth", "%s", tsc_error_last());
    return 0;
}
