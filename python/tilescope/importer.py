"""Import of tensors people already saved (.safetensors, .npy, .npz, torch .pt) into a dump.

    tilescope.import_tensors("attn.safetensors", "dump.h5", maps=["model.layers.{layer}.attn.{name}"])
    python3 -m tilescope import attn.pt -o dump.h5 --map 'blocks.{layer}.{name}' --map 'grad_o.{layer}=do'

A map is PATTERN or PATTERN=NAME: PATTERN is matched against the whole tensor name, with {step} and
{layer} matching integers, {name} one of the dump's dataset names (q k v o do lse x w_q w_k w_v
w_o) and * anything; =NAME gives the dataset when the pattern has no {name}. The first matching
map wins; tensors no map matches are listed as skipped. Without {step} the step is `step`
(default 0), without {layer} the layer is 0. The geometry comes from the tensors (q [B, H, T, D],
k [B, Hkv, T, D], or [B, T, H, D] with layout="bthd"); BF16 tensors are stored bit for bit.
"""
import ctypes
import os
import re

import numpy as np

from . import _lib
from .capture import Capture

NAMES = ("q", "k", "v", "o", "do", "lse", "x", "w_q", "w_k", "w_v", "w_o")
DEFAULT_MAPS = ("{name}", "step_{step}/layer_{layer}/{name}", "layer{layer}.{name}", "layers.{layer}.{name}")
def _fail(path, msg):
    raise _lib.TilescopeError("%s: %s" % (path, msg))


def _reader():
    """libtilescope with the tensor-file reader's functions declared (capture/tsc_import.h)."""
    L = _lib.lib()
    if not getattr(L, "_tsc_reader_declared", False):
        vp = ctypes.c_void_p
        for name, res, args in (("tsc_tensor_file_open", ctypes.c_int, [ctypes.POINTER(vp), ctypes.c_char_p]),
                                ("tsc_tensor_file_json", None, [vp, vp]),
                                ("tsc_tensor_file_read", ctypes.c_int, [vp, ctypes.c_int, vp]),
                                ("tsc_tensor_file_close", None, [vp])):
            getattr(L, name).restype, getattr(L, name).argtypes = res, args
        L._tsc_reader_declared = True
    return L


def read_tensor_file(path):
    """{name: (format, numpy array of the stored bits)} from a .safetensors or .npy file, read by
    libtilescope's reader (the one `tilescope import` uses): the whole header is checked first (header
    length, JSON, dtype, shape against data_offsets, overlap, truncation); BF16 comes as uint16 bits.
    Every inconsistency is a TilescopeError naming the file and the tensor."""
    L, h = _reader(), ctypes.c_void_p()
    _lib.check(L.tsc_tensor_file_open(ctypes.byref(h), str(path).encode()), str(path))
    try:
        out = {}
        for i, t in enumerate(_lib.json_of(L.tsc_tensor_file_json, h)["tensors"]):
            a = np.empty(t["shape"], dtype=_lib.NP_STORAGE[t["format"]])
            _lib.check(L.tsc_tensor_file_read(h, i, a.ctypes.data_as(ctypes.c_void_p)), str(path))
            out[t["name"]] = (t["format"], a)
        return out
    finally:
        L.tsc_tensor_file_close(h)


read_safetensors = read_tensor_file


def _flatten(obj, prefix=""):
    """{dotted name: tensor} from nested dicts/lists (a torch state dict, a dict of dicts)."""
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return {prefix: obj}
    out = {}
    for k, v in items:
        out.update(_flatten(v, "%s.%s" % (prefix, k) if prefix else str(k)))
    return out


def load_tensors(path):
    """{name: tensor-like} of a .safetensors, .npz, .npy (named by the file's stem) or torch .pt file
    (.safetensors and .npy through libtilescope's reader, .npz through numpy, .pt through torch)."""
    path = str(path)
    ext = os.path.splitext(path)[1].lower()
    if not os.path.isfile(path):
        _fail(path, "no such file")
    if ext in (".safetensors", ".npy"):
        return read_tensor_file(path)
    try:
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        if ext in (".pt", ".pth", ".bin"):
            import torch
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True)
            except TypeError:  # torch < 1.13.1 has no weights_only
                obj = torch.load(path, map_location="cpu")
            return {k: v for k, v in _flatten(obj).items() if torch.is_tensor(v)}
    except (OSError, ValueError, RuntimeError) as e:
        _fail(path, "cannot read: %s" % e)
    _fail(path, "unknown file type %r (.safetensors, .npz, .npy, .pt)" % ext)


