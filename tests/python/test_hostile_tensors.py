# ctest-labels: slow (over 5 s on 2 cores)
"""Tensor files from a stranger are data: each attack on `tilescope import` and the Python package,
built here byte by byte as a hostile sender would, is refused with a message naming the file, and
nothing in the file runs. Every code-running payload writes a marker file when run: the test fails
if a marker appears.

1. Code in a .pt pickle: a pickle on which torch's weights_only load raises TypeError before its
   call (the old importer then loaded it fully), GLOBAL posix.system / builtins.exec + REDUCE, STACK_GLOBAL, INST, OBJ,
   NEWOBJ, a callable hidden inside _rebuild_from_type_v2, OrderedDict called with arguments; in
   the zip and the legacy format, through `tilescope import`, `python3 -m tilescope import` and
   tilescope.import_tensors. A real torch.jit.save archive (TorchScript) is refused.
2. No interpreter is started on a tensor file: a numpy.py, torch.py and zipfile.py beside the file
   and in the working directory never run (and the import succeeds).
3. Declared sizes against the bytes present: a .pt storage member shorter than its tensor, a legacy
   record cut short, a tensor whose size/stride/offset reaches past its storage: refused at open
   (the Python API raises; the process does not crash).
4. Budgets: a small .npz whose member inflates to 256 MiB is refused under TSC_MAX_MEMORY=64M in
   bounded memory; overlapping zip members, a member that inflates past its declared size, a CRC
   mismatch; pickle bombs (a million MEMOIZEs, deep nesting, an exponential DAG of shared lists)
   end fast; a valid 30 000-tensor safetensors file (2 MB header) imports in bounded memory.
5. Text: step/layer numbers that do not fit are refused; names with terminal escapes are printed
   escaped by both command lines.
6. A symbolic link planted at a capture's session folder is not followed (another folder's
   step files and lock stay untouched).
"""
import io
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks, build_dir  # noqa: E402

import numpy as np  # noqa: E402

import tilescope  # noqa: E402
from tilescope import importer  # noqa: E402

c = Checks()
check = c.check
TSC = os.environ["TSC"]
ASAN = "TSC_SANITIZE:BOOL=ON" in open(os.path.join(build_dir(), "CMakeCache.txt")).read()
PY = sys.executable


def u8(op, *rest):
    return bytes([op]) + b"".join(rest)


def s(text):
    """BINUNICODE."""
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def glob(mod, name):
    return b"c" + mod.encode() + b"\n" + name.encode() + b"\n"


