"""matplotlib side of bench_heatmap: imshow + colorbar + savefig of the same matrix at the same
size (3.25 x 2.6 in, 300 dpi), colour map (coolwarm, symmetric limits) and labels.

usage: mpl_heatmap.py RAW_F32 N OUT_PNG REPS   (prints "matplotlib: best <seconds> s ...")
"""
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main():
    raw, n, out, reps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    a = np.fromfile(raw, dtype=np.float32).reshape(n, n)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        vmax = float(np.nanmax(np.abs(a)))
        fig, ax = plt.subplots(figsize=(3.25, 2.6), dpi=300)
        im = ax.imshow(a, cmap="coolwarm", vmin=-vmax, vmax=vmax, interpolation="antialiased")
        ax.set_title("error map")
        ax.set_xlabel("feature")
        ax.set_ylabel("token")
        cb = fig.colorbar(im, ax=ax)
        cb.set_label("error")
        fig.savefig(out, dpi=300)
        plt.close(fig)
        best = min(best, time.perf_counter() - t0)
    print("matplotlib: best %.3f s of %d (imshow + colorbar + savefig, %s %s)" % (best, reps, matplotlib.__version__,
                                                                                   out.rsplit(".", 1)[-1].upper()))


if __name__ == "__main__":
    main()
