#!/usr/bin/python3
"""Baseline of bench_diagnose.sh: the core metrics of `tilescope diagnose` in numpy/torch (CPU).

For every step, layer and head of a dump: the hp replay (FP32 attention forward, delta =
rowsum(dO * O)), the lp replay (the official PyTorch FA2 code's BF16 semantics, docs/MECHANISM.md section 3:
BF16 scores times the scale, BF16 row max and row sum, FP32 exp, P-bar cast to BF16 for a
P-bar V einsum with a BF16 result, BF16 O accumulator across key tiles, causal), and the
statistics of issue 4 items 1a and 1b: max/mean abs and rel error of O and delta, error in BF16
ULPs, signed mean, sign consistency, t-statistic, exact two-sided sign-test p, per-feature bias,
sum_T(delta_lp - delta_hp) and its cumulative sum over steps; rows with two or more maxima
(exactly and within 1e-3), P-bar = 1 counts and sink counts. Heads of a layer are processed
together (vectorised over heads), one key tile at a time.

usage: bench_diagnose_torch.py DUMP OUT.json [THREADS]
"""
import json
import math
import os
import resource
import sys
import time

import h5py
import numpy as np
import torch


def sign_test_p(n_pos, n_neg):
    """Two-sided exact binomial sign test, log-space tail sum (as tilescope's)."""
    n = n_pos + n_neg
    k = max(n_pos, n_neg)
    if n == 0 or 2 * k == n:
        return 1.0
    j = np.arange(k, n + 1, dtype=np.float64)
    logc = math.lgamma(n + 1) - np.array([math.lgamma(x + 1) + math.lgamma(n - x + 1) for x in j])
    lt = logc - n * math.log(2.0)
    m = lt.max()
    return min(1.0, 2.0 * math.exp(m) * float(np.exp(lt - m).sum()))


def err_stats(lp, hp):
    d = (lp - hp).double()
    ad = d.abs()
    nz = hp != 0
    rel = ad[nz] / hp[nz].double().abs()
    ulp = torch.exp2(torch.floor(torch.log2(hp.double().abs().clamp_min(2.0 ** -126))) - 7)
    u = d / ulp
    n_pos, n_neg = int((d > 0).sum()), int((d < 0).sum())
    n = d.numel()
    sd = float(d.std()) if n > 1 else 0.0
    return {
        "max_abs": float(ad.max()), "mean_abs": float(ad.mean()),
        "max_rel": float(rel.max()) if rel.numel() else 0.0, "mean_rel": float(rel.mean()) if rel.numel() else 0.0,
        "signed_mean": float(d.mean()), "mean_ulp": float(u.mean()), "mean_abs_ulp": float(u.abs().mean()),
        "sign_consistency": max(n_pos, n_neg) / max(1, n_pos + n_neg),
        "t_stat": float(d.mean()) / (sd / math.sqrt(n)) if sd > 0 else 0.0,
        "p_sign": sign_test_p(n_pos, n_neg),
    }


def lp_torch(q, k, v, alpha, bk):
    """bf16-torch forward for all heads: q, k, v [H, T, D] float32 (BF16 values). Returns O (float32)
    and the BF16 scores (float32 tensor, -inf masked) for the tie statistics."""
    H, T, D = q.shape
    qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()
    m = torch.full((H, T, 1), -float("inf"), dtype=torch.bfloat16)
    l = torch.zeros((H, T, 1), dtype=torch.bfloat16)
    acc = torch.zeros((H, T, D), dtype=torch.bfloat16)
    s_all = torch.empty((H, T, T), dtype=torch.float32)
    pbar_one = torch.zeros((H, T), dtype=torch.int64)
    rows = torch.arange(T).view(1, T, 1)
    for j0 in range(0, T, bk):
        j1 = min(T, j0 + bk)
        s = torch.einsum("htd,hsd->hts", qb, kb[:, j0:j1]) * alpha  # BF16 result
        cols = torch.arange(j0, j1).view(1, 1, -1)
        s = s.masked_fill(cols > rows, -float("inf"))
        s_all[:, :, j0:j1] = s.float()
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s.float() - m_new.float())
        c = torch.exp(m.float() - m_new.float()).nan_to_num(0.0)
        l = (c * l.float() + p.sum(-1, keepdim=True)).bfloat16()
        pb = p.bfloat16()
        pbar_one += (pb == 1).sum(-1)
        pv = torch.einsum("hts,hsd->htd", pb, vb[:, j0:j1])  # FP32 accumulate, BF16 result
        acc = (c * acc.float()).bfloat16() + pv
        m = m_new
    o = (acc.float() / l.float()).bfloat16().float()
    return o, s_all, pbar_one


