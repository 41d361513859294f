#!/usr/bin/env python3
"""torch_fa2.py: the baseline of bench_attention: a pure-PyTorch tiled FlashAttention-2 in BF16,
written from docs/MECHANISM.md §3 (the approach of the paper's official attention.py: BF16 tensors for
scores, row max, row sums and the O accumulator; exp in FP32; P̄ cast to BF16 for P̄V), run on the
CPU. Forward and backward are explicit loops over tiles, as in a custom autograd Function.

Reads q, k, v, do (float32, [B, H, T, D] each, concatenated) from --input, times forward +
backward (best of --reps after one warm-up), writes O (float32) to --output-o, and prints one line
"RESULT fwd_bwd_s=<s> fwd_s=<s> threads=<n>". Fully masked causal tiles are skipped (the official
code visits them; skipping only makes this baseline faster).
"""
import argparse
import sys
import time

import numpy as np

try:
    import torch
except ImportError:
    print("SKIP: torch not importable (apt-get install python3-torch)")
    sys.exit(77)

bf16 = torch.bfloat16


def forward(q, k, v, causal, scale, bq, bk):
    B, H, T, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B, H, T, dtype=torch.float32)
    for i0 in range(0, T, bq):
        i1 = min(i0 + bq, T)
        qi = q[:, :, i0:i1]
        oi = torch.zeros_like(qi)                                   # Ō, BF16, updated in place
        li = torch.zeros(B, H, i1 - i0, 1, dtype=bf16)              # ℓ, BF16
        mi = torch.full((B, H, i1 - i0, 1), -float("inf"), dtype=bf16)  # m, BF16
        for j0 in range(0, T, bk):
            j1 = min(j0 + bk, T)
            if causal and j0 > i1 - 1:
                break
            s = (qi @ k[:, :, j0:j1].transpose(-1, -2)) * scale   # S, BF16
            if causal and j1 - 1 > i0:
                mask = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool).triu(i0 - j0 + 1)
                s.masked_fill_(mask, -float("inf"))
            mnew = torch.maximum(mi, s.amax(-1, keepdim=True))
            p = torch.exp((s - mnew).float())                      # P̄, FP32
            corr = torch.exp((mi - mnew).float())
            lnew = corr * li.float() + p.sum(-1, keepdim=True)
            oi.mul_(corr).add_(p.to(bf16) @ v[:, :, j0:j1])        # P̄V: BF16 out
            li.copy_(lnew)
            mi = mnew
        o[:, :, i0:i1] = oi / li
        lse[:, :, i0:i1] = (mi.float() + torch.log(li.float()))[..., 0]
    return o, lse


def backward(q, k, v, o, lse, do, causal, scale, bq, bk):
    B, H, T, D = q.shape
    dq = torch.zeros_like(q)
    dk = torch.zeros_like(k)
    dv = torch.zeros_like(v)
    delta = (do.float() * o.float()).sum(-1, keepdim=True)        # δ = rowsum(dO ∘ O)
    for i0 in range(0, T, bq):
        i1 = min(i0 + bq, T)
        qi, doi = q[:, :, i0:i1], do[:, :, i0:i1]
        for j0 in range(0, T, bk):
            j1 = min(j0 + bk, T)
            if causal and j0 > i1 - 1:
                break
            kj, vj = k[:, :, j0:j1], v[:, :, j0:j1]
            s = (qi @ kj.transpose(-1, -2)) * scale
            if causal and j1 - 1 > i0:
                mask = torch.ones(i1 - i0, j1 - j0, dtype=torch.bool).triu(i0 - j0 + 1)
                s.masked_fill_(mask, -float("inf"))
            p = torch.exp(s.float() - lse[:, :, i0:i1, None])
            dv[:, :, j0:j1] += p.to(bf16).transpose(-1, -2) @ doi
            dp = doi @ vj.transpose(-1, -2)
            ds = (p * (dp.float() - delta[:, :, i0:i1]) * scale).to(bf16)
            dq[:, :, i0:i1] += ds @ kj
            dk[:, :, j0:j1] += ds.transpose(-1, -2) @ qi
    return dq, dk, dv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", required=True)
    ap.add_argument("--output-o", required=True)
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--H", type=int, default=12)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--D", type=int, default=64)
    ap.add_argument("--causal", type=int, default=1)
    ap.add_argument("--scale", type=float, default=0.125)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    n = a.B * a.H * a.T * a.D
    x = np.fromfile(a.input, dtype=np.float32)
    if x.size != 4 * n:
        print("error: %s holds %d floats, expected %d" % (a.input, x.size, 4 * n), file=sys.stderr)
        sys.exit(1)
    shape = (a.B, a.H, a.T, a.D)
    q, k, v, do = (torch.from_numpy(x[i * n:(i + 1) * n].reshape(shape).copy()).to(bf16) for i in range(4))
    best = best_f = float("inf")
    with torch.no_grad():
        for rep in range(a.reps + 1):
            t0 = time.perf_counter()
            o, lse = forward(q, k, v, a.causal, a.scale, a.block, a.block)
            t1 = time.perf_counter()
            backward(q, k, v, o, lse, do, a.causal, a.scale, a.block, a.block)
            t2 = time.perf_counter()
            if rep > 0:
                best, best_f = min(best, t2 - t0), min(best_f, t1 - t0)
    o.float().numpy().astype(np.float32).tofile(a.output_o)
    print("RESULT fwd_bwd_s=%.6f fwd_s=%.6f threads=%d torch=%s" % (best, best_f, torch.get_num_threads(),
                                                                    torch.__version__))


if __name__ == "__main__":
    main()
