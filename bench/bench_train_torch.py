"""bench_train_torch.py: the PyTorch CPU baseline of bench_train_step.c: the same GPT-2 (pre-LN,
GELU tanh, tied embeddings, biases, causal softmax attention written out as nanoGPT's non-flash
path) at the same size, forward + backward per step, FP32 or BF16 autocast.
    python3 bench/bench_train_torch.py [MODEL_DIMS L,H,C,F,V,CTX] [B] [T] [fp32|bf16] [STEPS] [THREADS]
Default: gpt2-mini 6,6,192,768,256,256, B 8, T 256, fp32, 5 steps, 2 threads."""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H, Fd):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.q, self.k, self.v, self.o = (nn.Linear(C, C) for _ in range(4))
        self.up, self.down = nn.Linear(C, Fd), nn.Linear(Fd, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        h = self.ln1(x)
        q, k, v = (f(h).view(B, T, self.H, C // self.H).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        s = s.masked_fill(mask[:T, :T] == 0, float("-inf"))
        a = (F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.o(a)
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, H, C, Fd, V, ctx):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(ctx, C)
        self.blocks = nn.ModuleList(Block(C, H, Fd) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)))
        for p in self.parameters():  # the init of tsc_model_init: N(0, 0.02) matrices
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, tgt):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x, self.mask)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


def main():
    a = sys.argv[1:]
    L, H, C, Fd, V, ctx = (int(v) for v in (a[0] if a else "6,6,192,768,256,256").split(","))
    B = int(a[1]) if len(a) > 1 else 8
    T = int(a[2]) if len(a) > 2 else 256
    prec = a[3] if len(a) > 3 else "fp32"
    steps = int(a[4]) if len(a) > 4 else 5
    torch.set_num_threads(int(a[5]) if len(a) > 5 else 2)
    torch.manual_seed(0)
    m = GPT(L, H, C, Fd, V, ctx)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            loss = m(idx, tgt)
        loss.backward()
        return loss.item()

    step()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    t = (time.perf_counter() - t0) / steps
    print(f"torch {torch.__version__} {prec} B {B} T {T} threads {torch.get_num_threads()}: loss {loss:.4f}, "
          f"step {t * 1e3:.1f} ms, {B * T / t:.0f} tokens/s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
