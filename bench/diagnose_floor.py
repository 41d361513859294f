"""The FLOP floor of `tilescope diagnose` on a dump: the work its method needs, counted from the
formulas, at the machine's measured FMA peak (FP64 at half the FP32 rate: the same FMA units, half
the lanes). Prints one line per part and the total. Used by bench/bench_diagnose.sh.

usage: diagnose_floor.py DUMP ATTN_GFLOP PEAK_GFLOPS

ATTN_GFLOP: the attention replays' FP32 GFLOP, as `diagnose -v` counts them from the formulas
(every head's lp and hp forward and delta, the fit's forward, the at-risk heads' substitutions and
beta sweep). The other parts are counted here from the dump's geometry, per (step, layer, head):
  check (FP64)     8 D T' : the scores, their absolute sums, P V and P |V| (T' unmasked pairs)
  rank-1 (FP64)    2 T C D: dW^Q's terms x_t (x) dS_t K (where x is captured)
  spectral (FP64)  the Gram matrix of each weight's smaller side, k (k + 1) / 2 dot products of the
                   larger side's length; for W^Q also each head's D rows. The iterations on the
                   Gram matrix are left out (a floor)."""
import sys

import h5py


def main():
    dump, attn_gflop, peak = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    check = rank1 = spectral = 0.0
    with h5py.File(dump, "r") as f:
        for sname in f:
            if not sname.startswith("step_"):
                continue
            for lname in f[sname]:
                g = f[sname][lname]
                B, H, T, D = g["q"].shape
                pairs = T * (T + 1) / 2 if f.attrs.get("causal", 1) else T * T
                check += 8.0 * D * pairs * B * H
                if "x" in g:
                    rank1 += 2.0 * T * g["x"].shape[-1] * D * B * H
                for w in ("w_q", "w_k", "w_v", "w_o"):
                    if w in g:
                        r, c = g[w].shape
                        k, m = min(r, c), max(r, c)
                        spectral += k * (k + 1) / 2 * 2.0 * m
                        if w == "w_q":
                            spectral += H * D * (D + 1) / 2 * 2.0 * c
    fp64 = (check + rank1 + spectral) / 1e9
    t32, t64 = attn_gflop / peak, fp64 / (peak / 2)
    print(f"floor: attention {attn_gflop:.1f} GFLOP FP32; check {check / 1e9:.1f}, rank-1 {rank1 / 1e9:.1f}, "
          f"spectral {spectral / 1e9:.1f} GFLOP FP64; at {peak:.1f} GFLOP/s FP32 (FP64 half): "
          f"{t32:.2f} s + {t64:.2f} s = {t32 + t64:.2f} s")
    print(f"FLOOR_S={t32 + t64:.3f}")


if __name__ == "__main__":
    main()
