"""Shared pieces of the Python tests: pass/fail counting with the plain closing line ctest's
readers understand ("N passed, M failed"), the paths the test environment provides, and a PNG reader."""
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


def read_png(path, max_rows=None):
    """The first max_rows (None: all) RGB rows of an 8-bit RGB or RGBA PNG (the five filters), numpy
    [rows, w, 3]: a PNG decoded here, independently of the code under test."""
    import struct
    import zlib
    import numpy
    data = open(path, "rb").read()
    pos, idat = 8, b""
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    h = min(h, max_rows or h)
    out, prev = numpy.zeros((h, stride), numpy.int32), numpy.zeros(stride, numpy.int32)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = numpy.frombuffer(raw, numpy.uint8, stride, y * (stride + 1) + 1).astype(numpy.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        else:
            cur = numpy.zeros(stride, numpy.int32)
            for x in range(stride):
                a = cur[x - bpp] if x >= bpp else 0
                bb, cc = prev[x], prev[x - bpp] if x >= bpp else 0
                if f == 1:
                    pr = a
                elif f == 3:
                    pr = (a + bb) // 2
                else:
                    pp = a + bb - cc
                    pa, pb, pc = abs(pp - a), abs(pp - bb), abs(pp - cc)
                    pr = a if pa <= pb and pa <= pc else bb if pb <= pc else cc
                cur[x] = (line[x] + pr) & 255
        out[y], prev = cur, cur
    return out.reshape(h, w, bpp)[:, :, :3]