def main():
    path, out = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else int(os.environ.get("OMP_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    f = h5py.File(path, "r")
    alpha = float(f.attrs["softmax_scale"])
    bk = int(f.attrs["tile_k"]) if "tile_k" in f.attrs else 64
    res, cum = [], {}
    for sname in sorted(k for k in f if k.startswith("step_")):
        for lname in sorted(k for k in f[sname] if k.startswith("layer_")):
            g = f[sname][lname]
            q = torch.from_numpy(g["q"].astype("float32")[()][0])
            k = torch.from_numpy(g["k"].astype("float32")[()][0])
            v = torch.from_numpy(g["v"].astype("float32")[()][0])
            do = torch.from_numpy(g["do"].astype("float32")[()][0])
            H, T, D = q.shape
            if k.shape[0] != H:  # GQA: repeat kv heads
                k = k.repeat_interleave(H // k.shape[0], 0)
                v = v.repeat_interleave(H // v.shape[0], 0)
            # hp replay: FP32
            s = torch.einsum("htd,hsd->hts", q, k) * alpha
            s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -float("inf"))
            o_hp = torch.softmax(s, -1) @ v
            del s
            d_hp = (do * o_hp).sum(-1)
            o_lp, s_lp, pbar_one = lp_torch(q, k, v, alpha, bk)
            d_lp = (do * o_lp).sum(-1)
            mx = s_lp.amax(-1, keepdim=True)
            at_max = s_lp == mx
            n_ex = at_max.sum(-1)
            n_eps = (s_lp >= mx - 1e-3).sum(-1)
            sinks = at_max.sum(1)  # [H, T keys]
            del s_lp, at_max
            for h in range(H):
                e = o_lp[h] - o_hp[h]
                ulp = torch.exp2(torch.floor(torch.log2(o_hp[h].double().abs().clamp_min(2.0 ** -126))) - 7)
                feat = (e.double() / ulp).mean(0)
                fp = [sign_test_p(int((e[:, i] > 0).sum()), int((e[:, i] < 0).sum())) for i in range(D)]
                dsum = float((d_lp[h] - d_hp[h]).double().sum())
                key = (lname, h)
                cum[key] = cum.get(key, 0.0) + dsum
                top = torch.topk(sinks[h], 4)
                res.append({
                    "step": sname, "layer": lname, "head": h,
                    "o": err_stats(o_lp[h], o_hp[h]), "delta": err_stats(d_lp[h], d_hp[h]),
                    "delta_sum": dsum, "delta_cumsum": cum[key],
                    "feature_bias_ulp": feat.tolist(), "feature_p": fp,
                    "rows_multi_max": int((n_ex[h] >= 2).sum()), "rows_multi_max_eps": int((n_eps[h] >= 2).sum()),
                    "pbar_one": int(pbar_one[h].sum()),
                    "sink_keys": top.indices.tolist(), "sink_counts": top.values.tolist(),
                })
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    json.dump({"heads": res, "seconds": wall, "peak_rss_kib": rss}, open(out, "w"))
    print(f"baseline: {len(res)} heads in {wall:.2f} s, peak RSS {rss / 1024:.0f} MiB, {threads} threads")


if __name__ == "__main__":
    main()
