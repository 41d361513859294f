"""tilescope.torch: the capture cannot record the wrong thing silently.

1. tilescope.torch.scaled_dot_product_attention against an explicit float64 softmax reference:
   no mask, is_causal (also with L != S), boolean and float masks, a fully masked row (0), scale,
   enable_gqa (= repeat_interleave of the kv heads), BF16 inputs (one rounding of O: within 1 ULP,
   >= 99% identical), autocast, gradients, and torch's errors (attn_mask with is_causal).
2. GQA with k, v expanded before SDPA: by repeat_interleave the dump holds the model's kv heads bit
   for bit (n_kv_head 2); by k.repeat (tiled) or by copies that are neither, it holds the heads the
   call received (n_kv_head 4, kv head h of the dump = the model's kv head h % 2), with a warning
   naming the layer, and bf16-sdpa-math's replay reproduces O for every layout (the old k[:, ::rep]
   of a tiled layout, planted into a dump, makes diagnose say the capture is wrong and exit 3).
3. Attention layouts: Meta/torchtitan (wq, wk, wv, wo; n_heads, n_kv_heads), Phi-3's fused
   qkv_proj, GPT-NeoX's query_key_value (per-head rows), MPT's Wqkv, BART's out_proj, GPT-2's
   Conv1D c_attn, and projections= for diffusers-style to_q/to_k/to_v/to_out.0: x is the q
   projection's input bit for bit, and x @ W_q^T, x @ W_k^T, x @ W_v^T reproduce the model's own
   projections (so the split of a fused weight is the model's), W_o its output projection's
   weight; a layout of no known naming warns naming the module and projections=.
4. SDPA bound by name at import (`from torch.nn.functional import scaled_dot_product_attention`)
   in the model's module is still captured (torch >= 2.0's builtin simulated on torch 1.13 by a
   function that is not tilescope's), the name restored after; one bound in a module outside the
   model's packages is not, and the first sampled step warns that no attention call was seen.
"""
import math
import os
import subprocess
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks  # noqa: E402

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("SKIP: torch not importable (apt-get install python3-torch)")
    sys.exit(77)

import tilescope  # noqa: E402
import tilescope.torch as tt  # noqa: E402

c = Checks()
check = c.check
NATIVE_SDPA = F.scaled_dot_product_attention is not tt.scaled_dot_product_attention
BF16_ULP_MAX = 1  # O is rounded to BF16 once from FP32 values within ~1e-6 of float64: at most 1 ULP apart
BF16_IDENTICAL_MIN = 0.99  # the FP32 error flips a BF16 rounding only near a rounding boundary
FP32_RTOL = 2e-5  # FP32 scores and softmax over <= 16 keys against float64


def bits(t):
    t = t.detach().contiguous()
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def ref_sdpa(q, k, v, mask=None, causal=False, scale=None, gqa=False):
    """The explicit softmax reference, in float64."""
    q, k, v = q.double(), k.double(), v.double()
    if gqa:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    L, S = s.shape[-2:]
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    p = torch.softmax(s, -1)
    p = torch.where(torch.isneginf(s).all(-1, keepdim=True), torch.zeros_like(p), p)
    return p @ v