def _compile(m):
    pat, _, target = m.partition("=")
    if target and target not in NAMES:
        raise ValueError("map %r: %r is not a dataset name (%s)" % (m, target, " ".join(NAMES)))
    rx = ""
    for tok in re.split(r"(\{step\}|\{layer\}|\{name\}|\*)", pat):
        rx += {"{step}": r"(?P<step>\d+)", "{layer}": r"(?P<layer>\d+)", "*": ".*",
               "{name}": "(?P<name>%s)" % "|".join(sorted(NAMES, key=len, reverse=True))}.get(tok, re.escape(tok))
    if "(?P<name>" not in rx and not target:
        raise ValueError("map %r: the pattern has no {name}: add =NAME (one of %s)" % (m, " ".join(NAMES)))
    return re.compile(rx + r"\Z"), target


def _as_host(path, name, t, layout, dname):
    """(array or tensor, fmt or None) with [B, T, H, D] -> [B, H, T, D] when layout is bthd."""
    if isinstance(t, tuple):  # from safetensors: (fmt, bits)
        fmt, t = t
    else:
        fmt = None
        dt = str(getattr(t, "dtype", ""))
        if not any(s in dt for s in ("float", "bfloat")):
            _fail(path, "tensor %r (-> %s): dtype %s is not floating-point" % (name, dname, dt))
    if layout == "bthd" and dname in ("q", "k", "v", "o", "do"):
        if len(t.shape) != 4:
            _fail(path, "tensor %r (-> %s): shape %s, [B, T, H, D] expected" % (name, dname, tuple(t.shape)))
        t = t.transpose(1, 2) if hasattr(t, "contiguous") else np.ascontiguousarray(t.transpose(0, 2, 1, 3))
    return t, fmt


def import_tensors(src, out, maps=None, step=0, causal=True, scale=None, policy="", layout="bhtd",
                   producer=None):
    """Writes the tensors of src that the maps select into the dump out. Returns {"path", "steps",
    "layers", "datasets", "skipped"}. TilescopeError naming the file and tensor for any tensor whose
    shape or dtype does not fit; ValueError for a bad map."""
    src = str(src)
    rules = [_compile(m) for m in (maps or DEFAULT_MAPS)]
    tensors = load_tensors(src)
    placed, skipped = {}, []
    for name, t in tensors.items():
        for rx, target in rules:
            mt = rx.match(name)
            if mt:
                g = mt.groupdict()
                key = (int(g.get("step") or step), int(g.get("layer") or 0), g.get("name") or target)
                if key in placed:
                    _fail(src, "tensors %r and %r both map to step %d layer %d %s" % ((placed[key][0], name) + key))
                placed[key] = (name, t)
                break
        else:
            skipped.append(name)
    if not any(k[2] == "q" for k in placed):
        _fail(src, "no tensor maps to q (tensors: %s; maps: %s)" % (", ".join(sorted(tensors)[:12]), ", ".join(maps or DEFAULT_MAPS)))
    host = {k: (n,) + _as_host(src, n, t, layout, k[2]) for k, (n, t) in placed.items()}
    q_key = min(k for k in host if k[2] == "q")
    q = host[q_key][1]
    kk = host.get(q_key[:2] + ("k",), (None, q))[1]
    x = next((v[1] for k, v in host.items() if k[2] == "x"), None)
    B, H, T, D = (int(d) for d in q.shape)
    meta = dict(n_layer=1 + max(k[1] for k in host), n_head=H, n_kv_head=int(kk.shape[1]), head_dim=D,
                d_model=int(x.shape[2]) if x is not None else H * D, seq_len=T, batch=B, causal=1 if causal else 0,
                softmax_scale=scale if scale else 1.0 / np.sqrt(D), tile_q=T, tile_k=T, policy=policy,
                producer=producer or "tilescope import (%s)" % os.path.basename(src))
    steps = sorted({k[0] for k in host})
    cap = Capture(out, meta)
    try:
        for s in steps:
            with cap.step(s):
                for (ks, layer, dname), (tname, t, fmt) in sorted(host.items()):
                    if ks != s:
                        continue
                    try:
                        cap.put(layer, dname, t, fmt=fmt)
                    except (_lib.TilescopeError, TypeError) as e:
                        _fail(src, "tensor %r (-> step %d layer %d %s): %s" % (tname, s, layer, dname, e))
    except BaseException:
        cap.close()
        if os.path.isfile(str(out)):
            os.remove(str(out))  # no partial dump left behind
        raise
    cap.close()
    return {"path": str(out), "steps": steps, "layers": sorted({k[1] for k in host}),
            "datasets": len(host), "skipped": sorted(skipped)}
