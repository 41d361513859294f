#!/usr/bin/env python3
"""Train a small transformer on CPU under BF16 autocast, capture its attention, diagnose, report.

    PYTHONPATH=python TILESCOPE_LIB=build python3 examples/torch_capture.py -o torch-out
    python3 examples/torch_capture.py --model llama -o torch-out-llama    # RoPE, RMSNorm, GQA, SwiGLU, SDPA
    python3 examples/torch_capture.py --model llama --attn tilescope --policy bf16-fa2 -o torch-out-fa2

The text is the King James Bible when Debian's bible-kjv is installed (`bible 'gen1:1-rev22:21'`),
else --text FILE, else this repository's own documentation. The nanoGPT-style model uses eager
attention (captured from c_attn / c_proj, recorded as bf16-eager-cpu); the Llama-style model is written
as people write one (RMSNorm, RoPE, grouped-query heads repeated by repeat_kv, a SwiGLU MLP) and calls
F.scaled_dot_product_attention (recorded as bf16-sdpa-math; on torch 1.13 importing tilescope.torch
provides it), or with --attn tilescope, tilescope.torch.attention under --policy (the kernel under
study). Writes
OUT/run.h5, OUT/diag/ (diagnose) and OUT/report.pdf (+ .html).
"""
import argparse
import glob
import math
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import tilescope
except ImportError:  # run from a source tree: the package beside it, the library in build/
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    os.environ.setdefault("TILESCOPE_LIB", os.path.join(HERE, "..", "build"))
    import tilescope
import tilescope.torch as tt  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def load_text(path):
    if path:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(), path
    if shutil.which("bible"):
        r = subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, text=True)
        if r.returncode == 0 and len(r.stdout) > 100000:
            return r.stdout, "bible-kjv"
    files = sorted(glob.glob(os.path.join(HERE, "..", "docs", "*.md"))) + [os.path.join(HERE, "..", "README.md")]
    text = "".join(open(f, encoding="utf-8", errors="replace").read() for f in files if os.path.isfile(f))
    return text, "this repository's documentation (install bible-kjv for the Bible)"


class NanoAttn(nn.Module):
    """nanoGPT's CausalSelfAttention (eager path)."""

    def __init__(self, C, H):
        super().__init__()
        self.n_head, self.c_attn, self.c_proj = H, nn.Linear(C, 3 * C), nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class RMSNorm(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * self.weight


def rope(x, base=10000.0):
    B, H, T, D = x.shape
    ang = torch.arange(T, dtype=torch.float32)[:, None] / base ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
    cos, sin = (torch.cat([f(ang)] * 2, -1).to(x.dtype) for f in (torch.cos, torch.sin))
    return x * cos + torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1) * sin


