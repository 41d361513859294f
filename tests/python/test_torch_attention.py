"""tilescope.torch.attention: the autograd function over libtilescope's reference attention.

1. Under fp32 (MHA and GQA, causal and not): O, dQ, dK, dV equal tsc_attn_run's direct result
   (tilescope.reference_attention) bit for bit, and torch's own eager attention in float64 within
   2e-6 of the largest magnitude (an FP32 computation of these sizes: errors ~1e-7 relative).
2. Under bf16-eager-cpu with bf16 leaves: >= 99.9% of O, dQ, dK, dV bit-identical with real torch
   eager attention under CPU BF16 autocast (the preset's documented agreement, docs/PRESETS.md).
3. Under the default policy (bf16-torch+stable:beta=2) with bf16 tensors: O is bf16, and a capture of
   the call holds dO equal to autograd's gradient w.r.t. O bit for bit, the kernel's lse, and
   `tilescope replay` of that dump under the same policy gives the same O, dQ (and dK, dV where
   H = Hkv: replay writes per-query-head contributions) bits as the autograd function.
4. A bad policy string raises TilescopeError naming it.
"""
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "kernels"))
from tsc_testlib import Checks  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

try:
    import torch
except ImportError:
    print("SKIP: torch not importable (apt-get install python3-torch)")
    sys.exit(77)

import eager_torch_ref as ref  # noqa: E402
import tilescope  # noqa: E402
import tilescope.torch as tt  # noqa: E402

c = Checks()
check = c.check


def measured(ok, what):
    """A check whose measured value is printed either way."""
    print(what)
    return check(ok, what)


def eager64(q, k, v, causal):
    """softmax(q k^T / sqrt(D)) v in float64, kv heads repeated for GQA."""
    H, Hkv = q.shape[1], k.shape[1]
    k2, v2 = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
    s = q @ k2.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        T = s.shape[-1]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v2


def leaves(shapes, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).to(dtype).requires_grad_() for s in shapes]


