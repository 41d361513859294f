"""The Python package tilescope (python/tilescope) over libtilescope: capture, dump reading, jobs.

1. Tensors handed to tilescope.Capture (torch bfloat16 / float32 / float16, numpy float32 and bf16
   bits) come back bit for bit through h5py and through the library's reader (tilescope.Dump);
   a host-contiguous tensor is handed over at its own address (no copy).
2. Bad input raises TilescopeError with the library's message (a shape against the metadata, a
   selection spec, a dump that is not one).
3. A capture session killed with SIGKILL in mid-training (tilescope.torch.capture around a loop)
   leaves every step it had flushed readable, and the incomplete one reported.
4. The jobs: fit on a dump captured from the reference attention under bf16-torch ranks
   bf16-torch first with every O element bit-identical; check finds it consistent; diagnose returns the parsed summary.json
   with the recorded policy as lp; figure draws from it and refuses a step it did not analyse; report
   writes the PDF.
"""
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

try:
    import torch
except ImportError:
    print("SKIP: torch not importable (apt-get install python3-torch)")
    sys.exit(77)

import tilescope  # noqa: E402
import tilescope.torch as tt  # noqa: E402
from tilescope.capture import host_view  # noqa: E402

c = Checks()
check = c.check


def bits(t):
    """The stored bits of a torch tensor or numpy array, as unsigned integers."""
    if torch.is_tensor(t):
        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(np.uint16)
        t = t.numpy()
    return t.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[t.dtype.itemsize])


def h5_bf16_bits(a):
    """h5py reads a bf16 dataset as float32 values (exact): their top 16 bits are the bf16's."""
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


B, H, Hkv, T, D, C = 2, 4, 2, 8, 4, 16
meta = dict(n_layer=2, n_head=H, n_kv_head=Hkv, head_dim=D, d_model=C, seq_len=T, batch=B,
            softmax_scale=0.5, policy="bf16-fa2", producer="test_package")
