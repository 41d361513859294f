#!/usr/bin/env python3
"""Bit-exact reference for PyTorch "eager" attention under BF16 CPU autocast.

Two independent computations of the same thing:

  torch_eager(q, k, v, dO, causal, Hkv)  -- real torch: nanoGPT's non-flash
      attention path (GQA by repeat_interleave of the kv heads) run under
      torch.autocast("cpu", dtype=torch.bfloat16), backward outside autocast.
  numpy_eager(q, k, v, dO, causal, Hkv)  -- a numpy formulation (float32
      arithmetic with explicit BF16 round-to-nearest-even) of the rounding
      points found by experiment on torch 1.13 (Debian build, oneDNN BF16
      matmul, ATen CPU kernels at AVX2 capability).

Both return a dict of float32 numpy arrays: o, dq, dk, dv, p (the softmax
output), plus intermediates s (scaled+masked scores), dp, da (gradient at
the scaled+masked scores = softmax backward output) and ds (gradient at the
raw scores q k^T).

Inputs: float32 arrays of shape q (B,H,T,D), k/v (B,Hkv,T,D), dO (B,H,T,D)
whose values are BF16-representable.  leaves="f32" makes q/k/v float32 leaf
tensors (grads come back float32); leaves="bf16" makes them bfloat16 leaves
(grads come back bfloat16), dO then bf16 too.

Arithmetic (see __main__ for measured agreement):
  S  = R(sum_d q*k)            oneDNN: FP32 accumulation of exact BF16
                               products, k order 1,0,3,2,5,4,... (vdpbf16ps
                               pair order) within blocks of 512 k, block
                               partial sums added in FP32, one rounding to BF16
  A  = R(S * R(1/sqrt(D)))     the Python scalar is first rounded to BF16
  A[masked] = -inf
  m  = max_j A ; e_j = expf(A_j - m) in FP32 (SLEEF expf_u10, 8-wide, for the
       first 8*floor(T/8) columns; libm expf for the tail columns)
  l  = FP32 sum: 8 lane accumulators over the full 8-blocks, tree horizontal
       reduce (i+4, i+2, i+1), then the tail columns added one by one
  P  = R(e_j * (1/l))          reciprocal in FP32, multiply in FP32, one rounding
  Y  = R(P V)                  as S
  dP = R(dO V^T)               as S
  sigma = R(sum_j dP_j*P_j)    FP32 (order as l; products exact), rounded to BF16
  dA = R(P * (dP - sigma))     FP32, one rounding;   dA[masked] = 0
  dS = R(dA * R(1/sqrt(D)))
  dQ = R(dS K), dK_rep = R(dS^T Q), dV_rep = R(P^T dO)   as S (K = T)
  GQA: dK[g] = sum over the H/Hkv repeated heads, in head order, in FP32
       without rounding (f32 leaves: repeat_interleave runs on the float32
       tensor before autocast's cast), or rounded to BF16 after each add
       (bf16 leaves).

Op dtypes under autocast (both leaf kinds): q@k^T, *scale, masked_fill,
softmax and p@v are bfloat16; every intermediate gradient is bfloat16; with
float32 leaves repeat_interleave runs in float32 (autocast casts k2/v2 at the
matmul) and dq/dk/dv come back float32, with bfloat16 leaves they are bfloat16.
o, p and dq are identical for both leaf kinds; dk/dv differ only when
H/Hkv >= 2 (FP32 head sum vs BF16 head sum).

Not pinned down by the data (every candidate tried gives the same bits):
the order of the FP32 sum sigma in the softmax backward (it is rounded to
BF16 before use), the scalar-tail exp (libm expf vs exp rounded from
float64), the GQA FP32 head-sum order, and how more than two 512-blocks of a
matmul reduction are combined (K > 1024 not measured).  torch 1.13 refuses
CPU autocast with float16 ("AutocastCPU only support Bfloat16").  One and two
torch threads gave identical bits.
"""
import math
import sys

import numpy as np

# ----------------------------------------------------------------- BF16 / FP32 helpers