# -- 1. the SDPA -------------------------------------------------------------------------------
torch.manual_seed(1)
B, H, Hkv, L, S, D = 2, 4, 2, 7, 11, 5  # odd sizes; L != S
q, k, v = torch.randn(B, H, L, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
bmask = torch.rand(L, S) > 0.3
bmask[3] = False  # one fully masked row
fmask = torch.randn(B, 1, L, S)
cases = [("plain", {}, {}), ("causal", dict(is_causal=True), dict(causal=True)),
         ("bool mask", dict(attn_mask=bmask), dict(mask=bmask)), ("float mask", dict(attn_mask=fmask), dict(mask=fmask)),
         ("scale", dict(scale=0.3), dict(scale=0.3))]
for name, kw, rkw in cases:
    got, want = tt.scaled_dot_product_attention(q, k, v, **kw), ref_sdpa(q, k, v, **rkw)
    err = ((got.double() - want).abs() / want.abs().clamp(min=1)).max().item()
    check(got.dtype == torch.float32 and got.shape == (B, H, L, D) and err < FP32_RTOL,
          "sdpa %s: fp32 within %g of the float64 reference (max rel %.2e)" % (name, FP32_RTOL, err))
check(torch.equal(tt.scaled_dot_product_attention(q, k, v, attn_mask=bmask)[:, :, 3], torch.zeros(B, H, D)),
      "sdpa: a fully masked row gives 0")
kg, vg = k[:, :Hkv], v[:, :Hkv]
got = tt.scaled_dot_product_attention(q, kg, vg, is_causal=True, enable_gqa=True)
check(same_bits(got, tt.scaled_dot_product_attention(q, kg.repeat_interleave(2, 1), vg.repeat_interleave(2, 1),
                                                     is_causal=True)),
      "sdpa enable_gqa: bit for bit repeat_interleave of the kv heads")
check(((got.double() - ref_sdpa(q, kg, vg, causal=True, gqa=True)).abs().max().item()) < FP32_RTOL * 4,
      "sdpa enable_gqa: the reference with kv head h // 2 for query head h")
for bad_kw, what in ((dict(attn_mask=bmask, is_causal=True), "attn_mask with is_causal"),
                     (dict(enable_gqa=True), "3 kv heads for 4 query heads")):
    try:
        tt.scaled_dot_product_attention(q, k[:, :3] if "enable_gqa" in bad_kw else k,
                                        v[:, :3] if "enable_gqa" in bad_kw else v, **bad_kw)
        check(False, "sdpa refuses %s" % what)
    except RuntimeError as e:
        check(True, "sdpa refuses %s: %s" % (what, e))
# BF16: FP32 inside, O rounded once
qb, kb, vb = (t.bfloat16() for t in (q, k, v))
got = tt.scaled_dot_product_attention(qb, kb, vb, is_causal=True)
want = ref_sdpa(qb, kb, vb, causal=True).bfloat16()
ulp = (bits(got).int() - bits(want).int()).abs()
print("sdpa bf16 vs float64 reference rounded to BF16: max %d ULP, %.4f%% identical"
      % (ulp.max().item(), 100 * (ulp == 0).double().mean().item()))
check(got.dtype == torch.bfloat16 and ulp.max().item() <= BF16_ULP_MAX and (ulp == 0).double().mean() >= BF16_IDENTICAL_MIN,
      "sdpa bf16: O within %d ULP of the rounded float64 reference, %.4f identical" % (BF16_ULP_MAX, (ulp == 0).double().mean()))
with torch.autocast("cpu", dtype=torch.bfloat16):
    check(tt.scaled_dot_product_attention(q, k, v).dtype == torch.bfloat16, "sdpa under CPU autocast: BF16, as torch's")
# gradients against float64 autograd of the reference
qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
tt.scaled_dot_product_attention(qr, kr, vr, attn_mask=bmask).pow(2).sum().backward()
q6, k6, v6 = (t.double().requires_grad_() for t in (q, k, v))
ref_sdpa(q6, k6, v6, mask=bmask).pow(2).sum().backward()
gerr = max(((a.grad.double() - b.grad).abs().max() / b.grad.abs().max()).item() for a, b in ((qr, q6), (kr, k6), (vr, v6)))
check(gerr < 1e-5, "sdpa gradients within 1e-5 of float64 autograd (%.2e)" % gerr)
if not NATIVE_SDPA:
    check(F.scaled_dot_product_attention is tt.scaled_dot_product_attention, "torch < 2.0: installed as F's")


# -- 2. GQA layouts ----------------------------------------------------------------------------
class GQA(nn.Module):
    def __init__(self, expand, C=16, H=4, Hkv=2):
        super().__init__()
        self.num_heads, self.num_key_value_heads, self.expand = H, Hkv, expand
        D = C // H
        self.q_proj, self.k_proj = nn.Linear(C, H * D, bias=False), nn.Linear(C, Hkv * D, bias=False)
        self.v_proj, self.o_proj = nn.Linear(C, Hkv * D, bias=False), nn.Linear(H * D, C, bias=False)
        self.k_extra = nn.Linear(C, H * D, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        H, Hkv = self.num_heads, self.num_key_value_heads
        D = C // H
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)
        k = self.k_proj(x).view(B, T, Hkv, D).transpose(1, 2)
        v = self.v_proj(x).view(B, T, Hkv, D).transpose(1, 2)
        if self.expand == "interleaved":
            ke, ve = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
        elif self.expand == "tiled":
            ke, ve = k.repeat(1, H // Hkv, 1, 1), v.repeat(1, H // Hkv, 1, 1)
        else:  # the module says 2 kv heads, but the call gets 4 distinct ones
            ke, ve = self.k_extra(x).view(B, T, H, D).transpose(1, 2), v.repeat_interleave(H // Hkv, 1)
        o = F.scaled_dot_product_attention(q, ke, ve, is_causal=True)
        self.last = dict(k=k.detach().clone(), v=v.detach().clone(), ke=ke.detach().clone(), ve=ve.detach().clone())
        return self.o_proj(o.transpose(1, 2).reshape(B, T, H * D))


def run(model, path, steps=1, x_shape=(2, 9, 16), autocast=True, **kw):
    torch.manual_seed(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with tt.capture(model, path, **kw) as cap:
            for s in range(steps):
                cap.step(s)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                    y = model(torch.randn(*x_shape))
                y.float().pow(2).mean().backward()
    return [str(m.message) for m in w]


with tempfile.TemporaryDirectory(prefix="tsc-layouts-") as tmp:
    for expand in ("interleaved", "tiled", "neither"):
        m = GQA(expand)
        p = os.path.join(tmp, "gqa_%s.h5" % expand)
        msgs = run(m, p)
        d = tilescope.Dump(p)
        ks, vs = d.read_torch(0, 0, "k"), d.read_torch(0, 0, "v")
        t = m.last
        if expand == "interleaved":
            check(d.meta["n_kv_head"] == 2 and same_bits(ks, t["k"]) and same_bits(vs, t["v"]),
                  "GQA interleaved: the dump's 2 kv heads are the model's bit for bit (n_kv_head %d)" % d.meta["n_kv_head"])
            check(not any("kv heads" in x for x in msgs), "GQA interleaved: no layout warning: %s" % msgs)
        else:
            ok = d.meta["n_kv_head"] == 4 and same_bits(ks, t["ke"]) and same_bits(vs, t["ve"])
            if expand == "tiled":  # dump kv head h (read by query head h) is the model's kv head h % 2
                ok = ok and all(same_bits(ks[:, h], t["k"][:, h % 2]) and same_bits(vs[:, h], t["v"][:, h % 2])
                                for h in range(4))
                ok = ok and not same_bits(ks[:, 1], t["k"][:, 0])  # the old k[:, ::2] gave kv head 0 for head 1
            check(ok, "GQA %s: the dump holds the 4 heads the call received (n_kv_head %d), query head h's key is "
                  "the model's" % (expand, d.meta["n_kv_head"]))
            word = "tiled (k.repeat" if expand == "tiled" else "neither repeat_interleave nor tiled"
            check(any("layer 0 " in x and word in x for x in msgs), "GQA %s: a warning names layer 0 and the layout: %s"
                  % (expand, msgs))
        d.close()
        if not NATIVE_SDPA:  # the kernel is tilescope's: its preset must reproduce O from what was stored
            f = tilescope.fit(p, ["bf16-sdpa-math"])
            share = f["policies"][0]["o"]["identical"]
            print("GQA %s: bf16-sdpa-math replay reproduces O on %.4f%%" % (expand, 100 * share))
            check(share >= 0.99, "GQA %s: bf16-sdpa-math's replay of the dump reproduces O on %.4f (>= 0.99)"
                  % (expand, share))

    # the old capture's k[:, ::rep] of a tiled layout, planted: diagnose says the capture is wrong, exit 3
    if not NATIVE_SDPA:
        src = tilescope.Dump(os.path.join(tmp, "gqa_tiled.h5"))
        meta = {k: v for k, v in src.meta.items() if k in {n for n, _ in tilescope._lib.DumpMeta._fields_}}
        meta.update(n_kv_head=2)
        planted = os.path.join(tmp, "planted.h5")
        with tilescope.Capture(planted, meta) as cap, cap.step(0):
            for n in ("q", "o", "do", "lse"):
                cap.put(0, n, src.read_torch(0, 0, n))
            for n in ("k", "v"):
                cap.put(0, n, src.read_torch(0, 0, n)[:, ::2].contiguous())
        src.close()
        r = subprocess.run([tilescope._lib.program(), "diagnose", planted, "-o", os.path.join(tmp, "dg"), "-q"],
                           capture_output=True, text=True)
        print(r.stdout[-1500:])
        check(r.returncode == 3 and "the capture or the preset is wrong" in r.stdout and "nothing at risk" not in r.stdout
              and "tiling" in r.stdout, "planted tiled-as-interleaved kv heads: diagnose exits 3 (%d) saying the capture "
              "or the preset is wrong, naming tiling" % r.returncode)
        # an FP32 O's bits follow torch's summation order: a low share there is no evidence against the capture
        fp32 = os.path.join(tmp, "gqa_fp32.h5")
        run(GQA("interleaved"), fp32, autocast=False)
        r = subprocess.run([tilescope._lib.program(), "diagnose", fp32, "-o", os.path.join(tmp, "dg3"), "-q"],
                           capture_output=True, text=True)
        check(r.returncode == 0 and "the capture or the preset is wrong" not in r.stdout,
              "FP32 O: diagnose exits 0 without the verdict on the capture (%d): %s" % (r.returncode, r.stdout[-600:]))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s = tilescope.diagnose(planted, os.path.join(tmp, "dg2"))
        check(s["diagnosis"]["fit"]["warning"] and any("the capture or the preset is wrong" in str(x.message) for x in w),
              "tilescope.diagnose returns the summary and warns on exit 3")

    # -- 3. attention layouts --------------------------------------------------------------------
    C, H, Hkv = 16, 4, 2
    D = C // H

    def attend(q, k, v, B, T):
        """[B, T, H*D] q and [B, T, Hkv*D] k, v -> SDPA with kv heads repeated (repeat_interleave)."""
        q, k, v = (t.reshape(B, T, -1, D).transpose(1, 2) for t in (q, k, v))
        rep = q.shape[1] // k.shape[1]
        o = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=True)
        return o.transpose(1, 2).reshape(B, T, -1)

    class Meta(nn.Module):  # Meta Llama / torchtitan
        def __init__(self):
            super().__init__()
            self.n_heads, self.n_kv_heads, self.head_dim = H, Hkv, D
            self.wq, self.wk, self.wv = nn.Linear(C, H * D, bias=False), nn.Linear(C, Hkv * D, bias=False), \
                nn.Linear(C, Hkv * D, bias=False)
            self.wo = nn.Linear(H * D, C, bias=False)

        def forward(self, x):
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
            self.proj = dict(x=x, q=q, k=k, v=v)
            return self.wo(attend(q, k, v, *x.shape[:2]))

    class Phi3(nn.Module):  # fused qkv_proj, rows [q | k | v], GQA
        def __init__(self):
            super().__init__()
            self.num_heads, self.num_key_value_heads = H, Hkv
            self.qkv_proj, self.o_proj = nn.Linear(C, (H + 2 * Hkv) * D, bias=False), nn.Linear(H * D, C, bias=False)

        def forward(self, x):
            qkv = self.qkv_proj(x)
            q, k, v = qkv[..., :H * D], qkv[..., H * D:(H + Hkv) * D], qkv[..., (H + Hkv) * D:]
            self.proj = dict(x=x, q=q, k=k, v=v)
            return self.o_proj(attend(q, k, v, *x.shape[:2]))

    class NeoX(nn.Module):  # query_key_value, rows [H, 3, D]
        def __init__(self):
            super().__init__()
            self.num_attention_heads, self.head_size = H, D
            self.query_key_value, self.dense = nn.Linear(C, 3 * C), nn.Linear(C, C)

        def forward(self, x):
            B, T, _ = x.shape
            qkv = self.query_key_value(x).view(B, T, H, 3 * D)
            q, k, v = (qkv[..., j * D:(j + 1) * D].reshape(B, T, H * D) for j in range(3))
            self.proj = dict(x=x, q=q, k=k, v=v)
            return self.dense(attend(q, k, v, B, T))

    class MPT(nn.Module):  # Wqkv, rows [q | k | v], GQA
        def __init__(self):
            super().__init__()
            self.n_heads, self.kv_n_heads = H, Hkv
            self.Wqkv, self.out_proj = nn.Linear(C, C + 2 * Hkv * D), nn.Linear(C, C)

        def forward(self, x):
            q, k, v = self.Wqkv(x).split([C, Hkv * D, Hkv * D], dim=2)
            self.proj = dict(x=x, q=q, k=k, v=v)
            return self.out_proj(attend(q, k, v, *x.shape[:2]))

    class Bart(nn.Module):  # q_proj, k_proj, v_proj, out_proj
        def __init__(self):
            super().__init__()
            self.num_heads = H
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(C, C) for _ in range(4))

        def forward(self, x):
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
            self.proj = dict(x=x, q=q, k=k, v=v)
            return self.out_proj(attend(q, k, v, *x.shape[:2]))

    class Conv1D(nn.Module):  # HF GPT-2's: weight [in, out]
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight, self.bias = nn.Parameter(torch.randn(nx, nf) * 0.2), nn.Parameter(torch.zeros(nf))

        def forward(self, x):
            return x @ self.weight + self.bias

    class GPT2(nn.Module):  # c_attn, c_proj as Conv1D, eager attention
        def __init__(self):
            super().__init__()
            self.n_head = H
            self.c_attn, self.c_proj = Conv1D(3 * C, C), Conv1D(C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            self.proj = dict(x=x, q=q, k=k, v=v)
            qh, kh, vh = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
            att = ((qh @ kh.transpose(-1, -2)) / math.sqrt(D)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                                                             float("-inf")).softmax(-1)
            return self.c_proj((att @ vh).transpose(1, 2).reshape(B, T, C))

    class Diffusers(nn.Module):  # to_q, to_k, to_v, to_out[0]: not in STYLES, named with projections=
        def __init__(self):
            super().__init__()
            self.heads = H
            self.to_q, self.to_k, self.to_v = (nn.Linear(C, C, bias=False) for _ in range(3))
            self.to_out = nn.ModuleList([nn.Linear(C, C), nn.Dropout(0.0)])

        def forward(self, x):
            q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
            self.proj = dict(x=x, q=q, k=k, v=v)
            return self.to_out[1](self.to_out[0](attend(q, k, v, *x.shape[:2])))

    def out_weight(m):
        o = {Meta: "wo", Phi3: "o_proj", NeoX: "dense", MPT: "out_proj", Bart: "out_proj", GPT2: "c_proj"}.get(type(m))
        return m.to_out[0].weight if o is None else (m.c_proj.weight.t() if o == "c_proj" else getattr(m, o).weight)

    for cls, kw in ((Meta, {}), (Phi3, {}), (NeoX, {}), (MPT, {}), (Bart, {}), (GPT2, {}),
                    (Diffusers, dict(projections=dict(q="to_q", k="to_k", v="to_v", o="to_out.0")))):
        torch.manual_seed(5)
        att = cls()
        with torch.no_grad():
            for mod in att.modules():
                if isinstance(getattr(mod, "bias", None), torch.Tensor):
                    mod.bias.zero_()
        model = nn.Sequential(att)
        p = os.path.join(tmp, "style_%s.h5" % cls.__name__)
        msgs = run(model, p, autocast=False, **kw)
        bad = []
        if not os.path.exists(p):
            check(False, "%s: captured (%s)" % (cls.__name__, msgs))
            continue
        with tilescope.Dump(p) as d:
            names = set(d.names(0, 0))
            if not {"q", "k", "v", "o", "x", "w_q", "w_k", "w_v", "w_o"} <= names:
                bad.append("names %s" % sorted(names))
            else:
                x = d.read_torch(0, 0, "x")
                if not same_bits(x, att.proj["x"].detach()):
                    bad.append("x")
                for r in "qkv":
                    w = d.read_torch(0, 0, "w_" + r)
                    want = att.proj[r].detach()
                    got = x @ w.t()  # the biases are zero (they are not recorded)
                    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
                        bad.append("x @ w_%s^T" % r)
                if not same_bits(d.read_torch(0, 0, "w_o"), out_weight(att).detach().contiguous()):
                    bad.append("w_o")
        check(not bad and not any("not recorded" in x for x in msgs),
              "%s: x and W_q, W_k, W_v, W_o are the model's (mismatches: %s; warnings: %s)" % (cls.__name__, bad, msgs))

    class Unknown(nn.Module):  # query/key/value/proj: no known naming
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value, self.proj_out = (nn.Linear(C, C) for _ in range(4))

        def forward(self, x):
            return self.proj_out(attend(self.query(x), self.key(x), self.value(x), *x.shape[:2]))

    model = nn.Sequential(nn.Linear(C, C), Unknown())
    msgs = run(model, os.path.join(tmp, "unknown.h5"), autocast=False)
    check(any("module '1'" in x and "class Unknown" in x and "projections=" in x and "not recorded" in x for x in msgs),
          "unknown layout: a warning names the module, its class and projections=: %s" % msgs)
    msgs = run(model, os.path.join(tmp, "unknown2.h5"), autocast=False, modules=[model[1]])
    check(any("module '1'" in x and "projections=" in x for x in msgs),
          "unknown layout given in modules=: a warning names the module and projections=: %s" % msgs)
    with tilescope.Dump(os.path.join(tmp, "unknown2.h5")) as d:
        check({"q", "k", "v", "o"} <= set(d.names(0, 0)) and "w_q" not in d.names(0, 0),
              "unknown layout: q, k, v, o from the call are still captured, no weights: %s" % d.names(0, 0))

    # -- 4. SDPA bound by name at import time ----------------------------------------------------
    sys.path.insert(0, tmp)
    with open(os.path.join(tmp, "tsc_bound_model.py"), "w") as f:
        f.write("""import torch.nn as nn
from torch.nn.functional import scaled_dot_product_attention
class BoundAttn(nn.Module):
    def __init__(s, C=16, H=4):
        super().__init__(); s.num_heads = H
        s.q_proj, s.k_proj, s.v_proj, s.o_proj = (nn.Linear(C, C, bias=False) for _ in range(4))
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = (p(x).view(B, T, s.num_heads, -1).transpose(1, 2) for p in (s.q_proj, s.k_proj, s.v_proj))
        o = scaled_dot_product_attention(q, k, v, is_causal=True)
        s.last = dict(q=q.detach().clone(), o=o.detach().clone())
        return s.o_proj(o.transpose(1, 2).reshape(B, T, C))
""")
    with open(os.path.join(tmp, "sdpa_helper_ops.py"), "w") as f:
        f.write("from torch.nn.functional import scaled_dot_product_attention as sdpa\n"
                "def attend(q, k, v):\n    return sdpa(q, k, v, is_causal=True)\n")
    with open(os.path.join(tmp, "sdpa_other_model.py"), "w") as f:
        f.write("""import torch.nn as nn
from sdpa_helper_ops import attend
class OtherAttn(nn.Module):
    def __init__(s, C=16, H=4):
        super().__init__(); s.num_heads = H
        s.q_proj, s.k_proj, s.v_proj, s.o_proj = (nn.Linear(C, C, bias=False) for _ in range(4))
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = (p(x).view(B, T, s.num_heads, -1).transpose(1, 2) for p in (s.q_proj, s.k_proj, s.v_proj))
        return s.o_proj(attend(q, k, v).transpose(1, 2).reshape(B, T, C))
""")
    ours = F.scaled_dot_product_attention

    def builtin(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        """torch >= 2.0's builtin SDPA, simulated on torch 1.13: not tilescope's, so not recorded by itself."""
        return tt._sdpa_math(q, k, v, attn_mask, dropout_p, is_causal, scale)

    if not NATIVE_SDPA:
        F.scaled_dot_product_attention = builtin
    try:
        import tsc_bound_model
        import sdpa_other_model
        bound = tsc_bound_model.scaled_dot_product_attention
        check(bound is F.scaled_dot_product_attention and bound is not tt.scaled_dot_product_attention,
              "the model's module bound torch's SDPA, not tilescope's, at import")
        m = tsc_bound_model.BoundAttn()
        p = os.path.join(tmp, "bound.h5")
        msgs = run(nn.Sequential(m), p, autocast=False)
        with tilescope.Dump(p) as d:
            ok = same_bits(d.read_torch(0, 0, "q"), m.last["q"]) and same_bits(d.read_torch(0, 0, "o"), m.last["o"])
        check(ok, "SDPA bound by name at import in the model's module: q and o captured bit for bit (%s)" % msgs)
        check(tsc_bound_model.scaled_dot_product_attention is bound, "the bound name is restored after the capture")
        msgs = run(nn.Sequential(sdpa_other_model.OtherAttn()), os.path.join(tmp, "other.h5"), autocast=False)
        check(any("no attention call was seen in sampled step 0" in x and "from torch.nn.functional import "
                  "scaled_dot_product_attention" in x for x in msgs),
              "SDPA bound in a module outside the model's packages: the first sampled step warns: %s" % msgs)
    finally:
        F.scaled_dot_product_attention = ours
c.finish()