g = torch.Generator().manual_seed(5)
with tempfile.TemporaryDirectory(prefix="tsc-pkg-") as tmp:
    # 1. round trip
    q = (torch.randn(B, H, T, D, generator=g) * 3).to(torch.bfloat16)
    k32 = torch.randn(B, Hkv, T, D, generator=g)
    v16 = torch.randn(B, Hkv, T, D, generator=g).to(torch.float16)
    o_np = np.random.default_rng(1).standard_normal((B, H, T, D)).astype(np.float32)
    do_bits = bits(torch.randn(B, H, T, D, generator=g).to(torch.bfloat16)).copy()
    lse = torch.randn(B, H, T, generator=g)
    f, owner, ptr, _ = host_view(q)
    check(f == "bf16" and ptr == q.data_ptr(), "a contiguous bf16 tensor is handed over at its own address")
    f, owner, ptr, _ = host_view(o_np)
    check(f == "fp32" and ptr == o_np.ctypes.data, "a contiguous numpy array is handed over at its own address")
    path = os.path.join(tmp, "rt.h5")
    with tilescope.Capture(path, meta) as cap:
        with cap.step(3):
            cap.put(1, "q", q)
            cap.put(1, "k", k32)
            cap.put(1, "v", v16)
            cap.put(1, "o", o_np)
            cap.put(1, "do", do_bits, fmt="bf16")
            cap.put(1, "lse", lse)
        check(cap.n_steps == 1, "one step completed")
    check(not os.path.exists(path + ".capture") and os.path.isfile(path), "close packed the session folder")
    with h5py.File(path, "r") as h:
        L = h["step_00000003/layer_001"]
        check(np.array_equal(h5_bf16_bits(L["q"][()]), bits(q)), "h5py: bf16 q bit for bit")
        check(np.array_equal(L["k"][()].view(np.uint32), bits(k32)), "h5py: fp32 k bit for bit")
        check(np.array_equal(L["v"][()].view(np.uint16), bits(v16)), "h5py: fp16 v bit for bit")
        check(np.array_equal(L["o"][()].view(np.uint32), bits(o_np)), "h5py: numpy fp32 o bit for bit")
        check(np.array_equal(h5_bf16_bits(L["do"][()]), do_bits), "h5py: bf16 bits handed as uint16")
        check(h.attrs["policy"] in (b"bf16-fa2", "bf16-fa2"), "policy attribute recorded")
    with tilescope.Dump(path) as d:
        check(d.steps == [3] and d.layers(3) == [1], "reader lists step 3 layer 1: %s" % d.steps)
        check(d.meta["n_kv_head"] == Hkv and d.meta["producer"] == "test_package", "meta read back")
        check(d.dataset(3, 1, "q")["dtype"] == "bf16" and d.dataset(3, 1, "v")["dtype"] == "fp16", "dtypes")
        check(np.array_equal(bits(d.read(3, 1, "q")), bits(q)), "Dump.read: bf16 bits")
        rq = d.read_torch(3, 1, "q")
        check(rq.dtype == torch.bfloat16 and torch.equal(rq.view(torch.int16), q.view(torch.int16)),
              "Dump.read_torch: torch.bfloat16, same bits")
        check(np.array_equal(bits(d.read(3, 1, "k")), bits(k32)), "Dump.read: fp32 bits")
        check(np.array_equal(bits(d.read(3, 1, "v")), bits(v16)), "Dump.read: fp16 bits")
        check(np.array_equal(d.read_float(3, 1, "q"), q.float().numpy()), "Dump.read_float: bf16 values")
        check(np.array_equal(d.read(3, 1, "lse"), lse.numpy()), "lse values")

    # 2. errors
    def raises(fn, *words):
        try:
            fn()
        except tilescope.TilescopeError as e:
            return all(w in str(e) for w in words) or print("message:", e)
        return False
    p2 = os.path.join(tmp, "bad.h5")
    cap = tilescope.Capture(p2, meta, select="steps=0:10:2,layers=0,heads=1")
    check(cap.wants(4) and not cap.wants(5) and cap.wants(4, 0) and not cap.wants(4, 1), "wants follows the spec")
    cap.step_begin(4)
    check(raises(lambda: cap.put(0, "q", torch.zeros(B, H, T + 1, D)), "q"), "a q of the wrong shape: TilescopeError")
    cap.close()
    check(raises(lambda: tilescope.Capture(os.path.join(tmp, "s.h5"), meta, select="stepz=1"), "stepz"),
          "a bad selection spec names the bad key")
    notdump = os.path.join(tmp, "not.h5")
    with open(notdump, "w") as fh:
        fh.write("not hdf5")
    check(raises(lambda: tilescope.Dump(notdump), "not.h5"), "a file that is not a dump: the message names it")
    check(raises(lambda: tilescope.fit(notdump), "fit"), "a failing job raises with the program's message")

    # 3. SIGKILL in mid-training: the flushed steps survive
    child = r'''
import sys, torch, tilescope.torch as tt
torch.manual_seed(0)
class Attn(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.q_proj, s.k_proj, s.v_proj, s.o_proj = (torch.nn.Linear(16, 16) for _ in range(4))
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = (p(x).view(B, T, 4, 4).transpose(1, 2) for p in (s.q_proj, s.k_proj, s.v_proj))
        return s.o_proj(tt.attention(q, k, v, policy="bf16-torch").transpose(1, 2).reshape(B, T, C))
m = Attn(); opt = torch.optim.SGD(m.parameters(), lr=0.01)
cap = tt.capture(m, sys.argv[1], select="steps=0::2").__enter__()
step = 0
while True:
    cap.step(step)
    m(torch.randn(2, 8, 16)).square().mean().backward(); opt.step(); opt.zero_grad()
    if step % 2 == 0:
        cap.flush()
        print("flushed", step, flush=True)
    step += 1
'''
    p3 = os.path.join(tmp, "killed.h5")
    proc = subprocess.Popen([sys.executable, "-c", child, p3], stdout=subprocess.PIPE, text=True)
    flushed = []
    for line in proc.stdout:
        flushed.append(int(line.split()[1]))
        if len(flushed) == 4:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    check(os.path.isdir(p3 + ".capture") and not os.path.exists(p3), "the killed session left its folder")
    with tilescope.Dump(p3) as d:
        check(set(flushed) <= set(d.steps) and all(s % 2 == 0 for s in d.steps),
              "every flushed step is listed, only sampled ones: flushed %s, dump %s" % (flushed, d.steps))
        ok = all(np.isfinite(d.read_float(s, 0, n)).all() for s in d.steps for n in ("q", "k", "v", "o", "do", "lse"))
        check(ok, "every completed step reads back finite q k v o do lse")
    tilescope.pack(p3 + ".capture", p3)
    check(os.path.isfile(p3) and not os.path.exists(p3 + ".capture"), "pack turns the folder into one dump")

    # 4. jobs on a dump captured from tilescope.torch.attention under bf16-torch
    p4 = os.path.join(tmp, "jobs.h5")
    torch.manual_seed(3)
    qkv = [torch.randn(1, 4, 64, 16, requires_grad=True) for _ in range(3)]
    with tt.capture(torch.nn.Module(), p4) as cap:
        for step in range(3):
            cap.step(step)
            o = tt.attention(*qkv, causal=True, policy="bf16-torch")
            (o * torch.linspace(-1, 1, 16)).sum().backward()
    fit = tilescope.fit(p4, policies=["bf16-fa2", "bf16-torch"])
    check(fit["run_policy"] == "bf16-torch" and fit["best"] == "bf16-torch" and fit["best_o_identical"] == 1.0,
          "fit: the recorded bf16-torch reproduces O bit for bit (best %s, %s)" % (fit["best"], fit["best_o_identical"]))
    chk = tilescope.check(p4)
    check(chk["consistent"] is True and chk["heads"] == 12 and chk["formats"]["qkv"] == "fp32"
          and chk["formats"]["p"] == "bf16",
          "check: the captured FP32 tensors under bf16-torch are consistent, held to BF16 from o's values (%s)"
          % chk["sentence"])
    out = os.path.join(tmp, "diag")
    s = tilescope.diagnose(p4, out, max_heads=2)
    check(isinstance(s, dict) and s.get("lp", "").startswith("bf16-torch") and os.path.isfile(os.path.join(out, "summary.json")),
          "diagnose: parsed summary.json with lp from the dump's policy (%s)" % s.get("lp"))
    f1 = tilescope.figure("fig1", os.path.join(tmp, "f1.png"), out, dpi=72)
    check(f1["id"] == "fig1" and f1["file"].endswith("f1.png") and os.path.isfile(f1["file"]) and f1["caption"],
          "figure: fig1 written, its --json object parsed (%s)" % f1.get("caption", "")[:60])
    check(raises(lambda: tilescope.figure("fig1", os.path.join(tmp, "f9.png"), out, step=9),
                 "--step 9 was not analysed", "covers steps 0-2") and not os.path.exists(os.path.join(tmp, "f9.png")),
          "figure: a step the analysis does not cover raises, naming the valid ones")
    rep = tilescope.report(out, os.path.join(tmp, "r.pdf"))
    with open(rep["pdf"], "rb") as fh:
        check(fh.read(5) == b"%PDF-", "report wrote a PDF")

# the package's formats are the library's table (kernels/formats.c), not a copy
from tilescope import _lib  # noqa: E402
check(_lib.FMT["fp64"] == 0 and _lib.FMT["bf16"] == 3 and _lib.FMT["e8m4"] > _lib.FMT["fp8-e5m2"],
      "FMT follows the library's enum: %r" % dict(_lib.FMT))
check(_lib.NP_STORAGE["bf16"] is np.uint16 and _lib.NP_STORAGE["fp16"] is np.float16 and
      _lib.NP_STORAGE["e8m4"] is np.float32 and _lib.NP_STORAGE["fp8-e4m3"] is np.uint8 and
      _lib.NP_STORAGE["tf32"] is np.float32, "NP_STORAGE from the formats' sizes and widths")
c.finish()
