"""Interop of dump format v1 with h5py and h5dump.

1. h5py reads q/k/v of a dump `tilescope synth` wrote (GQA shape) and gets exactly the values
   our reader (libtilescope through ctypes) returns, as floats and as raw bits.
2. Our reader reads a dump that h5py wrote by following docs/FORMAT.md section 1, holding every
   BF16 and FP16 bit pattern and every FP8 E4M3/E5M2 pattern; values must equal the exact decoding.
   `tilescope info` must accept that file.
3. h5dump prints the right value of a known BF16 element (-4.71875, bits 0xc097).
4. Documents HDF5's view of E4M3's top binade: 0x78 (256) reads as inf through HDF5, our reader 256.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks, build_dir, load_library  # noqa: E402

TSC = os.environ["TSC"]
BUILD = build_dir()
checks = Checks()
check = checks.check
lib = load_library()

lib.tsc_dump_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
lib.tsc_dump_open.restype = ctypes.c_int
lib.tsc_dump_read.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                              ctypes.c_int, ctypes.c_void_p]
lib.tsc_dump_read.restype = ctypes.c_int
lib.tsc_dump_read_raw.argtypes = lib.tsc_dump_read.argtypes
lib.tsc_dump_read_raw.restype = ctypes.c_int
lib.tsc_dump_close.argtypes = [ctypes.c_void_p]
lib.tsc_error_last.restype = ctypes.c_char_p


class Reader:
    def __init__(self, path):
        self.d = ctypes.c_void_p()
        st = lib.tsc_dump_open(ctypes.byref(self.d), path.encode())
        if st != 0:
            raise RuntimeError(lib.tsc_error_last().decode())

    def read(self, step, layer, name, b, h, n, raw_dtype=None):
        if raw_dtype is None:
            out = np.empty(n, np.float32)
            st = lib.tsc_dump_read(self.d, step, layer, name.encode(), b, h, out.ctypes.data)
        else:
            out = np.empty(n, raw_dtype)
            st = lib.tsc_dump_read_raw(self.d, step, layer, name.encode(), b, h, out.ctypes.data)
        if st != 0:
            raise RuntimeError(lib.tsc_error_last().decode())
        return out

    def close(self):
        lib.tsc_dump_close(self.d)


def raw_of(ds):
    """The stored bits of a dataset, read with its own file type as memory type (no conversion)."""
    size = ds.id.get_type().get_size()
    out = np.empty(ds.shape, {1: np.uint8, 2: np.uint16, 4: np.uint32}[size])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ds.id.get_type())
    return out


def float_type(size, spos, epos, esize, mpos, msize, ebias):
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(spos, epos, esize, mpos, msize)
    t.set_offset(0)
    t.set_precision(size * 8)
    t.set_size(size)
    t.set_ebias(ebias)
    return t


BF16 = float_type(2, 15, 7, 8, 0, 7, 127)
E4M3 = float_type(1, 7, 3, 4, 0, 3, 7)
E5M2 = float_type(1, 7, 2, 5, 0, 2, 15)


def decode_minifloat(bits, ebits, mbits, bias, e4m3=False):
    bits = bits.astype(np.int64)
    s = np.where(bits >> (ebits + mbits) & 1, -1.0, 1.0)
    e = (bits >> mbits) & ((1 << ebits) - 1)
    m = bits & ((1 << mbits) - 1)
    val = np.where(e == 0, m * 2.0 ** (1 - bias - mbits), (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias))
    top = e == (1 << ebits) - 1
    if e4m3:
        val = np.where(top & (m == 7), np.nan, val)
    else:
        val = np.where(top, np.where(m == 0, np.inf, np.nan), val)
    return s * val


with tempfile.TemporaryDirectory() as tmp:
    # ---- 1. h5py reads what tilescope wrote --------------------------------------------------------
    path = os.path.join(tmp, "synth.h5")
    subprocess.run([TSC, "synth", "-o", path, "--shape", "llama-gqa", "--steps", "0", "--layers", "1", "-q"],
                   check=True)
    f = h5py.File(path, "r")
    B, H, K, T, D = (int(f.attrs[k]) for k in ("batch", "n_head", "n_kv_head", "seq_len", "head_dim"))
    check(f.attrs["format"] == "tilescope-dump" and int(f.attrs["format_version"]) == 1, "root attributes")
    r = Reader(path)
    grp = f["step_00000000/layer_001"]
    for name, nh in (("q", H), ("k", K), ("v", K)):
        ds = grp[name]
        check(ds.shape == (B, nh, T, D), f"{name} shape {ds.shape}")
        check(ds.attrs["dtype"] == "bf16" and ds.attrs["dims"].startswith("batch,"), f"{name} attributes")
        check(ds.chunks == (1, 1, T, D), f"{name} chunks {ds.chunks}")
        vals = ds.astype("float32")[()]
        bits = raw_of(ds)
        # h5py's conversion through HDF5 equals the exact decoding of the bits
        check(np.array_equal(vals, (bits.astype(np.uint32) << 16).view(np.float32)), f"{name}: HDF5 conversion")
        for b in range(B):
            for h in range(nh):
                ours = r.read(0, 1, name, b, h, T * D).reshape(T, D)
                check(np.array_equal(ours, vals[b, h]), f"{name}[{b},{h}] float values differ")
                ours_raw = r.read(0, 1, name, b, h, T * D, np.uint16).reshape(T, D)
                check(np.array_equal(ours_raw, bits[b, h]), f"{name}[{b},{h}] raw bits differ")
    lse = grp["lse"][()]
    check(lse.dtype == np.float32, "lse is float32")
    check(np.array_equal(r.read(0, 1, "lse", 0, 5, T), lse[0, 5]), "lse values")
    r.close()
    f.close()

    # ---- 2. our reader reads what h5py wrote, following docs/FORMAT.md -----------------------------
    path2 = os.path.join(tmp, "by_h5py.h5")
    B, H, K, T, D = 1, 4, 2, 64, 256          # q/o/do hold all 65536 BF16 patterns: 4 * 64 * 256
    with h5py.File(path2, "w") as g:
        a = g.attrs
        a["format"] = "tilescope-dump"
        a["format_version"] = 1
        for k, v in dict(n_layer=2, n_head=H, n_kv_head=K, head_dim=D, d_model=32, seq_len=T, batch=B, causal=1,
                         tile_q=64, tile_k=64, rank=0, world_size=1).items():
            a[k] = np.int64(v)
        a["softmax_scale"] = 1.0 / 16
        a["policy"] = "bf16-fa2"
        a["producer"] = "h5py interop test"
        step = g.create_group("step_00000003")
        layer = step.create_group("layer_001")
        all_bf16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).reshape(B, H, T, D)
        all_bf16[0, 1, 8, 0] = 0xC097                       # the paper's -4.71875, at a known place

        def put(name, ftype, bits, dims):
            sid = h5py.h5s.create_simple(bits.shape)
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((1, 1) + bits.shape[2:])
            ds = h5py.h5d.create(layer.id, name.encode(), ftype, sid, dcpl=dcpl)
            ds.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=ftype)
            layer[name].attrs["dtype"] = {2: "bf16", 1: "fp8-e4m3"}[ftype.get_size()]  # format names, §1.3
            layer[name].attrs["dims"] = dims
            layer[name].attrs["units"] = "activation"

        put("q", BF16, all_bf16, "batch,head,token,feature")
        put("o", BF16, all_bf16[:, ::-1].copy(), "batch,head,token,feature")
        put("do", BF16, all_bf16, "batch,head,token,feature")
        fp16_bits = np.arange(K * T * D, dtype=np.uint32).astype(np.uint16).reshape(B, K, T, D)
        layer.create_dataset("k", data=fp16_bits.view(np.float16), chunks=(1, 1, T, D))   # IEEE half
        layer["k"].attrs["dtype"] = "fp16"
        fp8 = (np.arange(K * T * D) % 256).astype(np.uint8).reshape(B, K, T, D)
        put("v", E4M3, fp8, "batch,kv_head,token,feature")
        layer.create_dataset("lse", data=np.linspace(-3, 3, B * H * T, dtype=np.float32).reshape(B, H, T))
        tiles = step.create_group("layer_000")
        for nm in ("q", "o", "do"):
            tiles.create_dataset(nm, data=np.zeros((B, H, T, D), np.float32))
        for nm in ("k", "v"):
            tiles.create_dataset(nm, data=np.zeros((B, K, T, D), np.float32))
        sid = h5py.h5s.create_simple((B, K, T, D))
        h5py.h5d.create(tiles.id, b"e5m2", E5M2, sid)       # an extra dataset the validator ignores
        tiles.create_dataset("lse", data=np.zeros((B, H, T), np.float32))
        step.attrs["complete"] = np.int64(1)
    r = Reader(path2)
    bad = 0
    for h in range(H):
        got = r.read(3, 1, "q", 0, h, T * D)
        want = (all_bf16[0, h].astype(np.uint32).ravel() << 16).view(np.float32)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        bad += int((~same).sum())
        raw = r.read(3, 1, "q", 0, h, T * D, np.uint16)
        bad += int((raw != all_bf16[0, h].ravel()).sum())
    check(bad == 0, f"BF16 patterns read by our reader: {bad} differ")
    for h in range(K):
        got = r.read(3, 1, "k", 0, h, T * D)
        want = fp16_bits[0, h].ravel().view(np.float16).astype(np.float32)
        check(np.array_equal(got, want, equal_nan=True), f"FP16 head {h}")
        got = r.read(3, 1, "v", 0, h, T * D)
        want = decode_minifloat(fp8[0, h].ravel(), 4, 3, 7, e4m3=True).astype(np.float32)
        check(np.array_equal(got, want, equal_nan=True), f"E4M3 head {h}")
    r.close()
    res = subprocess.run([TSC, "info", path2], capture_output=True, text=True)
    check(res.returncode == 0, "tilescope info on the h5py-written dump: " + res.stdout + res.stderr)
    check("steps: 1 complete (3)" in res.stdout and "q[1,4,64,256] bf16" in res.stdout
          and "v[1,2,64,256] fp8-e4m3" in res.stdout and "k[1,2,64,256] fp16" in res.stdout, res.stdout)

    # ---- 3. h5dump prints the known BF16 element ----------------------------------------------------
    res = subprocess.run(["h5dump", "-d", "/step_00000003/layer_001/q", "-s", "0,1,8,0", "-c", "1,1,1,1", path2],
                         capture_output=True, text=True)
    check(res.returncode == 0 and "(0,1,8,0): -4.71875" in res.stdout, "h5dump output:\n" + res.stdout)

    # ---- 4. E4M3's top binade through HDF5 (documented in docs/FORMAT.md) ---------------------------
    with h5py.File(path2, "r") as g:
        v = g["step_00000003/layer_001/v"].astype("float32")[()].ravel()
    check(np.isinf(v[0x78]) and v[0x78] > 0, "HDF5 reads E4M3 0x78 as +inf (IEEE rules)")
    check(np.isnan(v[0x79]) and np.isnan(v[0x7e]), "HDF5 reads E4M3 0x79..0x7e as NaN")
    check(v[0x77] == 240.0 and v[0x01] == 2.0 ** -9, "HDF5 reads the rest of E4M3 exactly")
    r = Reader(path2)
    ours = r.read(3, 1, "v", 0, 0, T * D)
    check(ours[0x78] == 256.0 and ours[0x7e] == 448.0 and np.isnan(ours[0x7f]), "our reader: 256, 448, NaN")
    r.close()

checks.finish()
