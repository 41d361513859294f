/* cmd_pack.c: `tilescope pack`: a capture-session folder (a run killed mid-capture, or one kept
 * with keep_session) into one dump file. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tsc_capture.h"

const char tsc_usage_pack[] =
    "usage: tilescope pack SESSION_DIR [-o FILE] [--keep]\n"
    "\n"
    "Packs a capture-session folder (FILE.capture/, left by a training run that was killed or that\n"
    "kept its session) into one dump file: every completed step; a step that was in flight when the\n"
    "run died is left out and named. Every command also reads the folder directly.\n"
    "\n"
    "  -o FILE    output dump (default: SESSION_DIR without its .capture suffix; written to a\n"
    "             temporary name, then renamed)\n"
    "  --keep     keep the folder after packing (default: remove it once the file is in place)\n"
    "\n"
    "Exit status: 0 packed, 1 the folder is not a readable session or the file cannot be written,\n"
    "2 usage error.\n";

int tsc_cmd_pack(int argc, char **argv) {
    const char *cmd = "pack", *dir = NULL, *out = NULL;
    int keep = 0, rc;
    const tsc_cli_flag_t flags[] = {{"--out", "-o", TSC_CLI_STR, &out, 0, 0}, {"--keep", NULL, TSC_CLI_ON, &keep, 0, 0}};
    if ((rc = tsc_cli_args(cmd, argc, argv, flags, TSC_CLI_NFLAGS(flags), NULL, NULL, 1, &dir))) return rc;
    if (!dir) return tsc_cli_usage_error(cmd, "which session folder? (SESSION_DIR)");
    char def[4096];
    if (!out) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        const char *suf = ".capture";
        size_t sl = strlen(suf);
        if (n <= sl || strncmp(dir + n - sl, suf, sl) != 0)
            return tsc_cli_usage_error(cmd, "%s does not end in .capture: name the output with -o FILE", dir);
        if (n - sl >= sizeof def) return tsc_cli_usage_error(cmd, "%s: path too long", dir);
        memcpy(def, dir, n - sl);
        def[n - sl] = '\0';
        out = def;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0) return tsc_cli_fail(cmd, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return tsc_cli_fail(cmd, "%s: not a capture-session folder", dir);
    if (tsc_capture_pack(dir, out, !keep) != TSC_OK) return tsc_cli_fail(cmd, "%s", tsc_error_last());
    printf("packed %s -> %s%s\n", dir, out, keep ? " (folder kept)" : "");
    return 0;
}
