"""Import of saved tensors (tilescope.import_tensors, python3 -m tilescope import).

1. safetensors written here by a writer of our own (8-byte little-endian header length, JSON header
   with dtype/shape/data_offsets, raw little-endian bytes): BF16 q/k/v/do and F32 o/lse for two
   layers and two steps, mapped by pattern; the dump holds exactly those bits.
2. torch .pt (a nested dict saved by torch.save, [B, T, H, D] layout) and .npz, through the command
   line form: values bit for bit, the layout transposed, unmapped tensors reported as skipped.
3. Malformed files each give a TilescopeError naming the file and the problem: a header length past
   the end, malformed JSON, data_offsets that do not match the shape, overlapping tensors, a
   truncated file, an unknown dtype; a tensor whose shape contradicts q's names the tensor; a
   failed import leaves no dump behind. The package reads safetensors and npy through the
   library's reader (a name given twice, which json.loads would let through, is refused).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks  # noqa: E402

import numpy as np  # noqa: E402

try:
    import torch
except ImportError:
    print("SKIP: torch not importable (apt-get install python3-torch)")
    sys.exit(77)

import tilescope  # noqa: E402

c = Checks()
check = c.check
ST = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64"}


def write_safetensors(path, tensors, mangle=None):
    """tensors: {name: numpy array, or ("BF16", uint16 bits)}. mangle(header, data) -> (header bytes,
    data) lets a test break the file."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        dt, a = t if isinstance(t, tuple) else (ST[t.dtype], t)
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    hb, data = json.dumps(header).encode(), b"".join(blobs)
    if mangle:
        hb, data = mangle(header, data)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + data)


