#!/usr/bin/env python3
"""PyTorch's training speed for the GPT-2 model `tilescope train` trains: the baseline the
trainer's benchmark is compared with, on the same CPU with the same thread count.

The model is the GPT-2 architecture of train/tsc_model.h written with plain torch 1.13 ops
(torch 1.13 has no scaled_dot_product_attention, so attention is written out as it would be
without a fused kernel):
  token + learned position embeddings; per block, pre-LN (eps 1e-5) ->
  causal multi-head attention with separate q, k, v, o Linear layers (bias),
  att = (q @ k^T) * 1/sqrt(D), causal mask, softmax, @ v -> residual;
  LN -> Linear(C, ff) -> GELU(tanh) -> Linear(ff, C) -> residual;
  final LN, head tied to the token embedding, cross-entropy.
AdamW: lr 3e-4, betas (0.9, 0.95), weight decay 0.1 on matrices (embeddings and Linear
weights), none on biases and LayerNorm. --bf16 runs forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16); backward and the optimizer stay as autocast
leaves them (FP32 master weights). What CPU autocast does in torch 1.13 (checked op by op):
Linear and @ take BF16 operands and give BF16 outputs; the mask, softmax and GELU then run on
those BF16 tensors; the residual stream stays FP32 (FP32 + BF16 promotes), so LayerNorm runs
in FP32; cross-entropy runs in FP32.

Tokens are uniform random ids (the speed does not depend on them), or random windows of a
text file read byte-level with --text (then --vocab must be >= 256).

Only steps after --warmup are timed. Prints one JSON line:
  {"tokens_per_s": ..., "ms_per_step": ..., "threads": ..., "precision": "fp32"|"bf16",
   "loss_first": ..., "loss_last": ..., "params": ..., "timed_steps": ...}

    /usr/bin/python3 bench/train_torch.py --layers 6 --heads 6 --dim 192 --ff 768 --vocab 256 \\
        --ctx 256 --batch 8 --steps 20 --warmup 3 --threads 2 [--bf16]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, ff, ctx):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim, eps=1e-5)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-5)
        self.fc = nn.Linear(dim, ff)
        self.proj = nn.Linear(ff, dim)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)), persistent=False)

    def attention(self, x):
        B, T, C = x.shape
        H, D = self.heads, C // self.heads
        q, k, v = (lin(x).view(B, T, H, D).transpose(1, 2) for lin in (self.q, self.k, self.v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.o(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.dim)
        self.wpe = nn.Embedding(a.ctx, a.dim)
        self.blocks = nn.ModuleList(Block(a.dim, a.heads, a.ff, a.ctx) for _ in range(a.layers))
        self.ln_f = nn.LayerNorm(a.dim, eps=1e-5)
        for m in self.modules():  # GPT-2's initialisation: N(0, 0.02) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # the head tied to the token embedding
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def optimizer(model):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=3e-4, betas=(0.9, 0.95))


def batches(a, gen):
    """Yields (x, y) [batch, ctx] int64: random ids, or random windows of --text's bytes."""
    data = None
    if a.text:
        with open(a.text, "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
        if data.numel() < a.ctx + 1:
            sys.exit(f"train_torch: {a.text}: {data.numel()} bytes, fewer than --ctx + 1 = {a.ctx + 1}")
    while True:
        if data is None:
            seq = torch.randint(0, a.vocab, (a.batch, a.ctx + 1), generator=gen)
        else:
            starts = torch.randint(0, data.numel() - a.ctx, (a.batch,), generator=gen)
            seq = torch.stack([data[s:s + a.ctx + 1] for s in starts.tolist()])
        yield seq[:, :-1], seq[:, 1:]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default, what in [("layers", 6, "transformer blocks"), ("heads", 6, "attention heads"),
                                ("dim", 192, "model width C"), ("ff", 768, "MLP width (4C in GPT-2)"),
                                ("vocab", 256, "vocabulary size"), ("ctx", 256, "sequence length T"),
                                ("batch", 8, "sequences per step B"), ("steps", 20, "steps in all"),
                                ("warmup", 3, "first steps not timed"),
                                ("threads", os.cpu_count() or 1, "torch.set_num_threads"),
                                ("seed", 1337, "initialisation and data seed")]:
        p.add_argument("--" + name, type=int, default=default, help=f"{what} (default {default})")
    p.add_argument("--bf16", action="store_true", help="forward and loss under CPU autocast to bfloat16")
    p.add_argument("--text", help="train on random windows of this file's bytes instead of random ids")
    a = p.parse_args()
    if min(a.layers, a.heads, a.dim, a.ff, a.vocab, a.ctx, a.batch, a.threads) < 1 or a.dim % a.heads:
        p.error("every size must be positive and --dim a multiple of --heads")
    if a.warmup < 0 or a.steps <= a.warmup:
        p.error("--steps must exceed --warmup (>= 0): the steps after warmup are the ones timed")
    if a.text and a.vocab < 256:
        p.error("--text is read byte-level: --vocab must be at least 256")
    return a


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = GPT(a)
    opt = optimizer(model)
    data = batches(a, torch.Generator().manual_seed(a.seed))
    losses, t_start = [], None
    for step in range(a.steps):
        if step == a.warmup:
            t_start = time.perf_counter()
        x, y = next(data)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # .item() waits for the step, so the clock sees all of it
    elapsed = time.perf_counter() - t_start
    timed = a.steps - a.warmup
    ms = 1e3 * elapsed / timed
    print(json.dumps({"tokens_per_s": round(a.batch * a.ctx * timed / elapsed, 1), "ms_per_step": round(ms, 2),
                      "threads": a.threads, "precision": "bf16" if a.bf16 else "fp32",
                      "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4),
                      "params": sum(p.numel() for p in model.parameters()), "timed_steps": timed,
                      "backend": backend_settings()}))


def backend_settings():
    """What decides this baseline's speed on a machine: torch's BLAS, oneDNN and CPU capability, and threads."""
    cfg = torch.__config__.show()
    blas = [ln.split("BLAS_INFO=", 1)[1].split(",")[0] for ln in cfg.splitlines() if "BLAS_INFO=" in ln]
    mkldnn = [ln.strip() for ln in cfg.splitlines() if "MKL-DNN" in ln or "oneDNN" in ln]
    cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") and \
        hasattr(torch.backends.cpu, "get_cpu_capability") else "unknown"
    return {"torch": torch.__version__, "blas": blas[0] if blas else "unknown",
            "onednn": mkldnn[0] if mkldnn else "none", "cpu_capability": cap,
            "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "mkldnn_enabled": torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled}


if __name__ == "__main__":
    main()
