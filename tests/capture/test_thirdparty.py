"""Dumps written by other programs: examples/write_dump.py (the documented h5py writer of
docs/FORMAT.md §1) and the mistakes such writers make.

(a) A dump from write_dump is accepted by `tilescope info` and replayed under fp32 and bf16-fa2;
    replay's O agrees with a float64 numpy softmax attention of the stored (BF16-rounded) inputs,
    and the stored BF16 bits are rounded to nearest even (HDF5's own conversion rounds half-way
    cases away from zero: measured here too, since docs/FORMAT.md §1.4 quotes it).
(b) Every writing mistake gets its exact message and exit status: string attributes in each HDF5
    padding (NULLPAD, NULLTERM, SPACEPAD, variable-length) read right; several missing root
    attributes are reported together in one run; a step without 'complete'; dtype attributes that
    contradict the storage; an untiled dump without tile_q/tile_k/policy/producer is accepted.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from tsc_testlib import Checks  # noqa: E402
from write_dump import bf16_bits, bf16_round, bf16_type, write_dump  # noqa: E402

TSC = os.environ["TSC"]
checks = Checks()
check = checks.check
B, H, HKV, T, D, LAYER = 1, 4, 2, 32, 16, 1


def run(*args):
    r = subprocess.run([TSC, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def tensors(seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, T, D)).astype(np.float32)
    q[0, 0, 0, 0] = 1.00390625          # exactly half-way between BF16 1.0 (even) and 1.0078125
    k = rng.standard_normal((B, HKV, T, D)).astype(np.float32)
    v = rng.standard_normal((B, HKV, T, D)).astype(np.float32)
    do = (1e-3 * rng.standard_normal((B, H, T, D))).astype(np.float32)
    return q, k, v, do


def attention(q, k, v, scale):
    """float64 causal softmax attention, grouped-query: head h reads kv head h // (H / Hkv)."""
    kk = np.repeat(k.astype(np.float64), H // HKV, axis=1)
    vv = np.repeat(v.astype(np.float64), H // HKV, axis=1)
    s = scale * np.einsum("bhtd,bhsd->bhts", q.astype(np.float64), kk)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    lse = np.log(p.sum(-1)) + s.max(-1)
    return np.einsum("bhts,bhsd->bhtd", p / p.sum(-1, keepdims=True), vv), lse


def good_dump(path, **kw):
    q, k, v, do = tensors(7)
    o, lse = attention(bf16_round(q), bf16_round(k), bf16_round(v), 1 / np.sqrt(D))
    args = dict(n_layer=2, causal=True, dtype="bf16", policy="bf16-torch", producer="test_thirdparty", tile_q=16,
                tile_k=16)
    args.update(kw)
    write_dump(path, {0: {LAYER: {"q": q, "k": k, "v": v, "o": o, "do": do, "lse": lse}}}, **args)
    return q, k, v


def expect(what, rc_want, got, text, where="stderr"):
    rc, out, err = got
    hay = err if where == "stderr" else out
    check(rc == rc_want and text in hay, f"{what}: exit {rc} (want {rc_want}); expected {text!r} in {where}:\n"
          f"--- stdout\n{out}--- stderr\n{err}")


with tempfile.TemporaryDirectory() as tmp:
    def p(name):
        return os.path.join(tmp, name)

    # ---- (a) the documented writer's dump is accepted and replays to the right values -------------
    q, k, v = good_dump(p("good.h5"))
    rc, out, err = run("info", p("good.h5"))
    check(rc == 0 and "validation: ok (every chunk read)" in out and "producer test_thirdparty, policy bf16-torch"
          in out and "q[1,4,32,16] bf16" in out and "lse[1,4,32] fp32" in out, f"info good.h5: {rc}\n{out}{err}")
    with h5py.File(p("good.h5"), "r") as f:
        ds = f[f"step_00000000/layer_{LAYER:03d}/q"]
        bits = np.empty(ds.shape, np.uint16)
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=ds.id.get_type())
    check(bits[0, 0, 0, 0] == 0x3F80, f"half-way 1.00390625 stored as {bits[0, 0, 0, 0]:#06x}, want 0x3f80 (RNE)")
    check(np.array_equal(bits, bf16_bits(q)), "stored BF16 bits are the writer's RNE bits")
    # what HDF5 itself does with the same float32 (docs/FORMAT.md §1.4 quotes this measurement)
    with h5py.File(p("hdf5conv.h5"), "w") as f:
        t = bf16_type()
        x = np.array([1.00390625, -1.00390625, 2.0078125], np.float32)
        dsid = h5py.h5d.create(f.id, b"x", t, h5py.h5s.create_simple(x.shape))
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, x)                       # float32 in memory: HDF5 converts
        hb = np.empty(x.shape, np.uint16)
        dsid.read(h5py.h5s.ALL, h5py.h5s.ALL, hb, mtype=t)
    check(list(hb) == [0x3F81, 0xBF81, 0x4001] and list(bf16_bits(x)) == [0x3F80, 0xBF80, 0x4000],
          f"HDF5 rounds half-way away from zero: {[hex(b) for b in hb]}")

    rc, out, err = run("replay", p("good.h5"), "--policy", "fp32", "--policy", "bf16-fa2", "-o", p("r.h5"), "--quiet")
    check(rc == 0, f"replay good.h5: {rc}\n{out}{err}")
    if rc == 0:
        want, want_lse = attention(bf16_round(q), bf16_round(k), bf16_round(v), 1 / np.sqrt(D))
        with h5py.File(p("r.h5"), "r") as f:
            g = f[f"step_00000000/layer_{LAYER:03d}"]
            o32, lse32 = g["policy_0/o"].astype("float64")[()], g["policy_0/lse"].astype("float64")[()]
            o16 = g["policy_1/o"].astype("float64")[()]
        check(np.abs(o32 - want).max() < 1e-5, f"fp32 O vs float64 numpy: {np.abs(o32 - want).max():.3g}")
        check(np.abs(lse32 - want_lse).max() < 1e-4, f"fp32 lse vs numpy: {np.abs(lse32 - want_lse).max():.3g}")
        rel = np.abs(o16 - want).max() / np.abs(want).max()
        check(0 < rel < 2e-2, f"bf16-fa2 O vs float64 numpy: relative error {rel:.3g}")

    # ---- (b1) string attributes in every HDF5 padding ---------------------------------------------
    def fixed(obj, name, text, size, pad):
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(size)
        tid.set_strpad(pad)
        if name in obj.attrs:
            del obj.attrs[name]
        aid = h5py.h5a.create(obj.id, name.encode(), tid, h5py.h5s.create(h5py.h5s.SCALAR))
        aid.write(np.array(text.encode(), dtype=f"S{size}"), mtype=tid)

    kinds = {
        "nullpad": lambda f, n, s: f.attrs.__setitem__(n, np.bytes_(s)),                      # h5py's np.bytes_
        "nullpad-dtype": lambda f, n, s: f.attrs.create(n, s, dtype=h5py.string_dtype(length=len(s))),
        "nullterm": lambda f, n, s: fixed(f, n, s, len(s) + 1, h5py.h5t.STR_NULLTERM),
        "nullterm-full": lambda f, n, s: fixed(f, n, s, len(s), h5py.h5t.STR_NULLTERM),   # no room for the NUL
        "spacepad": lambda f, n, s: fixed(f, n, s, len(s) + 5, h5py.h5t.STR_SPACEPAD),
        "spacepad-full": lambda f, n, s: fixed(f, n, s, len(s), h5py.h5t.STR_SPACEPAD),
        "vlen": lambda f, n, s: f.attrs.__setitem__(n, s),
    }
    for kind, put in kinds.items():
        good_dump(p(f"str_{kind}.h5"))
        with h5py.File(p(f"str_{kind}.h5"), "r+") as f:
            for name, text in (("format", "tilescope-dump"), ("policy", "bf16-torch"), ("producer", "torch eager")):
                put(f, name, text)
            ds = f[f"step_00000000/layer_{LAYER:03d}/q"]
            put(ds, "dtype", "bf16")
        rc, out, err = run("info", p(f"str_{kind}.h5"), "--json")
        meta = json.loads(out)["meta"] if rc == 0 else {}
        check(rc == 0 and meta.get("policy") == "bf16-torch" and meta.get("producer") == "torch eager",
              f"{kind} strings: exit {rc}, meta {meta}\n{err}")
        expect(f"{kind} strings (text)", 0, run("info", p(f"str_{kind}.h5")),
               "producer torch eager, policy bf16-torch, rank 0 of 1", "stdout")

    # ---- (b2) several missing root attributes: every one named, in one run ------------------------
    good_dump(p("noroot.h5"))
    with h5py.File(p("noroot.h5"), "r+") as f:
        for name in ("format", "seq_len", "softmax_scale"):
            del f.attrs[name]
    expect("three missing root attributes", 1, run("info", p("noroot.h5")),
           f"tilescope info: {p('noroot.h5')}: 3 problems: not a tilescope dump (root attribute 'format' is missing; "
           "expected 'tilescope-dump'); root attribute 'seq_len' is missing; root attribute 'softmax_scale' is "
           "missing\n")
    expect("replay names them too", 1, run("replay", p("noroot.h5"), "--policy", "fp32", "-o", p("x.h5")),
           "3 problems: not a tilescope dump (root attribute 'format' is missing")
    # with the geometry intact, the datasets' errors join the root's in the same message
    good_dump(p("rootshape.h5"))
    with h5py.File(p("rootshape.h5"), "r+") as f:
        del f.attrs["format"], f.attrs["format_version"]
        g = f[f"step_00000000/layer_{LAYER:03d}"]
        del g["v"]
        g.create_dataset("v", data=np.zeros((B, HKV, T - 1, D), np.float32))
        del g["k"]
    expect("root and dataset problems together", 1, run("info", p("rootshape.h5")),
           f"{p('rootshape.h5')}: 4 problems: not a tilescope dump (root attribute 'format' is missing; expected "
           "'tilescope-dump'); root attribute 'format_version' is missing; step 0, layer 1: dataset 'k' is missing; "
           "dataset step_00000000/layer_001/v has shape [1, 2, 31, 16], the metadata implies [1, 2, 32, 16]\n")
    # the cap: 60 bad layers list 50 problems and count the rest
    good_dump(p("many.h5"), n_layer=64)
    with h5py.File(p("many.h5"), "r+") as f:
        del f.attrs["format"]
        for layer in range(2, 62):
            f["step_00000000"].create_group(f"layer_{layer:03d}")
    rc, out, err = run("info", p("many.h5"))
    # 1 + 60 layers x 3 datasets: 50 listed (the root's, then 49 of the layers'), 131 counted
    check(rc == 1 and ": 181 problems: not a tilescope dump" in err and err.count("dataset '") == 49
          and err.rstrip().endswith("step 0, layer 18: dataset 'q' is missing; and 131 more"),
          f"capped list: exit {rc}, {err[-300:]}")

    # ---- (b3) a step without 'complete', and one that says it is not complete ---------------------
    good_dump(p("nocomplete.h5"))
    with h5py.File(p("nocomplete.h5"), "r+") as f:
        del f["step_00000000"].attrs["complete"]
    expect("missing complete", 1, run("info", p("nocomplete.h5")),
           "    error: step_00000000: group attribute 'complete' is missing (a writer sets complete = 1 after the "
           "step's datasets); the step is ignored\n", "stdout")
    good_dump(p("stopped.h5"))
    with h5py.File(p("stopped.h5"), "r+") as f:
        f["step_00000000"].attrs["complete"] = np.int64(0)
    expect("complete = 0", 0, run("info", p("stopped.h5")),
           "    warning: step 0 is incomplete (the writer stopped during it); it is ignored\n", "stdout")

    # ---- (b4) dtype attributes that contradict the storage ----------------------------------------
    ds_path = f"step_00000000/layer_{LAYER:03d}/q"
    where = f"{p('dt_fp32vals.h5')}: dataset {ds_path}"
    for name, data, attr in (("dt_fp32vals", q, "bf16"), ("dt_bf16vals", bf16_round(q), "bf16"),
                             ("dt_int", np.zeros(q.shape, np.int32), "fp32"),
                             ("dt_u16", bf16_bits(q), "fp32"), ("dt_narrow", None, "fp32"),
                             ("dt_name", None, "bfloat")):
        good_dump(p(f"{name}.h5"))
        with h5py.File(p(f"{name}.h5"), "r+") as f:
            if data is not None:
                del f[ds_path]
                f.create_dataset(ds_path, data=data, chunks=(1, 1, T, D))
            f[ds_path].attrs["dtype"] = attr
    expect("bf16 attribute on float32 values that are not bf16", 1, run("info", p("dt_fp32vals.h5")),
           f"    error: {where}: its dtype attribute says 'bf16' but it is stored as fp32 holding values that are "
           "not bf16 (batch 0, head 0, element 0 = 1.00390625)\n", "stdout")
    expect("replay refuses them too", 1, run("replay", p("dt_fp32vals.h5"), "--policy", "fp32", "-o", p("x.h5")),
           "its dtype attribute says 'bf16' but it is stored as fp32 holding values that are not bf16")
    expect("bf16 attribute on float32 values that are bf16", 0, run("info", p("dt_bf16vals.h5")),
           "validation: ok", "stdout")
    expect("fp32 attribute on int32", 1, run("info", p("dt_int.h5")),
           f"    error: {p('dt_int.h5')}: dataset {ds_path}: its dtype attribute says 'fp32' but the stored type is "
           "not floating-point (int32); format v1 stores each dtype as a floating-point HDF5 type of its own layout "
           "(docs/FORMAT.md §1.4)\n", "stdout")
    expect("fp32 attribute on uint16", 1, run("info", p("dt_u16.h5")),
           "its dtype attribute says 'fp32' but the stored type is not floating-point (uint16)", "stdout")
    expect("fp32 attribute on bf16 storage", 1, run("info", p("dt_narrow.h5")),
           f"    error: {p('dt_narrow.h5')}: dataset {ds_path}: its dtype attribute says 'fp32' but it is stored as "
           "bf16, which cannot hold every fp32 value\n", "stdout")
    expect("unknown dtype name", 1, run("info", p("dt_name.h5")),
           f"dataset {ds_path}: its dtype attribute 'bfloat' is not a number format name (fp64, fp32, tf32, bf16, "
           "fp16, fp8-e4m3, fp8-e5m2, e8m6, e8m5, e8m4, e8m3, e8m2, e8m1)\n", "stdout")

    # ---- (b5) an untiled kernel's dump: no tile_q, tile_k, policy, producer -----------------------
    good_dump(p("eager.h5"), policy=None, producer=None, tile_q=None, tile_k=None, dtype="fp32")
    rc, out, err = run("info", p("eager.h5"))
    check(rc == 0 and "producer unknown, policy (none recorded), rank 0 of 1" in out and "tiles 32 x 32" in out
          and "validation: ok" in out, f"untiled dump: exit {rc}\n{out}{err}")
    rc, out, err = run("info", p("eager.h5"), "--json")
    meta = json.loads(out)["meta"] if rc == 0 else {}
    check(meta.get("policy") == "" and meta.get("producer") == "unknown" and meta.get("tile_q") == T
          and meta.get("tile_k") == T, f"untiled dump --json meta: {meta}")
    for extra in ([], ["--dump-tiles"]):
        rc, out, err = run("replay", p("eager.h5"), "--policy", "fp32", "--policy", "bf16-fa2", "-o", p("r2.h5"),
                           *extra)
        check(rc == 0 and "run policy '(none recorded)'" in out, f"replay untiled {extra}: {rc}\n{out}{err}")

checks.finish()