def bf16_bits(a):
    return torch.from_numpy(np.asarray(a, np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


rng = np.random.default_rng(7)
B, H, Hkv, T, D = 1, 4, 2, 16, 8
with tempfile.TemporaryDirectory(prefix="tsc-import-") as tmp:
    # 1. safetensors
    src = {}
    for s in (10, 20):
        for layer in (0, 3):
            pre = "s%d.blocks.%d.attn." % (s, layer)
            for n, h in (("q", H), ("k", Hkv), ("v", Hkv), ("do", H)):
                src[pre + n] = ("BF16", bf16_bits(rng.standard_normal((B, h, T, D)) * 2))
            src[pre + "o"] = rng.standard_normal((B, H, T, D)).astype(np.float32)
            src[pre + "lse"] = rng.standard_normal((B, H, T)).astype(np.float32)
    src["lm_head.weight"] = rng.standard_normal((4, 4)).astype(np.float32)
    st = os.path.join(tmp, "a.safetensors")
    write_safetensors(st, src)
    out = os.path.join(tmp, "st.h5")
    r = tilescope.import_tensors(st, out, maps=["s{step}.blocks.{layer}.attn.{name}"], policy="bf16-fa2")
    check(r["steps"] == [10, 20] and r["layers"] == [0, 3] and r["skipped"] == ["lm_head.weight"],
          "safetensors: steps, layers and the skipped tensor: %s" % r)
    with tilescope.Dump(out) as d:
        check(d.meta["n_kv_head"] == Hkv and d.meta["n_layer"] == 4 and d.meta["policy"] == "bf16-fa2", "meta from tensors")
        bad = [(s, layer, n) for s in (10, 20) for layer in (0, 3) for n in ("q", "k", "v", "do", "o", "lse")
               if not np.array_equal(d.read(s, layer, n), src["s%d.blocks.%d.attn.%s" % (s, layer, n)][1]
                                     if n in ("q", "k", "v", "do") else src["s%d.blocks.%d.attn.%s" % (s, layer, n)])]
        check(not bad, "safetensors: every tensor's bits in the dump (BF16 kept as BF16): %s" % bad[:4])
        check(d.dataset(10, 0, "q")["dtype"] == "bf16" and d.dataset(10, 0, "o")["dtype"] == "fp32", "dtypes kept")

    # 2. torch .pt (nested, [B, T, H, D]) and .npz through the command line
    q = torch.randn(B, T, H, D).to(torch.bfloat16)
    k, v = torch.randn(B, T, Hkv, D).to(torch.bfloat16), torch.randn(B, T, Hkv, D).to(torch.bfloat16)
    pt = os.path.join(tmp, "a.pt")
    torch.save({"layers": [{"attn": {"q": q, "k": k, "v": v}}, {"attn": {"q": q, "k": k, "v": v}}], "step": 5,
                "optimizer_lr": torch.tensor(3)}, pt)
    env = dict(os.environ)
    out2 = os.path.join(tmp, "pt.h5")
    p = subprocess.run([sys.executable, "-m", "tilescope", "import", pt, "-o", out2, "--map", "layers.{layer}.attn.{name}",
                        "--layout", "bthd", "--step", "5"], capture_output=True, text=True, env=env)
    check(p.returncode == 0 and "6 datasets" in p.stdout and p.stdout.rstrip().endswith("no map selects: optimizer_lr"),
          "python3 -m tilescope import a.pt: %s %s" % (p.stdout, p.stderr))
    with tilescope.Dump(out2) as d:
        check(d.steps == [5] and d.layers(5) == [0, 1], "pt: step 5 layers 0, 1")
        check(torch.equal(d.read_torch(5, 1, "q").view(torch.int16), q.transpose(1, 2).contiguous().view(torch.int16))
              and torch.equal(d.read_torch(5, 1, "v").view(torch.int16), v.transpose(1, 2).contiguous().view(torch.int16)),
              "pt: bthd transposed to [B, H, T, D], BF16 bits kept")
    npz = os.path.join(tmp, "a.npz")
    qn, kn = rng.standard_normal((B, H, T, D)).astype(np.float32), rng.standard_normal((B, Hkv, T, D)).astype(np.float32)
    np.savez(npz, query=qn, key=kn, value=kn * 2, other=np.zeros(3))
    out3 = os.path.join(tmp, "npz.h5")
    r = tilescope.import_tensors(npz, out3, maps=["query=q", "key=k", "value=v"])
    with tilescope.Dump(out3) as d:
        check(np.array_equal(d.read(0, 0, "q"), qn) and np.array_equal(d.read(0, 0, "v"), kn * 2) and r["skipped"] == ["other"],
              "npz: PATTERN=NAME maps, values kept, unmapped skipped")

    # 3. malformed inputs
    def err(make, *words, path=None):
        path = path or os.path.join(tmp, "bad.safetensors")
        make(path)
        outb = os.path.join(tmp, "bad.h5")
        try:
            tilescope.import_tensors(path, outb, maps=["s{step}.blocks.{layer}.attn.{name}"])
        except tilescope.TilescopeError as e:
            ok = all(w in str(e) for w in words) and os.path.basename(path) in str(e) and not os.path.exists(outb)
            return ok or print("message:", e)
        return False
    small = {k: v for k, v in src.items() if k.startswith("s10.blocks.0.")}

    def hdr(fn):
        def mangle(header, data):
            return fn(header, data)
        return lambda path: write_safetensors(path, small, mangle)

    check(err(lambda p: open(p, "wb").write(struct.pack("<Q", 1 << 40) + b"{}"), "header length"),
          "a header length past the end of the file")
    check(err(hdr(lambda h, d: (b'{"s10.blocks.0.attn.q": {"dtype": "BF16",', d)), "malformed JSON"), "malformed JSON")

    def shift(h, d):
        h["s10.blocks.0.attn.k"]["data_offsets"][1] -= 2
        return json.dumps(h).encode(), d
    check(err(hdr(shift), "s10.blocks.0.attn.k", "data_offsets"), "offsets that do not match the shape name the tensor")

    def overlap(h, d):
        a, b = h["s10.blocks.0.attn.q"]["data_offsets"], h["s10.blocks.0.attn.k"]["data_offsets"]
        h["s10.blocks.0.attn.k"]["data_offsets"] = [a[0], a[0] + b[1] - b[0]]
        return json.dumps(h).encode(), d
    check(err(hdr(overlap), "overlap"), "overlapping tensors")
    check(err(hdr(lambda h, d: (json.dumps(h).encode(), d[:len(d) // 2])), "truncated"), "a truncated file")

    def dtype(h, d):
        h["s10.blocks.0.attn.v"]["dtype"] = "F8_E4M3"
        return json.dumps(h).encode(), d
    check(err(hdr(dtype), "s10.blocks.0.attn.v", "F8_E4M3"), "an unknown dtype names the tensor")
    wrong = dict(small)
    wrong["s10.blocks.0.attn.v"] = rng.standard_normal((B, Hkv, T - 1, D)).astype(np.float32)
    check(err(lambda p: write_safetensors(p, wrong), "s10.blocks.0.attn.v"),
          "a shape that contradicts q names the tensor, and no dump is left")
    # one parser: the package reads safetensors and npy through libtilescope's reader, whose checks
    # json.loads and np.load lack (a name given twice; uint16 "BF16" bits in an npy)
    dup = b'{"s10.blocks.0.attn.q": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, ' \
          b'"s10.blocks.0.attn.q": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}'
    check(err(lambda p: open(p, "wb").write(struct.pack("<Q", len(dup)) + dup + bytes(8)), "named twice"),
          "a tensor named twice in the header (the C reader's check)")
    check(err(lambda p: np.save(p, np.zeros((B, H, T, D), np.uint16)), "'<u2'", path=os.path.join(tmp, "bad.npy")),
          "an npy of uint16 is refused naming its dtype")
    p = subprocess.run([sys.executable, "-m", "tilescope", "import", os.path.join(tmp, "bad.safetensors"), "-o",
                        os.path.join(tmp, "x.h5")], capture_output=True, text=True, env=env)
    check(p.returncode == 1 and "tilescope import:" in p.stderr, "the command line fails with exit 1 and a message")
c.finish()