def zip_pt(path, pkl, members=None, prefix="archive"):
    """A torch-style zip archive: PREFIX/data.pkl, PREFIX/version and the storage members."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(prefix + "/data.pkl", pkl)
        z.writestr(prefix + "/version", "3\n")
        for k, v in (members or {}).items():
            z.writestr(prefix + "/data/" + k, v)


def legacy_pt(path, pkl, keys=b"\x80\x02]q\x00.", records=b""):
    """The legacy format: magic, protocol version, sys_info, the object pickle, keys, records."""
    magic = b"\x80\x02\x8a\x0a" + (0x1950a86a20f9469cfc6c).to_bytes(10, "little") + b"."
    proto = b"\x80\x02M\xe9\x03."
    sysinfo = b"\x80\x02}q\x00(" + s("little_endian") + b"\x88u."
    open(path, "wb").write(magic + proto + sysinfo + pkl + keys + records)


def rebuild(key, numel, offset, size, stride, storage="FloatStorage"):
    """_rebuild_tensor_v2((storage persid), offset, size, stride, False, OrderedDict())."""
    tup = lambda xs: b"(" + b"".join(b"J" + struct.pack("<i", x) for x in xs) + b"t"  # noqa: E731
    pid = b"(" + s("storage") + glob("torch", storage) + s(key) + s("cpu") + b"J" + struct.pack("<i", numel) + b"tQ"
    return (glob("torch._utils", "_rebuild_tensor_v2") + b"(" + pid + b"J" + struct.pack("<i", offset) + tup(size) +
            tup(stride) + b"\x89" + glob("collections", "OrderedDict") + b")Rt" + b"R")


def run(*args, env=None, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.time()
    p = subprocess.run(list(args), capture_output=True, env=e, cwd=cwd, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"), time.time() - t0


def peak_rss_mb(*args, env=None):
    """(exit code, stderr, peak RSS of the command in MiB), measured by a fresh parent."""
    e = dict(os.environ)
    e.update(env or {})
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True); "
            "sys.stderr.write(p.stderr.decode(errors='replace')); "
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    p = subprocess.run([PY, "-c", code] + list(args), capture_output=True, env=e, timeout=300)
    rc, kb = p.stdout.split()
    return int(rc), p.stderr.decode(errors="replace"), int(kb) / 1024


with tempfile.TemporaryDirectory(prefix="tsc-hostile-") as tmp:
    marker = os.path.join(tmp, "MARKER")
    cmd = "touch " + marker
    pyc = "open(%r, 'w').write('ran')" % marker

    # ------------------------------------------------------------ 1. code in a pickle
    payloads = {
        "system": b"\x80\x02" + glob("posix", "system") + s(cmd) + b"\x85R.",
        "os_system": b"\x80\x02" + glob("os", "system") + s(cmd) + b"\x85R.",
        "exec": b"\x80\x02" + glob("builtins", "exec") + s(pyc) + b"\x85R.",
        "stack_global": b"\x80\x04" + b"\x8c\x08builtins\x8c\x04exec\x93" + s(pyc) + b"\x85R.",
        "inst": b"\x80\x02(" + s(cmd) + b"iposix\nsystem\n.",
        "obj": b"\x80\x02(" + glob("posix", "system") + s(cmd) + b"o.",
        "newobj": b"\x80\x02" + glob("builtins", "object") + b")\x81.",
        "hidden": b"\x80\x02" + glob("torch._tensor", "_rebuild_from_type_v2") + b"(" + glob("posix", "system") +
                  glob("torch", "Tensor") + s(cmd) + b"\x85}tR.",
        "odict_args": b"\x80\x02" + glob("collections", "OrderedDict") + b"(" + s(cmd) + b"\x85tR.",
        # torch's weights_only unpickler raises TypeError on this BUILD (Tensor.set_(False, None, {}));
        # a full load accepts it (Tensor.__setstate__) and goes on to the call: an importer that
        # retried a TypeError with a full load ran the command
        "typeerror": b"\x80\x02" + rebuild("0", 4, 0, [4], [1]) + b"\x89N}\x87b0" + glob("posix", "system") + s(cmd) + b"\x85R.",
        # a state dict whose tensor is followed by a BUILD that would call __setstate__ elsewhere
        "build": b"\x80\x02}(" + s("q") + rebuild("0", 4, 0, [4], [1]) + b"u" + glob("posix", "system") + b"b.",
    }
    for name, pkl in payloads.items():
        for fmt in ("zip", "legacy"):
            p = os.path.join(tmp, "%s_%s.pt" % (name, fmt))
            if fmt == "zip":
                zip_pt(p, pkl, {"0": bytes(16)})
            else:
                legacy_pt(p, pkl)
            out = os.path.join(tmp, "x.h5")
            rc, so, se, _ = run(TSC, "import", p, "-o", out)
            rc2, _, se2, _ = run(PY, "-m", "tilescope", "import", p, "-o", out)
            try:
                importer.import_tensors(p, out)
                api = "imported"
            except Exception as e:  # noqa: BLE001 (anything but TilescopeError is a failure too)
                api = "%s: %s" % (type(e).__name__, e)
            check(rc == 1 and rc2 == 1 and p in se and "refused" in se and api.startswith("TilescopeError") and "refused" in api
                  and not os.path.exists(out),
                  "%s (%s): refused by the CLI, python3 -m tilescope and the API: %r %r %r" % (name, fmt, se.strip(), se2.strip(), api))
            check(not os.path.exists(marker), "%s (%s): the payload never ran" % (name, fmt))
    try:
        import torch
        m = torch.jit.script(torch.nn.Linear(2, 2))
        p = os.path.join(tmp, "scripted.pt")
        torch.jit.save(m, p)
        rc, _, se, _ = run(TSC, "import", p, "-o", os.path.join(tmp, "x.h5"))
        check(rc == 1 and "TorchScript" in se and p in se, "a TorchScript archive is refused with a message: %s" % se.strip())
    except ImportError:
        check(False, "torch is needed to write a TorchScript archive (apt-get install python3-torch)")

    # ------------------------------------------------------------ 2. no interpreter, no import path
    d = os.path.join(tmp, "plant")
    os.mkdir(d)
    for mod in ("numpy", "torch", "zipfile", "encodings", "site"):
        open(os.path.join(d, mod + ".py"), "w").write("open(%r, 'w').write('ran')\n" % marker)
    q = np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32)
    np.savez(os.path.join(d, "a.npz"), q=q)
    zip_pt(os.path.join(d, "a.pt"), b"\x80\x02}(" + s("q") + rebuild("0", 64, 0, [1, 2, 4, 8], [64, 32, 8, 1]) + b"u.",
           {"0": q.tobytes()})
    for f in ("a.npz", "a.pt"):
        rc, so, se, _ = run(TSC, "import", f, "-o", "out_" + f + ".h5", cwd=d)
        check(rc == 0 and not os.path.exists(marker), "%s beside planted numpy.py/torch.py imports, nothing planted runs: %s" % (f, se))
        if rc == 0:
            with tilescope.Dump(os.path.join(d, "out_" + f + ".h5")) as dd:
                check(np.array_equal(dd.read(0, 0, "q"), q), "%s: the values imported" % f)

    # ------------------------------------------------------------ 3. declared sizes vs bytes present
    obj = b"\x80\x02}(" + s("q") + rebuild("0", 64, 0, [1, 2, 4, 8], [64, 32, 8, 1]) + b"u."
    cases = {
        "short_member.pt": lambda p: zip_pt(p, obj, {"0": bytes(100)}),
        "short_record.pt": lambda p: legacy_pt(p, obj, b"\x80\x02]q\x00" + s("0") + b"a.",
                                               struct.pack("<q", 64) + bytes(100)),
        "record_count.pt": lambda p: legacy_pt(p, obj, b"\x80\x02]q\x00" + s("0") + b"a.",
                                               struct.pack("<q", 1 << 40) + bytes(256)),
        "stride.pt": lambda p: zip_pt(p, b"\x80\x02}(" + s("q") + rebuild("0", 64, 0, [1, 2, 4, 8], [64, 32, 9, 1]) + b"u.",
                                      {"0": bytes(256)}),
        "offset.pt": lambda p: zip_pt(p, b"\x80\x02}(" + s("q") + rebuild("0", 64, 60, [8], [1]) + b"u.", {"0": bytes(256)}),
        "no_member.pt": lambda p: zip_pt(p, obj, {}),
    }
    for name, make in cases.items():
        p = os.path.join(tmp, name)
        make(p)
        try:
            importer.read_tensor_file(p)
            check(False, "%s: a storage shorter than its tensor is refused" % name)
        except tilescope.TilescopeError as e:
            check(p in str(e), "%s refused at open, naming the file: %s" % (name, e))
        rc, _, se, _ = run(TSC, "import", p, "-o", os.path.join(tmp, "x.h5"))
        check(rc == 1 and p in se and "Sanitizer" not in se, "%s: tilescope import exits 1: %s" % (name, se.strip()))

    # ------------------------------------------------------------ 4. budgets
    bomb = os.path.join(tmp, "bomb.npz")
    n = 64 << 20  # float32 elements: 256 MiB inflated
    hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, %d, 1), }" % n
    hdr = b"\x93NUMPY\x01\x00" + struct.pack("<H", 118) + hdr.ljust(117) + b"\n"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("q.npy", "w", force_zip64=True) as f:
            f.write(hdr)
            zero = bytes(1 << 20)
            for _ in range(n * 4 >> 20):
                f.write(zero)
    check(os.path.getsize(bomb) < 1 << 20, "the bomb is small on disk (%d bytes)" % os.path.getsize(bomb))
    rc, se, mb = peak_rss_mb(TSC, "import", bomb, "-o", os.path.join(tmp, "x.h5"), env={"TSC_MAX_MEMORY": "64M"})
    print("npz bomb: exit %d, peak %.1f MiB" % (rc, mb))
    check(rc == 1 and "memory budget" in se and (ASAN or mb < 60), "the .npz bomb is refused by the budget in bounded memory "
          "(%.0f MiB peak): %s" % (mb, se.strip()))

    def patch_zip(src, dst, usize=None, crc=None):
        """Rewrites the first member's uncompressed size / CRC in the local and central headers."""
        b = bytearray(open(src, "rb").read())
        for sig, off_crc in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):
            i = b.index(sig)
            if crc is not None:
                b[i + off_crc:i + off_crc + 4] = struct.pack("<I", crc)
            if usize is not None:
                b[i + off_crc + 8:i + off_crc + 12] = struct.pack("<I", usize)
        open(dst, "wb").write(bytes(b))

    small = os.path.join(tmp, "small.npz")
    npy = io.BytesIO()
    np.save(npy, np.arange(8, dtype=np.float32))
    body = npy.getvalue()
    with zipfile.ZipFile(small, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("q.npy", body + bytes(64))  # 64 bytes more than the npy header declares
    patch_zip(small, os.path.join(tmp, "past.npz"), usize=len(body), crc=zlib.crc32(body))
    with zipfile.ZipFile(os.path.join(tmp, "crc.npz"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("q.npy", body)
    patch_zip(os.path.join(tmp, "crc.npz"), os.path.join(tmp, "crc.npz"), crc=12345)
    # two central-directory entries over one member's bytes
    with zipfile.ZipFile(os.path.join(tmp, "overlap.npz"), "w") as z:
        z.writestr("a.npy", body)
    raw = bytearray(open(os.path.join(tmp, "overlap.npz"), "rb").read())
    cd = raw.index(b"PK\x01\x02")
    eocd = raw.index(b"PK\x05\x06")
    entry = bytes(raw[cd:eocd]).replace(b"a.npy", b"b.npy")
    raw = raw[:eocd] + entry + raw[eocd:]
    e = raw.index(b"PK\x05\x06")
    raw[e + 8:e + 12] = struct.pack("<HH", 2, 2)
    raw[e + 12:e + 16] = struct.pack("<I", (eocd - cd) * 2)
    open(os.path.join(tmp, "overlap.npz"), "wb").write(bytes(raw))
    for name, words in (("past.npz", "inflates past"), ("crc.npz", "CRC"), ("overlap.npz", "share bytes")):
        p = os.path.join(tmp, name)
        try:
            importer.read_tensor_file(p)
            check(False, "%s is refused" % name)
        except tilescope.TilescopeError as e:
            check(words in str(e) and p in str(e), "%s refused: %s" % (name, e))

    bombs = {
        "memoize": b"\x80\x04]" + b"\x94" * (1 << 20) + b".",
        "dup": b"\x80\x02]" + b"2" * (1 << 20) + b".",
        "deep": b"\x80\x02" + b"]" * 100000 + b"a" * 99999 + b".",
        # l0 = []; each next list holds the previous twice: 2^60 paths through 60 lists
        "dag": b"\x80\x02]q\x00" + b"".join(b"(h%ch%clq%c" % (i, i, i + 1) for i in range(60)) + b".",
    }
    for name, pkl in bombs.items():
        p = os.path.join(tmp, name + ".pt")
        zip_pt(p, pkl)
        t0 = time.time()
        try:
            r = importer.read_tensor_file(p)
            ok = r == {}
        except tilescope.TilescopeError as e:
            ok = p in str(e)
        check(ok and time.time() - t0 < 30, "pickle bomb %s ends (read or refused) in %.1f s" % (name, time.time() - t0))

    many = os.path.join(tmp, "many.safetensors")
    header = {"q": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]}}
    for i in range(30000):
        header["model.layers.%05d.some_rather_long_parameter_name.weight" % i] = {"dtype": "F32", "shape": [1],
                                                                                   "data_offsets": [16 + 4 * i, 20 + 4 * i]}
    hb = json.dumps(header).encode()
    open(many, "wb").write(struct.pack("<Q", len(hb)) + hb + bytes(16 + 4 * 30000))
    rc, se, mb = peak_rss_mb(TSC, "import", many, "-o", os.path.join(tmp, "many.h5"))
    print("30 000-tensor safetensors: exit %d, peak %.1f MiB" % (rc, mb))
    check(rc == 0 and (ASAN or mb < 150), "30 000 tensors, a %d-byte header: imported in %.0f MiB peak: %s" % (len(hb), mb, se.strip()))

    # ------------------------------------------------------------ 5. numbers and names
    def st_file(path, names):
        h, off = {}, 0
        for nm in names:
            h[nm] = {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [off, off + 16]}
            off += 16
        b = json.dumps(h).encode()
        open(path, "wb").write(struct.pack("<Q", len(b)) + b + bytes(off))
    p = os.path.join(tmp, "big_layer.safetensors")
    for nm in ("layers.99999999999999999999.q", "layers.70000.q", "step_99999999999999999999/layer_0/q"):
        st_file(p, [nm])
        rc, _, se, _ = run(TSC, "import", p, "-o", os.path.join(tmp, "x.h5"))
        check(rc == 1 and "too large" in se, "%s: a number that does not fit is refused, not wrapped: %s" % (nm, se.strip()))
    p = os.path.join(tmp, "esc.safetensors")
    st_file(p, ["q", "evil\x1b[2J\x1b]0;owned\x07name"])
    for argv in ([TSC], [PY, "-m", "tilescope"]):
        rc, so, se, _ = run(*(argv + ["import", p, "-o", os.path.join(tmp, "esc.h5")]))
        check(rc == 0 and "\x1b" not in so + se and "\x07" not in so and "\\x1b" in so,
              "%s: a name with terminal escapes is printed escaped: %r" % (argv[-1], so))

    # ------------------------------------------------------------ 6. no link followed at the session folder
    victim = os.path.join(tmp, "victim")
    os.mkdir(victim)
    for f in ("step_00000000.h5", "session.lock"):
        open(os.path.join(victim, f), "w").write("precious")
    out = os.path.join(tmp, "cap.h5")
    os.symlink(victim, out + ".capture")
    meta = dict(n_layer=1, n_head=1, n_kv_head=1, head_dim=2, d_model=2, seq_len=2, batch=1, causal=1,
                softmax_scale=0.7, tile_q=2, tile_k=2, policy="", producer="test")
    try:
        cap = tilescope.Capture(out, meta)
        cap.close()
        check(False, "a capture whose session folder is a planted link is refused")
    except tilescope.TilescopeError as e:
        check("not followed" in str(e), "a planted link at the session folder is refused: %s" % e)
    check(all(open(os.path.join(victim, f)).read() == "precious" for f in ("step_00000000.h5", "session.lock"))
          and sorted(os.listdir(victim)) == ["session.lock", "step_00000000.h5"], "the linked folder's files are untouched")
    check(not os.path.exists(marker), "no payload ran anywhere in this test")
c.finish()