def bits_equal(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


# 1. fp32
for (B, H, Hkv, T, D, causal) in [(2, 4, 4, 33, 16, True), (1, 6, 2, 40, 8, True), (1, 2, 1, 17, 32, False)]:
    q, k, v = leaves([(B, H, T, D), (B, Hkv, T, D), (B, Hkv, T, D)], torch.float32, T)
    dO = torch.randn(B, H, T, D, generator=torch.Generator().manual_seed(1))
    o = tt.attention(q, k, v, causal=causal, policy="fp32")
    o.backward(dO)
    direct = tilescope.reference_attention("fp32", q.detach().numpy(), k.detach().numpy(), v.detach().numpy(),
                                           dO.numpy(), causal=causal)
    same = all(bits_equal(t, direct[n]) for t, n in ((o.detach(), "o"), (q.grad, "dq"), (k.grad, "dk"),
                                                     (v.grad, "dv")))
    check(same and o.dtype == torch.float32, "fp32 %s: autograd equals tsc_attn_run bit for bit" % ((B, H, Hkv, T, D),))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    o64 = eager64(q64, k64, v64, causal)
    o64.backward(dO.double())
    for name, got, want in (("O", o, o64), ("dQ", q.grad, q64.grad), ("dK", k.grad, k64.grad), ("dV", v.grad, v64.grad)):
        err = (got.detach().double() - want.detach()).abs().max().item() / want.abs().max().item()
        measured(err < 2e-6, "fp32 %s %s vs torch eager float64: relative error %.2e" % ((B, H, Hkv, T, D), name, err))

# 2. bf16-eager-cpu against real torch eager under CPU autocast
#    (where torch's BF16 matmul here is not the modelled one, against the numpy formulation of it)
modelled, share = ref.torch_bf16_matmul_modelled()
if not modelled:
    print("note: " + ref.NOT_MODELLED % share + "; compared with eager_torch_ref.numpy_eager instead")
for (B, H, Hkv, T, D, causal, seed) in [(1, 4, 2, 70, 32, True, 11), (2, 2, 2, 48, 16, False, 12)]:
    qn, kn, vn, dOn = ref.make_inputs(B, H, Hkv, T, D, seed=seed)
    want = (ref.torch_eager if modelled else ref.numpy_eager)(qn, kn, vn, dOn, causal, Hkv, leaves="bf16")
    q, k, v = (torch.from_numpy(x).to(torch.bfloat16).requires_grad_() for x in (qn, kn, vn))
    o = tt.attention(q, k, v, causal=causal, policy="bf16-eager-cpu")
    o.backward(torch.from_numpy(dOn).to(torch.bfloat16))
    for name, got in (("o", o), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        pct = ref.compare(got.detach().float().numpy(), want[name])[0]
        measured(pct >= 99.9, "bf16-eager-cpu %s %s: %.2f%% bit-identical with %s (>= 99.9%%)"
              % ((B, H, Hkv, T, D), name, pct, "torch eager" if modelled else "the numpy model"))
    check(o.dtype == torch.bfloat16 and q.grad.dtype == torch.bfloat16, "bf16 in, bf16 out and gradients")

# 3. default policy, captured, replayed (GQA and MHA; replay's dK, dV are per query head, so they
#    are compared where H = Hkv)
for Hkv in (2, 4):
    with tempfile.TemporaryDirectory(prefix="tsc-attn-") as tmp:
        path = os.path.join(tmp, "a.h5")
        B, H, T, D = 1, 4, 80, 16
        qn, kn, vn, dOn = ref.make_inputs(B, H, Hkv, T, D, seed=20 + Hkv)
        q, k, v = (torch.from_numpy(x).to(torch.bfloat16).requires_grad_() for x in (qn, kn, vn))
        with tt.capture(torch.nn.Module(), path) as cap:
            cap.step(7)
            o = tt.attention(q, k, v, causal=True)
            o.retain_grad()
            (o.float() * torch.from_numpy(dOn)).sum().backward()
        pol = tilescope.canonical_policy(tt.DEFAULT_POLICY)
        with tilescope.Dump(path) as d:
            check(d.meta["policy"] == pol and "tilescope.torch.attention" in d.meta["producer"],
                  "the dump records the policy that ran: %r, producer %r" % (d.meta["policy"], d.meta["producer"]))
            check(torch.equal(d.read_torch(7, 0, "do").view(torch.int16), o.grad.view(torch.int16)),
                  "Hkv %d: captured dO equals autograd's gradient w.r.t. O bit for bit" % Hkv)
            check(torch.equal(d.read_torch(7, 0, "q").view(torch.int16), q.detach().view(torch.int16))
                  and torch.equal(d.read_torch(7, 0, "k").view(torch.int16), k.detach().view(torch.int16)),
                  "Hkv %d: captured q, k are the inputs bit for bit" % Hkv)
            direct = tilescope.reference_attention(pol, qn, kn, vn, causal=True)
            check(bits_equal(d.read(7, 0, "lse"), direct["lse"]), "captured lse is the kernel's")
        tilescope.replay(path, [pol], os.path.join(tmp, "r.h5"))
        with h5py.File(os.path.join(tmp, "r.h5"), "r") as f:
            g = f["step_00000007/layer_000/policy_0"]
            pairs = (("o", o), ("dq", q.grad)) + ((("dk", k.grad), ("dv", v.grad)) if Hkv == H else ())
            for name, got in pairs:
                check(bits_equal(g[name][()], got.detach().float().numpy()),
                      "Hkv %d: tilescope replay under %s: %s equals the autograd function's bit for bit" % (Hkv, pol, name))

# 4. errors
try:
    tt.attention(*leaves([(1, 1, 4, 4)] * 3, torch.float32, 0), policy="bf16-nope")
    check(False, "a bad policy raises")
except tilescope.TilescopeError as e:
    check("bf16-nope" in str(e), "a bad policy names it: %s" % str(e)[:80])
c.finish()
