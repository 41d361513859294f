"""python3 -m tilescope import FILE -o DUMP [--map PATTERN[=NAME] ...] [options]: tensors saved by
another program (.safetensors, .npz, .npy, torch .pt) into a dump (tilescope.importer: the library's
own readers; nothing in the file is run, and torch is not needed).
python3 -m tilescope COMMAND ... (any other command: demo, diagnose, report, ...) runs the tilescope
program the package uses (tilescope.program()) with those arguments; so does the `tilescope` script
that `pip install` puts on the environment's PATH (run_program)."""
import argparse
import os
import sys

from . import _lib
from .importer import default_maps, import_tensors


def _printable(s):
    """A name from a file, fit for a terminal: control characters as \\xNN."""
    return "".join("\\x%02x" % ord(ch) if ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0 else ch for ch in s)


def run_program(argv=None):
    """Replaces this process with the tilescope program, given argv (default: this command's arguments)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        prog = _lib.program()
    except _lib.TilescopeError as e:
        print("tilescope: %s" % e, file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(prog, [prog] + list(argv))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] != "import" and not argv[0].startswith("-"):
        return run_program(argv)
    ap = argparse.ArgumentParser(prog="python3 -m tilescope", epilog="any other command (demo, diagnose, "
                                 "report, ...) runs the tilescope program: python3 -m tilescope help")
    sub = ap.add_subparsers(dest="cmd", required=True)
    im = sub.add_parser("import", help="tensors from .safetensors/.npz/.npy/.pt into a dump")
    im.add_argument("file")
    im.add_argument("-o", "--out", required=True, help="the dump to write")
    im.add_argument("--map", action="append", dest="maps",
                    help="PATTERN[=NAME] with {step} {layer} {name} * (repeatable; default: %s)" % " ".join(default_maps()))
    im.add_argument("--step", type=int, default=0, help="the step of tensors whose map has no {step} (default 0)")
    im.add_argument("--no-causal", action="store_true", help="the attention had no causal mask")
    im.add_argument("--scale", type=float, help="softmax scale (default 1/sqrt(D))")
    im.add_argument("--policy", default="", help="the kernel's precision policy, recorded in the dump")
    im.add_argument("--layout", choices=("bhtd", "bthd"), default="bhtd",
                    help="axis order of q k v o do in the file (default bhtd: [B, H, T, D])")
    a = ap.parse_args(argv)
    try:
        r = import_tensors(a.file, a.out, maps=a.maps, step=a.step, causal=not a.no_causal, scale=a.scale,
                           policy=a.policy, layout=a.layout)
    except (_lib.TilescopeError, ValueError) as e:
        print("tilescope import: %s" % _printable(str(e)), file=sys.stderr)
        return 1
    print("import: %s -> %s: %d datasets, steps %s, layers %s%s" % (
        _printable(a.file), _printable(r["path"]), r["datasets"], r["steps"], r["layers"],
        "; skipped %d tensor%s no map selects: %s" % (len(r["skipped"]), "" if len(r["skipped"]) == 1 else "s",
                                                      ", ".join(map(_printable, r["skipped"][:8])))
        if r["skipped"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
