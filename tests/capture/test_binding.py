"""libtilescope as a binding sees it (ctypes): nothing but the documented surface.

1. Every exported symbol is a public tsc_* function (hidden visibility keeps the rest in).
2. tsc_version() and tsc_version_number() agree with each other and with `tilescope --version`.
3. A dump's description through tsc_info_read + tsc_info_json into a heap writer (tsc_json_new):
   the binding never needs a struct's layout, only pointers and the JSON text, and the numbers
   match what h5py reads from the same file.
4. The library leaves the host's HDF5 error printing alone: h5py's own failing open still raises
   its normal exception after the library has failed on a bad file.
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks, build_dir, load_library  # noqa: E402

import h5py  # noqa: E402

checks = Checks()
check = checks.check
lib = load_library()
TSC = os.environ["TSC"]

# 1. exported symbols
nm = subprocess.run(["nm", "-D", "--defined-only", os.path.join(build_dir(), "libtilescope.so")],
                    capture_output=True, text=True)
if nm.returncode == 0:
    names = [ln.split()[-1] for ln in nm.stdout.splitlines() if ln.strip()]
    # names starting with "." are the OpenMP runtime's compiler-made locks (clang's reductions), not API
    stray = [n for n in names if not n.startswith(("tsc_", ".")) and n not in ("_init", "_fini")]
    check(len(names) > 100, "libtilescope exports its API (%d symbols)" % len(names))
    check(not stray, "only tsc_* symbols exported, found: %s" % stray[:10])
    check("tsc_cli_fail" not in names and "an_write_group" not in names, "internal helpers stay hidden")
else:
    check(False, "nm failed: " + nm.stderr)

# 2. version
lib.tsc_version.restype = ctypes.c_char_p
v = lib.tsc_version().decode()
major, minor, patch = (int(x) for x in v.split("."))
check(lib.tsc_version_number() == major * 10000 + minor * 100 + patch, "tsc_version_number matches " + v)
out = subprocess.run([TSC, "--version"], capture_output=True, text=True).stdout.strip()
check(out == "tilescope " + v, "tilescope --version says %r, library %r" % (out, v))

# 3. a dump described through JSON only
lib.tsc_json_new.restype = ctypes.c_void_p
lib.tsc_json_delete.argtypes = [ctypes.c_void_p]
lib.tsc_json_text.restype = ctypes.c_char_p
lib.tsc_json_text.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.tsc_info_read.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
lib.tsc_info_json.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
lib.tsc_info_free.argtypes = [ctypes.c_void_p]
lib.tsc_error_last.restype = ctypes.c_char_p

with tempfile.TemporaryDirectory(prefix="tsc-binding-") as tmp:
    dump = os.path.join(tmp, "d.h5")
    r = subprocess.run([TSC, "synth", "--shape", "llama-gqa", "-o", dump, "-q"], capture_output=True, text=True)
    check(r.returncode == 0, "synth: " + r.stderr)
    info = ctypes.c_void_p()
    st = lib.tsc_info_read(dump.encode(), None, 0, ctypes.byref(info))
    check(st == 0 and info.value, "tsc_info_read: %d %s" % (st, lib.tsc_error_last()))
    j = lib.tsc_json_new()
    lib.tsc_info_json(info, j)
    d = json.loads(lib.tsc_json_text(j, None).decode())
    lib.tsc_json_delete(j)
    lib.tsc_info_free(info)
    with h5py.File(dump, "r") as f:
        for key in ("n_layer", "n_head", "n_kv_head", "head_dim", "seq_len"):
            check(d["meta"][key] == int(f.attrs[key]), "%s: JSON %s, h5py %s" % (key, d["meta"][key], f.attrs[key]))
        n_steps = len([k for k in f.keys() if k.startswith("step_")])
    check(d["n_steps"] == n_steps, "n_steps: JSON %s, h5py %d" % (d["n_steps"], n_steps))
    check(d["meta"]["n_kv_head"] < d["meta"]["n_head"], "GQA shape seen through the binding")

    # 4. the host's HDF5 error handling is untouched by the library's failures
    bad = os.path.join(tmp, "bad.h5")
    with open(bad, "wb") as f:
        f.write(b"not an hdf5 file" * 64)
    st = lib.tsc_info_read(bad.encode(), None, 0, ctypes.byref(info))
    check(st != 0 and b"bad.h5" in lib.tsc_error_last(), "a bad file is named: %s" % lib.tsc_error_last())
    try:
        h5py.File(bad, "r")
        check(False, "h5py opened a non-HDF5 file")
    except OSError as e:
        check("signature" in str(e).lower() or "unable" in str(e).lower(), "h5py's own error intact: %s" % e)

checks.finish()
