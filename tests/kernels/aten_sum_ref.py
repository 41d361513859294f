#!/usr/bin/env python3
"""aten_sum_ref.py: the order in which torch.sum on the CPU adds a contiguous FP32 row, written in
Python from ATen's cascade sum (pytorch/pytorch aten/src/ATen/native/cpu/SumKernel.cpp: multi_row_sum,
row_sum, vectorized_inner_sum, scalar_inner_sum, cascade_sum), independently of tilescope's kernels.

A row of n floats with W-lane vectors (W = 8 for torch's AVX2 kernels, 16 for its AVX-512 ones):
  - n < W: row_sum over scalars;
  - else: row_sum over the n // W vectors (lane-wise adds), then a fresh sum takes the tail elements
    and the W lanes, in order;
  - row_sum over units u: units 4i + k go to accumulator k, cascaded over four levels of 2^lp units
    (lp = max(4, ceil(log2(n_units // 4)) // 4)); units past the last group of four go to
    accumulator 0; accumulators 1..3 are added into 0;
  - the result is added to the zero-filled output.
Every add is an FP32 add (numpy float32 scalars and arrays round each operation).

torch_sum_lanes() tells which W this process's torch uses, by comparing torch.sum with the formulation
on probe rows (ATEN_CPU_CAPABILITY=avx512 selects the 16-lane kernels on a CPU that has AVX-512).
"""
import math

import numpy as np

F32 = np.float32


def _ceil_log2(x):
    return 0 if x <= 1 else int(math.ceil(math.log2(x)))


def _multi_row_sum(load, nrows, size, zero):
    levels = 4
    lp = max(4, _ceil_log2(size) // levels)
    step, mask = 1 << lp, (1 << lp) - 1
    acc = [[zero() for _ in range(nrows)] for _ in range(levels)]
    i = 0
    while i + step <= size:
        for _ in range(step):
            for k in range(nrows):
                acc[0][k] = acc[0][k] + load(i, k)
            i += 1
        for j in range(1, levels):
            for k in range(nrows):
                acc[j][k] = acc[j][k] + acc[j - 1][k]
                acc[j - 1][k] = zero()
            if i & (mask << (j * lp)):
                break
    while i < size:
        for k in range(nrows):
            acc[0][k] = acc[0][k] + load(i, k)
        i += 1
    for j in range(1, levels):
        for k in range(nrows):
            acc[0][k] = acc[0][k] + acc[j][k]
    return acc[0]


def _row_sum(load1, size, zero):
    n4 = size // 4
    part = _multi_row_sum(lambda i, k: load1(i * 4 + k), 4, n4, zero)
    for i in range(n4 * 4, size):
        part[0] = part[0] + load1(i)
    for k in range(1, 4):
        part[0] = part[0] + part[k]
    return part[0]


def aten_sum(x, W):
    """torch.sum of the 1-D float32 row x on a CPU whose ATen kernels use W-lane vectors."""
    x = np.asarray(x, F32)
    n = len(x)
    if n < W:
        total = _row_sum(lambda i: x[i], n, lambda: F32(0))
    else:
        nv = n // W
        lanes = _row_sum(lambda i: x[i * W:(i + 1) * W], nv, lambda: np.zeros(W, F32))
        total = F32(0)
        for e in range(nv * W, n):
            total = F32(total + x[e])
        for w in range(W):
            total = F32(total + lanes[w])
    return F32(F32(0) + total)


def torch_sum_lanes(rows=24):
    """8 or 16: the W whose formulation equals torch.sum on every probe row; None if neither does."""
    import torch
    rng = np.random.default_rng(5)
    ok = {8: True, 16: True}
    for r in range(rows):
        n = (40, 88, 512, 600, 3000)[r % 5]
        x = (rng.standard_normal(n) * np.exp(rng.standard_normal(n) * 3)).astype(F32)
        got = F32(torch.from_numpy(x).sum().item())
        for W in ok:
            ok[W] = ok[W] and aten_sum(x, W) == got
    hits = [W for W in ok if ok[W]]
    return hits[0] if len(hits) == 1 else None
