"""Colour maps against matplotlib's (the reference values the issue names).

Loads the built libtilescope.so and calls tsc_cmap_eval through ctypes (as a binding would),
then compares:
  - viridis at t = i/255 with matplotlib's 256-entry viridis table: exact up to the 6 published
    decimals and float storage (tolerance 1e-6);
  - cool-warm with matplotlib's "coolwarm", which is Moreland's 33 published control points joined
    by straight lines in sRGB: at the control points (resampled(33)) within 2e-3 (a half 8-bit
    step; his table went through a slightly different sRGB matrix); at all 256 entries within 0.02,
    because ours follows his Msh curve between the points where matplotlib draws a chord, and the
    curve bends most near the saturated red end (measured worst 0.0175 at entry 252);
  - norms: linear/log/symmetric against matplotlib.colors.Normalize/LogNorm/CenteredNorm.
Exit 77 (skip) without matplotlib.
"""
import ctypes
import os
import sys

try:
    import numpy as np
    import matplotlib
    from matplotlib import colors
except ImportError as e:
    print("SKIP: matplotlib/numpy missing:", e)
    sys.exit(77)

VIRIDIS_TOL = 1e-6
COOLWARM_POINT_TOL = 2e-3  # at Moreland's control points
COOLWARM_TOL = 0.02        # between them: Msh curve vs matplotlib's straight chords
NORM_TOL = 1e-12

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks, load_library  # noqa: E402

lib = load_library()
checks = Checks()
check = checks.check

lib.tsc_cmap_eval.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.POINTER(ctypes.c_double)]
lib.tsc_cmap_eval.restype = None


class Norm(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("vmin", ctypes.c_double), ("vmax", ctypes.c_double)]


lib.tsc_norm_init.argtypes = [ctypes.POINTER(Norm), ctypes.c_int, ctypes.c_double, ctypes.c_double]
lib.tsc_norm_init.restype = ctypes.c_int
lib.tsc_norm_apply.argtypes = [ctypes.POINTER(Norm), ctypes.c_double]
lib.tsc_norm_apply.restype = ctypes.c_double

VIRIDIS, COOLWARM = 0, 1
LINEAR, LOG, SYMMETRIC = 0, 1, 2


def ours(cm, t):
    out = (ctypes.c_double * 3)()
    lib.tsc_cmap_eval(cm, t, out)
    return np.array(out[:])


for name, cm, tol in (("viridis", VIRIDIS, VIRIDIS_TOL), ("coolwarm", COOLWARM, COOLWARM_TOL)):
    ref = matplotlib.colormaps[name]
    worst, at = 0.0, None
    for i in range(256):
        t = i / 255.0
        # matplotlib's lookup table entry i is the colour at t = i / 255.
        theirs = np.array(ref(i)[:3])
        d = np.max(np.abs(ours(cm, t) - theirs))
        if d > worst:
            worst, at = d, i
    print("%s: max |ours - matplotlib| over 256 entries = %.3g (entry %s), tolerance %g" % (name, worst, at, tol))
    check(worst <= tol, "%s differs from matplotlib by %g at entry %s" % (name, worst, at))

ref = matplotlib.colormaps["coolwarm"].resampled(33)
worst = max(np.max(np.abs(ours(COOLWARM, k / 32.0) - np.array(ref(k)[:3]))) for k in range(33))
print("coolwarm: max |ours - Moreland control points| = %.3g, tolerance %g" % (worst, COOLWARM_POINT_TOL))
check(worst <= COOLWARM_POINT_TOL, "coolwarm control points differ by %g" % worst)

# Norms.
x = np.array([1e-7, 1e-6, 3e-5, 1e-3, 0.2, 0.9999, 1.0, 2.0])
n = Norm()
check(lib.tsc_norm_init(ctypes.byref(n), LOG, 1e-6, 1.0) == 0, "log norm init")
ref = np.clip(colors.LogNorm(1e-6, 1.0)(x), 0, 1)
got = np.array([lib.tsc_norm_apply(ctypes.byref(n), v) for v in x])
check(np.max(np.abs(got - ref)) <= NORM_TOL, "log norm vs LogNorm: %s vs %s" % (got, ref))
y = np.array([-3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 5.0])
check(lib.tsc_norm_init(ctypes.byref(n), SYMMETRIC, -2.0, 1.0) == 0, "symmetric norm init")
ref = np.clip(colors.CenteredNorm(vcenter=0.0, halfrange=2.0)(y), 0, 1)
got = np.array([lib.tsc_norm_apply(ctypes.byref(n), v) for v in y])
check(np.max(np.abs(got - ref)) <= NORM_TOL, "symmetric norm vs CenteredNorm: %s vs %s" % (got, ref))
check(lib.tsc_norm_init(ctypes.byref(n), LINEAR, -1.0, 3.0) == 0, "linear norm init")
ref = np.clip(colors.Normalize(-1.0, 3.0)(y), 0, 1)
got = np.array([lib.tsc_norm_apply(ctypes.byref(n), v) for v in y])
check(np.max(np.abs(got - ref)) <= NORM_TOL, "linear norm vs Normalize: %s vs %s" % (got, ref))

checks.finish()