def rb(x):
    """Round float32 to the nearest BF16 (ties to even), returned as float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    r = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    out = r.view(np.float32).copy()
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.nan
    return out


def _fma32(a, b, c):
    """Correctly rounded float32 fused multiply-add (via float64 round-to-odd)."""
    a = np.asarray(a, np.float32).astype(np.float64)
    b = np.asarray(b, np.float32).astype(np.float64)
    c = np.asarray(c, np.float32).astype(np.float64)
    p = a * b                       # exact: 24+24 bits < 53
    t = p + c
    bb = t - p
    err = (p - (t - bb)) + (c - bb)  # TwoSum error, exact
    t = np.asarray(t)
    odd = (t.view(np.uint64) & 1) == 1
    fix = (err != 0) & ~odd & np.isfinite(t)
    t = np.where(fix, np.nextafter(t, np.where(err > 0, np.inf, -np.inf)), t)
    return t.astype(np.float32)


_F = np.float32
_R_LN2F = _F(1.442695040888963407359924681001892137426645954152985934135449406931)
_L2UF = _F(0.693145751953125)
_L2LF = _F(1.428606765330187045e-06)
_EXP_C = [0.00139304355252534151077271, 0.00833336077630519866943359,
          0.0416664853692054748535156, 0.166666671633720397949219, 0.5]


def sleef_expf_u10(d):
    """SLEEF's expf_u10 (the vector exp of ATen's Vectorized<float>), FMA form."""
    d = np.asarray(d, np.float32)
    with np.errstate(all="ignore"):
        q = np.rint(d * _R_LN2F)
        qi = np.where(np.isfinite(q), q, 0).astype(np.int64)
        qf = qi.astype(np.float32)
        s = _fma32(qf, -_L2UF, d)
        s = _fma32(qf, -_L2LF, s)
        u = np.full(d.shape, _F(0.000198527617612853646278381), np.float32)
        for c in _EXP_C:
            u = _fma32(u, s, _F(c))
        u = (_F(1.0) + _fma32((s * s).astype(np.float32), u, s)).astype(np.float32)
        h = qi >> 1
        u = (u * np.ldexp(_F(1), h).astype(np.float32)).astype(np.float32)
        u = (u * np.ldexp(_F(1), qi - h).astype(np.float32)).astype(np.float32)
        u = np.where(d < _F(-104), _F(0), u).astype(np.float32)
        u = np.where(d > _F(100), _F(np.inf), u).astype(np.float32)
    return u


def _expf_scalar(d):
    """glibc expf stand-in for the scalar tail: exp in float64, rounded once."""
    with np.errstate(all="ignore"):
        return np.exp(np.asarray(d, np.float32).astype(np.float64)).astype(np.float32)


def _rowsum_vec8_tail(e):
    """FP32 sum over the last axis as ATen's BF16 softmax kernels do it (AVX2):
    8 lane accumulators over the full 8-column blocks, tree horizontal reduce,
    then the remaining columns added one at a time."""
    n = e.shape[-1]
    full = n - n % 8
    acc = np.zeros(e.shape[:-1] + (8,), np.float32)
    for s in range(0, full, 8):
        acc = (acc + e[..., s:s + 8]).astype(np.float32)
    while acc.shape[-1] > 1:
        h = acc.shape[-1] // 2
        acc = (acc[..., :h] + acc[..., h:]).astype(np.float32)
    for j in range(full, n):
        acc = (acc + e[..., j:j + 1]).astype(np.float32)
    return acc  # (..., 1)


def bf16_matmul(a, b, kblock=512):
    """R_bf16 of an FP32 accumulation of exact BF16 products (oneDNN
    avx512_core_bf16 kernels): within each block of `kblock` consecutive k the
    products are added one by one in the pair-swapped order 1,0,3,2,...
    (vdpbf16ps pair order) into a fresh FP32 accumulator; the block partial
    sums are then added in FP32 in block order (measured for K <= 1024: K <= 512
    is one block, K = 800 and 1024 are two); one rounding to BF16 at the end.
    a (..., M, K), b (..., K, N), both BF16-valued float32."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    K = a.shape[-1]
    shape = np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1]))
    total = None
    for start in range(0, K, kblock):
        end = min(K, start + kblock)
        acc = np.zeros(shape, np.float32)
        for i in range(start, end, 2):
            for k in ([i + 1, i] if i + 1 < end else [i]):
                acc = (acc + a[..., :, k:k + 1] * b[..., k:k + 1, :]).astype(np.float32)
        total = acc if total is None else (total + acc).astype(np.float32)
    return rb(total)


def softmax_bf16(x):
    """ATen CPU softmax over the last axis of a BF16 tensor (values in float32)."""
    x = np.asarray(x, np.float32)
    n = x.shape[-1]
    full = n - n % 8
    m = x.max(-1, keepdims=True)
    d = (x - m).astype(np.float32)
    e = np.empty_like(d)
    e[..., :full] = sleef_expf_u10(d[..., :full])
    e[..., full:] = _expf_scalar(d[..., full:])
    l = _rowsum_vec8_tail(e)
    inv = (_F(1) / l).astype(np.float32)
    return rb(e * inv)


