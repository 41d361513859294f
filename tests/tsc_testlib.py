"""Shared pieces of the Python tests: pass/fail counting with the plain closing line ctest's
readers understand ("N passed, M failed"), and the paths the test environment provides."""
import os
import sys


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what, file=sys.stderr)
        return ok

    def finish(self):
        """Prints the closing line and exits 1 if anything failed."""
        print("%d passed, %d failed" % (self.passed, self.failed))
        sys.exit(1 if self.failed else 0)


def build_dir():
    """The build folder (TSC_BUILD, else the folder of the tilescope binary TSC)."""
    return os.environ.get("TSC_BUILD") or os.path.dirname(os.environ["TSC"])


def load_library():
    """libtilescope.so from the build folder through ctypes, as a binding loads it. Exits 1 when
    it is missing or does not load: every build makes it. (tests/run_py.sh preloads the
    sanitizer runtime for a sanitized build.)"""
    import ctypes
    path = os.path.join(build_dir(), "libtilescope.so")
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        print("FAIL: cannot load %s: %s" % (path, e), file=sys.stderr)
        sys.exit(1)
