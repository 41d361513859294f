/* cmd_demo.c: `tilescope demo [-o DIR]`. */
#include "cli.h"

const char tsc_usage_demo[] = "usage: tilescope demo [-o DIR]\n";

int tsc_cmd_demo(int argc, char **argv) {
    (void)argc, (void)argv;
    return tsc_cli_fail("demo", "not available yet");
}
