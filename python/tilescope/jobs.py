"""The CLI's jobs as functions returning parsed results. Each runs the tilescope program (so a
malformed dump fails in that process, with the CLI's containment, never in the caller's) and
parses its JSON: diagnose and analyze return summary.json (docs/FORMAT.md section 3), fit and
replay their --json object (sections 2.1 and 2), check its --json object (docs/CHECK.md), figure its --json object, report the paths it wrote. A failure raises
TilescopeError with the program's message."""
import json
import os
import subprocess
import warnings

from . import _lib


def _flags(opts):
    """--name value pairs from keyword arguments (name_with_underscores -> --name-with-dashes;
    True -> a bare flag, a list -> the flag repeated)."""
    args = []
    for key, value in opts.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            args += [flag] if v is True else [flag, str(v)]
    return args


POOR_FIT = 3  # diagnose's exit status when the replay does not reproduce the captured O (cli/cli.h)


def run(*args, ok=(0,)):
    """Runs `tilescope ARGS...`; returns its stdout (TilescopeError with stderr on failure). ok: the
    exit statuses that are not failures; a non-zero one among them warns with the program's stderr."""
    cmd = [_lib.program()] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 and r.returncode in ok:
        warnings.warn("tilescope %s: %s" % (args[0], r.stderr.strip()), stacklevel=3)
    elif r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip() or "exit status %d" % r.returncode)
        raise _lib.TilescopeError("tilescope %s: %s" % (args[0], msg), r.returncode)
    return r.stdout


def diagnose(dump, out_dir, **opts):
    """`tilescope diagnose DUMP -o OUT_DIR --json` (options as keyword arguments: lp="bf16-fa2",
    steps="0:10", max_heads=4, ...): the parsed summary.json. OUT_DIR also receives analysis.h5.
    When lp's replay does not reproduce the captured O (summary["diagnosis"]["fit"]["warning"]; the
    program's exit 3) it warns "the capture or the preset is wrong" with the likely causes."""
    return json.loads(run("diagnose", dump, "-o", out_dir, "--json", "--quiet", *_flags(opts), ok=(0, POOR_FIT)))


def analyze(dump, out_dir, **opts):
    """`tilescope analyze DUMP -o OUT_DIR`: the parsed summary.json."""
    run("analyze", dump, "-o", out_dir, "--quiet", *_flags(opts))
    with open(os.path.join(str(out_dir), "summary.json")) as f:
        return json.load(f)


def fit(dump, policies=None, **opts):
    """`tilescope fit DUMP [--policy P ...] --json`: which policy's replay reproduces the captured O."""
    return json.loads(run("fit", dump, "--json", *_flags(dict(opts, policy=policies))))


def check(dump, **opts):
    """`tilescope check DUMP --json` (steps=, layers=, heads=, batches= as keyword arguments): are the captured O
    and LSE attention's result on the captured q, k, v (docs/CHECK.md)? An inconsistency (exit status 4) is a
    result, `consistent` False with the heads, rows and tiles, not an error."""
    return json.loads(run("check", dump, "--json", "--quiet", *_flags(opts), ok=(0, 4)))


def replay(dump, policies, out, **opts):
    """`tilescope replay DUMP --policy P ... -o OUT --json`: the comparison object."""
    return json.loads(run("replay", dump, "-o", out, "--json", "--quiet", *_flags(dict(opts, policy=policies))))


def figure(fig, out, analysis_dir=None, logs=None, **opts):
    """`tilescope figure FIG --from ANALYSIS_DIR [--log SPEC ...] -o OUT --json` (step=, layer=, head=, batch=,
    token=, feature=, dpi=, ... as keyword arguments): {"id", "file", "caption", "layer", "head", "step",
    "width_in", "height_in", "marks"}. A selection the analysis does not cover raises TilescopeError naming
    the valid values (tsc_figure_check), never a figure of the nearest step."""
    where = [] if analysis_dir is None else ["--from", analysis_dir]
    return json.loads(run("figure", fig, *where, "-o", out, "--json", *_flags(dict(opts, log=logs))))


def report(analysis_dir, out_pdf, **opts):
    """`tilescope report DIR -o OUT.pdf`: {"pdf": path, "html": path or None}."""
    run("report", analysis_dir, "-o", out_pdf, "--quiet", *_flags(opts))
    html = str(out_pdf)[:-4] + ".html"
    return {"pdf": str(out_pdf), "html": html if os.path.exists(html) else None}
