"""The library's own .pt and .npz readers against torch and numpy, bit for bit.

Files written here by torch.save (both formats: the zip archive and _use_new_zipfile_serialization=
False) and by np.savez / np.savez_compressed are read twice: by tilescope.read_tensor_file (the
C readers: capture/import_zip.c, capture/import_pickle.c) and by torch.load /
np.load, which are the independent formulation here (the files are our own, so loading them with
torch is safe). Every float tensor must come back with the same name, shape and bits: FP32, FP64,
FP16 and BF16; views with a storage offset, transposed and sliced strides, a stride-0 expand, a
0-d scalar, an empty tensor, parameters, shared storages, nested dicts, lists and tuples, an
OrderedDict state dict with its _metadata, a bare tensor (named by the file's stem), pickle
protocols 2 and 4; integer tensors are listed in "other", never read. The import of a .pt through
the command line writes the same bits into the dump.
"""
import collections
import os
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
from tilescope import importer  # noqa: E402

c = Checks()
check = c.check
torch.manual_seed(3)


def flatten(obj, prefix=""):
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return {prefix: obj}
    out = {}
    for k, v in items:
        out.update(flatten(v, "%s.%s" % (prefix, k) if prefix else str(k)))
    return out


def bits(t):
    """A tensor's contiguous bits as a numpy array of the storage type read_tensor_file returns."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def same(path, want, what):
    """read_tensor_file(path) holds exactly the float tensors of want {name: tensor}."""
    got = importer.read_tensor_file(path)
    floats = {k: v for k, v in want.items() if torch.is_tensor(v) and v.is_floating_point()}
    bad = [k for k, v in floats.items()
           if k not in got or got[k][1].shape != tuple(v.shape) or not np.array_equal(got[k][1].reshape(-1).view(np.uint8),
                                                                                       bits(v).reshape(-1).view(np.uint8))]
    extra = sorted(set(got) - set(floats))
    return check(not bad and not extra, "%s: every float tensor bit for bit (wrong: %s; extra: %s)" % (what, bad[:5], extra[:5]))


def base():
    s = torch.randn(6, 8)
    p = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))
    shared = torch.randn(10)
    return {
        "f32": torch.randn(2, 3, 4), "f64": torch.randn(5, dtype=torch.float64),
        "f16": torch.randn(4, 4).half(), "bf16": (torch.randn(2, 2, 3, 8) * 3).bfloat16(),
        "view": s[2:, 1::2], "tr": s.t(), "expand": torch.randn(3, 1).expand(3, 5),
        "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 4), "param": p,
        "shared_a": shared[:4], "shared_b": shared[3:],
        "nest": {"a": [torch.randn(2), (torch.randn(1, 2).half(), {"deep": torch.randn(3).bfloat16()})]},
        "ints": torch.arange(6), "flag": torch.tensor([True, False]), "step": 7, "name": "run",
    }


with tempfile.TemporaryDirectory(prefix="tsc-pt-") as tmp:
    obj = base()
    want = flatten(obj)
    for fmt, zip_ in (("zip", True), ("legacy", False)):
        for proto in (2, 4):
            p = os.path.join(tmp, "a_%s_%d.pt" % (fmt, proto))
            torch.save(obj, p, _use_new_zipfile_serialization=zip_, pickle_protocol=proto)
            loaded = flatten(torch.load(p))  # our own file: a full load is safe here
            check(all(torch.equal(loaded[k], v) for k, v in want.items() if torch.is_tensor(v)), "torch itself reads %s" % p)
            same(p, loaded, "%s format, protocol %d" % (fmt, proto))
            L, h = importer._reader(), __import__("ctypes").c_void_p()
            tilescope._lib.check(L.tsc_tensor_file_open(__import__("ctypes").byref(h), p.encode()), p)
            js = tilescope._lib.json_of(L.tsc_tensor_file_json, h)
            L.tsc_tensor_file_close(h)
            check(sorted(o["name"] for o in js["other"]) == ["flag", "ints"]
                  and {o["name"]: o["dtype"] for o in js["other"]}["ints"] == "LongStorage",
                  "%s/%d: integer and bool tensors are listed as other, with their storage type: %s" % (fmt, proto, js["other"]))
    # a state dict (OrderedDict with _metadata, parameters) and a bare tensor
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3)).to(torch.bfloat16)
    sd = m.state_dict()
    check(isinstance(sd, collections.OrderedDict) and hasattr(sd, "_metadata"), "a state dict carries _metadata")
    for zip_ in (True, False):
        p = os.path.join(tmp, "sd_%d.pth" % zip_)
        torch.save(sd, p, _use_new_zipfile_serialization=zip_)
        same(p, dict(sd), "state dict (%s)" % ("zip" if zip_ else "legacy"))
        p = os.path.join(tmp, "wq_%d.pt" % zip_)
        t = torch.randn(4, 6).half()
        torch.save(t, p, _use_new_zipfile_serialization=zip_)
        same(p, {"wq_%d" % zip_: t}, "a bare tensor is named by the file's stem")
    # a model saved whole pickles its class: refused, not run
    p = os.path.join(tmp, "model.pt")
    torch.save(m, p)
    try:
        importer.read_tensor_file(p)
        check(False, "a whole nn.Module (its class pickled) is refused")
    except tilescope.TilescopeError as e:
        check("torch.nn.modules" in str(e) and "refused" in str(e) and p in str(e),
              "a whole nn.Module is refused naming the global: %s" % e)

    # .npz: stored and deflated, the float types; int arrays listed as other
    arrs = {"q": np.random.default_rng(1).standard_normal((2, 3, 5, 4)).astype(np.float32),
            "h": np.arange(12, dtype=np.float16).reshape(3, 4), "d": np.linspace(0, 1, 7),
            "zero": np.zeros((0, 3), np.float32), "i": np.arange(5)}
    for fn, label in ((np.savez, "stored"), (np.savez_compressed, "deflated")):
        p = os.path.join(tmp, "a_%s.npz" % label)
        fn(p, **arrs)
        with np.load(p) as z:
            ref = {k: torch.from_numpy(z[k]) for k in z.files}
        same(p, ref, ".npz %s" % label)
    big = np.random.default_rng(2).standard_normal((64, 1024)).astype(np.float32)
    p = os.path.join(tmp, "big.npz")
    np.savez_compressed(p, big=big, zeros=np.zeros((512, 512), np.float32))
    got = importer.read_tensor_file(p)
    check(np.array_equal(got["big"][1], big) and not got["zeros"][1].any(), ".npz deflated over many zlib chunks")

    # the command line: a .pt ([B, T, H, D] BF16 views) into a dump, bits kept, nothing run
    q = torch.randn(1, 8, 2, 4).bfloat16()
    k = torch.randn(1, 4, 8, 2).bfloat16().permute(0, 2, 3, 1)  # [1, 8, 2, 4] as a strided view
    p = os.path.join(tmp, "attn.pt")
    torch.save({"layers": [{"q": q, "k": k, "v": k}]}, p, _use_new_zipfile_serialization=False)
    out = os.path.join(tmp, "attn.h5")
    r = subprocess.run([os.environ["TSC"], "import", p, "-o", out, "--layout", "bthd"], capture_output=True, text=True)
    check(r.returncode == 0 and "3 datasets" in r.stdout, "tilescope import attn.pt: %s %s" % (r.stdout, r.stderr))
    if r.returncode == 0:
        with tilescope.Dump(out) as d:
            check(np.array_equal(d.read(0, 0, "q"), bits(q.transpose(1, 2))) and np.array_equal(d.read(0, 0, "k"), bits(k.transpose(1, 2))),
                  "the dump holds the views' bits, transposed to [B, H, T, D]")

    # the default maps are the library's, and both command lines' help texts list every one
    maps = importer.default_maps()
    check(len(maps) == 4 and maps[0] == "{name}" and "layers.{layer}.{name}" in maps, "default maps %r" % (maps,))
    for cmd in ([os.environ["TSC"], "import", "--help"], [sys.executable, "-m", "tilescope", "import", "--help"]):
        h = subprocess.run(cmd, capture_output=True, text=True)
        words = " ".join(h.stdout.split())
        check(h.returncode == 0 and all(m in words for m in maps), "%s lists every default map: %s" % (cmd[-2], words[:200]))
c.finish()
