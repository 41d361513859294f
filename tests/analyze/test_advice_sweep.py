#!/usr/bin/env python3
"""test_advice_sweep.py: the stable-softmax beta sweep of `tilescope diagnose` against an
independent formulation of Algorithm 3 under the PyTorch code (bf16-torch), in numpy.

On a tiny synth dump (planted tied maxima drawn in [14, 16]), numpy recomputes the BF16 scores of
the examined head from the dump's q and k, and for every tie row (>= 2 exact maxima) walks the
key tiles as the official pure-PyTorch code does under autocast: per tile r_m and r_s, m = beta*r_m
(BF16) when r_s > 1, the kernel's fallback m = r_m + 1 when e^(r_m - m) rounds to 0 or 1 in BF16,
the running max, every tile's FP32 P-bar sum against that max, and the 1e-10 floor on each tile's
sum (fully masked tiles add the floor too). The fractions of rows where the fix, the fallback and a
floor that moves l by more than half a BF16 ULP happened must match summary.json's beta_sweep,
and the sweep's shape must follow from them: where the floor acts in every row the O error is
orders of magnitude above the bias; where the fallback acts in every row, the "beta" is the gap
rule, so two such betas give nearly the same ratio, of order one; where only the fix acts, the
ratio is of order one too. The exponent argument's spacing is the BF16 spacing of (1 - beta)*r_m.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
from tsc_testlib import Checks  # noqa: E402

TSC = os.environ["TSC"]
c = Checks()


def bf16(x):
    """Round float32 values to BF16, nearest-even, kept as float32."""
    x = np.atleast_1d(np.asarray(x, np.float32))
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) << np.uint64(16)
    return r.astype(np.uint32).view(np.float32)


def model_row(row, bk, beta, n_tiles):
    """One causal row of BF16 scores: (fix taken at the max tile, fallback there, floor moved l)."""
    mx = row.max()
    m = -np.inf
    fix = fallback = False
    sums = []
    for kt in range(n_tiles):
        st = row[kt * bk:(kt + 1) * bk]
        if st.size == 0:  # fully masked tile, visited by the PyTorch code: m_tile = 0 under +stable
            m = max(m, np.float32(0))
            sums.append(0.0)
            continue
        rm = st.max()
        rs = int((st >= bf16(rm - np.float32(1e-3))[0]).sum())
        mt = rm
        if rs > 1:
            mt = bf16(np.float32(beta) * rm)[0] if rm > 0 else np.float32(0)
            top = bf16(np.exp(bf16(rm - mt)))[0]
            if top in (0.0, 1.0):
                mt = bf16(rm + np.float32(1))[0]
                fallback |= rm == mx
            else:
                fix |= rm == mx
        m = max(m, mt)
        sums.append(float(np.exp(bf16(st - m)).astype(np.float32).sum(dtype=np.float32)))
    added = sum(max(0.0, 1e-10 - s) for s in sums)
    return fix, fallback, added > sum(sums) * 2.0 ** -8


with tempfile.TemporaryDirectory() as tmp:
    dump = os.path.join(tmp, "tiny.h5")
    out = os.path.join(tmp, "d")
    subprocess.run([TSC, "synth", "-o", dump, "--shape", "tiny", "--seed", "3", "--quiet"], check=True)
    betas = [1.5, 2, 3, 4, 8, 10]
    subprocess.run([TSC, "diagnose", dump, "-o", out, "-q", "--betas", ",".join("%g" % b for b in betas)],
                   check=True, stdout=subprocess.DEVNULL)
    s = json.load(open(os.path.join(out, "summary.json")))
    d = s["diagnosis"]
    c.check(d["beta_studied_range"] == [2, 8], "studied range %s" % d["beta_studied_range"])
    h = d["at_risk"][0]
    m = re.search(r"tile:q=\d+,k=(\d+)", s["lp"])
    bk = int(m.group(1)) if m else 512
    with h5py.File(dump, "r") as f:
        g = f["step_%08d/layer_%03d" % (h["step"], h["layer"])]
        alpha = np.float32(f.attrs["softmax_scale"])
        group = int(f.attrs["n_head"]) // int(f.attrs["n_kv_head"])
        q = bf16(g["q"][0, h["head"]]).astype(np.float64)
        k = bf16(g["k"][0, h["head"] // group]).astype(np.float64)
    S = bf16(bf16(q @ k.T) * alpha)
    T = S.shape[0]
    n_tiles = (T + bk - 1) // bk
    tie_rows = [t for t in range(T) if (S[t, :t + 1] == S[t, :t + 1].max()).sum() >= 2]
    c.check(len(tie_rows) > 10, "tie rows %d" % len(tie_rows))
    rm = np.array([S[t, :t + 1].max() for t in tie_rows])
    c.check(rm.min() >= 14 - 0.125 and rm.max() <= 16 + 0.125 and rm.max() - rm.min() > 1,
            "planted maxima vary within [14, 16]: %g..%g" % (rm.min(), rm.max()))
    sweep = {b["beta"]: b for b in h["beta_sweep"]}
    regime = {}
    for beta in betas:
        rows = [model_row(S[t, :t + 1], bk, beta, n_tiles) for t in tie_rows]
        n = len(rows)
        fix, fb, fl = (sum(r[i] for r in rows) / n for i in range(3))
        b = sweep[beta]
        c.check(b["n_tie_rows"] == n, "beta %g: %d tie rows, numpy %d" % (beta, b["n_tie_rows"], n))
        for key, want in (("frac_fix", fix), ("frac_fallback", fb), ("frac_floor", fl)):
            c.check(abs(b[key] - want) <= 1.0 / n + 1e-12, "beta %g: %s %g, numpy %g" % (beta, key, b[key], want))
        c.check(b["frac_split"] == 0, "beta %g: ties in one tile, split %g" % (beta, b["frac_split"]))
        x = (1 - beta) * float(rm.max())
        ulp = 2.0 ** (math.floor(math.log2(abs(x))) - 7)
        c.check(b["exparg_ulp"] == ulp, "beta %g: exp argument %g spaced %g, numpy %g" % (beta, x, b["exparg_ulp"], ulp))
        c.check(b["in_studied_range"] == (2 <= beta <= 8), "beta %g in range flag" % beta)
        regime[beta] = "fallback" if fb == 1 else "floor" if fl == 1 else "fix" if fix == 1 and fl == 0 else "mixed"
    # the planted case crosses every regime: the fix alone, the floor, the fallback
    c.check(regime[1.5] == "fix" and regime[4] == "floor" and regime[8] == "fallback", "regimes %s" % regime)
    for beta in betas:
        r = sweep[beta]["bias_ratio"]
        if regime[beta] == "floor":
            c.check(abs(r) > 10, "beta %g: floor in every row, ratio %g" % (beta, r))
        if regime[beta] == "fix":
            c.check(abs(r) < 3, "beta %g: the fix alone, ratio %g" % (beta, r))
    # the fallback betas replay the gap rule m = r_m + 1 at the maxima (other tiles with near-ties
    # of their own still take beta * their max, so the ratios agree closely, not bit for bit)
    fbs = [b for b in betas if regime[b] == "fallback"]
    fr = [sweep[b]["bias_ratio"] for b in fbs]
    c.check(len(fbs) >= 2 and max(fr) - min(fr) < 0.1 and max(abs(x) for x in fr) < 3,
            "fallback betas %s: ratios %s" % (fbs, fr))
    ex = d["sweep_explanation"]
    c.check("floor" in ex and "gap rule, not beta 8" in ex and "(outside the studied 2-8)" in ex, ex)
c.finish()