def softmax_bf16_backward(g, p):
    """ATen CPU softmax backward for BF16: R(p * (g - R(sum g*p)))."""
    g = np.asarray(g, np.float32)
    p = np.asarray(p, np.float32)
    sig = rb(_rowsum_vec8_tail((g * p).astype(np.float32)))
    return rb(p * (g - sig))

# ----------------------------------------------------------------- numpy formulation

def numpy_eager(q, k, v, dO, causal, Hkv, leaves="f32"):
    q = rb(q); k = rb(k); v = rb(v); dO = rb(dO)
    B, H, T, D = q.shape
    rep = H // Hkv
    k2 = np.repeat(k, rep, axis=1)
    v2 = np.repeat(v, rep, axis=1)
    alpha = rb(np.float32(1.0 / math.sqrt(D)))
    s = bf16_matmul(q, np.swapaxes(k2, -1, -2))
    a = rb(s * alpha)
    mask = None
    if causal:
        mask = ~np.tril(np.ones((T, T), bool))
        a = np.where(mask, np.float32(-np.inf), a).astype(np.float32)
    p = softmax_bf16(a)
    y = bf16_matmul(p, v2)
    dp = bf16_matmul(dO, np.swapaxes(v2, -1, -2))
    da = softmax_bf16_backward(dp, p)      # at masked columns: +-0 (sign of dP - sigma)
    dam = np.where(mask, np.float32(0), da).astype(np.float32) if causal else da
    ds = rb(dam * alpha)
    dq = bf16_matmul(ds, k2)
    dk2 = bf16_matmul(np.swapaxes(ds, -1, -2), q)
    dv2 = bf16_matmul(np.swapaxes(p, -1, -2), dO)

    def group_sum(g2):
        out = np.zeros((B, Hkv, T, D), np.float32)
        for h in range(H):
            acc = (out[:, h // rep] + g2[:, h]).astype(np.float32)
            out[:, h // rep] = rb(acc) if leaves == "bf16" else acc
        return out
    return dict(o=y, dq=dq, dk=group_sum(dk2), dv=group_sum(dv2), p=p, s=a, sraw=s, dp=dp, da=da, ds=ds)

# ----------------------------------------------------------------- real torch

def torch_eager(q, k, v, dO, causal, Hkv, leaves="f32", threads=1):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    dt = torch.bfloat16 if leaves == "bf16" else torch.float32
    def leaf(x):
        return torch.from_numpy(np.ascontiguousarray(x, np.float32)).to(dt).requires_grad_()
    qt, kt, vt = leaf(q), leaf(k), leaf(v)
    dOt = torch.from_numpy(np.ascontiguousarray(dO, np.float32)).to(dt)
    B, H, T, D = qt.shape
    keep = {}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        k2 = kt.repeat_interleave(H // Hkv, dim=1)
        v2 = vt.repeat_interleave(H // Hkv, dim=1)
        sraw = qt @ k2.transpose(-2, -1)
        sraw.retain_grad()
        att = sraw * (1.0 / math.sqrt(D))
        if causal:
            mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
            att = att.masked_fill(mask == 0, float("-inf"))
        att.retain_grad()
        p = F.softmax(att, dim=-1)
        p.retain_grad()
        y = p @ v2
    y.backward(dOt)
    f = lambda t: t.detach().float().numpy().copy()
    keep = dict(o=f(y), dq=f(qt.grad), dk=f(kt.grad), dv=f(vt.grad), p=f(p), s=f(att), sraw=f(sraw),
                dp=f(p.grad), da=f(att.grad), ds=f(sraw.grad),
                dtypes=dict(att=str(att.dtype), p=str(p.dtype), y=str(y.dtype),
                            dq=str(qt.grad.dtype), dk=str(kt.grad.dtype), dv=str(vt.grad.dtype)))
    return keep

# ----------------------------------------------------------------- comparison table


def torch_bf16_matmul_modelled():
    """Whether torch's CPU BF16 matmul on this machine is the one bf16-eager-cpu models (oneDNN's
    avx512_core_bf16 kernels: FP32 accumulation of exact products, one BF16 rounding; bf16_matmul
    above), measured on a probe product rather than guessed from CPU flags. torch 1.13 uses oneDNN
    for BF16 matmuls only on CPUs with AVX-512 (BW, VL, DQ); elsewhere (AVX2 machines) ATen's own
    BF16 gemm runs, which rounds partial sums to BF16, and no preset models it.
    Returns (modelled, share of the probe's elements bit-identical, in %)."""
    import torch
    rng = np.random.default_rng(7)
    a = rb(rng.standard_normal((2, 48, 256)).astype(np.float32))
    b = rb(rng.standard_normal((2, 256, 40)).astype(np.float32))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = (torch.from_numpy(a) @ torch.from_numpy(b)).float().numpy()
    share = 100.0 * float(np.mean(got.view(np.uint32) == bf16_matmul(a, b).view(np.uint32)))
    return share >= 99.0, share


NOT_MODELLED = ("torch's BF16 matmul on this CPU is not oneDNN's (%.1f%% of a probe product equal to FP32 "
                "accumulation with one rounding): ATen's fallback, which bf16-eager-cpu does not model")

def _ulpdiff(a, b):
    """Distance in BF16 ULPs for BF16-valued arrays; float32-only values
    (e.g. f32 GQA sums) are measured on their upper 16 bits."""
    def key(x):
        u = np.asarray(x, np.float32).view(np.int32).astype(np.int64)
        u = np.where(u < 0, -(u & 0x7FFFFFFF), u)
        return u
    return np.abs(key(a) - key(b)) / 65536.0


def compare(a, b):
    a = np.asarray(a, np.float32); b = np.asarray(b, np.float32)
    same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
    fin = np.isfinite(a) & np.isfinite(b)
    near = same | (fin & (_ulpdiff(np.where(fin, a, 0), np.where(fin, b, 0)) <= 1.0))
    return 100.0 * same.mean(), 100.0 * near.mean()


def make_inputs(B, H, Hkv, T, D, seed=0, score_std=2.5, score_mean=0.0):
    rng = np.random.default_rng(seed)
    # q.k/sqrt(D) has std sq*sk for unit-normal entries: pick sq = sk = sqrt(score_std)
    sc = math.sqrt(score_std)
    q = rng.standard_normal((B, H, T, D)).astype(np.float32) * sc
    k = rng.standard_normal((B, Hkv, T, D)).astype(np.float32) * sc
    if score_mean:  # a shared direction u: q + a*u, k +- a*u put every score near score_mean
        u = rng.standard_normal(D)
        u /= np.linalg.norm(u)
        a = math.sqrt(abs(score_mean) * math.sqrt(D))
        q = q + (a * u).astype(np.float32)
        k = k + (math.copysign(a, score_mean) * u).astype(np.float32)
    q, k = rb(q), rb(k)
    v = rb(rng.standard_normal((B, Hkv, T, D)).astype(np.float32))
    dO = rb(rng.standard_normal((B, H, T, D)).astype(np.float32))
    return q, k, v, dO


def main(argv):
    import torch
    leaves_list = ["f32", "bf16"]
    outs = ["p", "o", "dq", "dk", "dv"]
    print("torch %s  mkldnn.is_available=%s  mkldnn_bf16 matmul (avx512_core)  threads=1"
          % (torch.__version__, torch.backends.mkldnn.is_available()))
    print("%-5s %-22s %-7s" % ("leaf", "shape B,H,Hkv,T,D", "causal")
          + "".join("%16s" % (o + " bit%/<=1ulp%") for o in outs))
    worst = 100.0
    seed = 0
    for leaves in leaves_list:
        for (H, Hkv) in [(4, 2), (2, 2)]:
            for D in [64, 32]:
                for T in [64, 100, 257]:
                    for causal in [True, False]:
                        seed += 1
                        q, k, v, dO = make_inputs(1, H, Hkv, T, D, seed=seed)
                        rt = torch_eager(q, k, v, dO, causal, Hkv, leaves=leaves)
                        rn = numpy_eager(q, k, v, dO, causal, Hkv, leaves=leaves)
                        row = "%-5s %-22s %-7s" % (leaves, "1,%d,%d,%d,%d" % (H, Hkv, T, D), causal)
                        for o in outs:
                            bit, near = compare(rt[o], rn[o])
                            worst = min(worst, bit)
                            row += "%16s" % ("%.3f/%.3f" % (bit, near))
                        print(row, flush=True)
    print("worst bit-identical share: %.4f%%" % worst)
    return 0 if worst == 100.0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