class LlamaAttn(nn.Module):
    """HF-Llama-style attention: q/k/v/o projections, RoPE, grouped-query heads."""

    def __init__(self, C, H, Hkv, attn, policy):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.head_dim, self.attn, self.policy = H, Hkv, C // H, attn, policy
        D = C // H
        self.q_proj, self.k_proj = nn.Linear(C, H * D, bias=False), nn.Linear(C, Hkv * D, bias=False)
        self.v_proj, self.o_proj = nn.Linear(C, Hkv * D, bias=False), nn.Linear(H * D, C, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        H, Hkv, D = self.num_heads, self.num_key_value_heads, self.head_dim
        q = rope(self.q_proj(x).view(B, T, H, D).transpose(1, 2))
        k = rope(self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2))
        v = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)
        if self.attn == "tilescope":  # the kernel under study, grouped-query heads without repeating k, v
            o = tt.attention(q, k, v, causal=True, policy=self.policy)
        else:  # HF's repeat_kv: each kv head repeated over its group of query heads, then SDPA
            k, v = (t.repeat_interleave(H // Hkv, dim=1) for t in (k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, H * D))


class SwiGLU(nn.Module):
    """Llama's MLP: down(silu(gate(x)) * up(x))."""

    def __init__(self, C, F_):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(C, F_, bias=False), nn.Linear(C, F_, bias=False)
        self.down_proj = nn.Linear(F_, C, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Model(nn.Module):
    def __init__(self, kind, V, C, H, L, T, attn, policy):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, C), nn.Embedding(T, C) if kind == "nanogpt" else None
        if kind == "nanogpt":
            self.norms = nn.ModuleList([nn.LayerNorm(C) for _ in range(2 * L)])
            self.attn = nn.ModuleList([NanoAttn(C, H) for _ in range(L)])
        else:
            self.norms = nn.ModuleList([RMSNorm(C) for _ in range(2 * L)])
            self.attn = nn.ModuleList([LlamaAttn(C, H, max(1, H // 2), attn, policy) for _ in range(L)])
        if kind == "nanogpt":
            self.mlp = nn.ModuleList([nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C)) for _ in range(L)])
        else:  # 8/3 C hidden, as Llama sizes SwiGLU to match a 4 C GELU MLP's parameters
            self.mlp = nn.ModuleList([SwiGLU(C, 8 * C // 3) for _ in range(L)])
        self.head = nn.Linear(C, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        if self.pos is not None:
            x = x + self.pos(torch.arange(idx.shape[1]))
        for i, (a, m) in enumerate(zip(self.attn, self.mlp)):
            x = x + a(self.norms[2 * i](x))
            x = x + m(self.norms[2 * i + 1](x))
        return self.head(x)


def train_step(model, opt, data, B, T):
    """One AdamW step on B random windows of T+1 characters of data, under CPU BF16 autocast; the loss."""
    ix = torch.randint(0, len(data) - T - 1, (B,))
    xb, yb = torch.stack([data[i:i + T] for i in ix]), torch.stack([data[i + 1:i + T + 1] for i in ix])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(xb)
    loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), yb.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", default="torch-out")
    ap.add_argument("--model", choices=("nanogpt", "llama"), default="nanogpt")
    ap.add_argument("--text")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--select", help="sampling spec (default: every 20th step from 20, layer 1)")
    ap.add_argument("--attn", choices=("sdpa", "tilescope"), default="sdpa",
                    help="the Llama model's attention: F.scaled_dot_product_attention, or tilescope.torch.attention")
    ap.add_argument("--policy", default="bf16-torch", help="the policy of --attn tilescope (the kernel under study)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    text, source = load_text(a.text)
    chars = sorted(set(text))
    data = torch.tensor([chars.index(ch) for ch in text[:400000]] if len(chars) < 256 else [0], dtype=torch.long)
    print("text: %s, %d characters, vocabulary %d" % (source, len(text), len(chars)))
    torch.manual_seed(0)
    B, T, C, H, L = 8, 64, 64, 4, 2
    model = Model(a.model, len(chars), C, H, L, T, a.attn, a.policy)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    dump = os.path.join(a.out, "run.h5")
    for stale in (dump, dump + ".capture"):
        if os.path.isdir(stale):
            shutil.rmtree(stale)
        elif os.path.exists(stale):
            os.remove(stale)
    select = a.select or "steps=20::20,layers=1"
    t0 = time.time()
    with tt.capture(model, dump, select=select) as cap:
        for step in range(a.steps):
            cap.step(step)
            loss = train_step(model, opt, data, B, T)
            if step % 10 == 0 or step == a.steps - 1:
                print("step %3d  loss %.3f" % (step, loss.item()))
    print("trained %d steps in %.1f s; captured steps %s into %s (policy %r)"
          % (a.steps, time.time() - t0, cap.steps_written, dump, cap.meta["policy"]))
    diag = os.path.join(a.out, "diag")
    s = tilescope.diagnose(dump, diag, max_heads=4)
    print("diagnose: lp %s (%s), %d of %d head records flagged" % (s["lp"], s["lp_source"], s["n_flagged_heads"],
                                                                  len(s["heads"])))
    rep = tilescope.report(diag, os.path.join(a.out, "report.pdf"))
    print("report: %s%s" % (rep["pdf"], " and " + rep["html"] if rep["html"] else ""))


if __name__ == "__main__":
    main()
