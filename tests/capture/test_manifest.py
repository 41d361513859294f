# ctest-labels: slow
"""A run of many ranks as one dump (docs/FORMAT.md 1.8, docs/DISTRIBUTED.md).

1. `synth --batch 4 --ranks 2` writes two rank dumps and a manifest; the manifest reads as one
   dump of batch 4 whose every slice equals the one dump `synth --batch 4` writes (h5py on the
   rank files against h5py on the one dump, and libtilescope's reader on the manifest).
2. diagnose on the manifest, on the folder of rank dumps and on the one dump: summary.json and
   analysis.h5 identical but for the dump's name and the run id.
3. Tensor- and pipeline-parallel ranks (split here with h5py from the one dump: heads over tp,
   layers over pp): the manifest reads back every slice of the one dump, and diagnose agrees.
4. `merge` from files and from a folder; a missing rank, a rank in another folder, two files of
   one rank, a disagreeing geometry, a corrupt rank file, a hostile file name (path, '..',
   control character), a symbolic link and a manifest listing itself: each refused with a message
   naming the file, exit 1, within seconds.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks, load_library  # noqa: E402

TSC = os.environ["TSC"]
checks = Checks()
check = checks.check
lib = load_library()
lib.tsc_dump_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
lib.tsc_dump_read.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                              ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
lib.tsc_dump_close.argtypes = [ctypes.c_void_p]
lib.tsc_dump_n_ranks.argtypes = [ctypes.c_void_p]
lib.tsc_error_last.restype = ctypes.c_char_p


def run(*args, timeout=60):
    return subprocess.run([TSC] + list(args), capture_output=True, text=True, timeout=timeout)


def f32(ds, sel):
    return ds.astype("float32")[sel]


def same_analysis(a, b, what):
    """summary.json and analysis.h5 of two diagnose folders equal but for 'dump' and 'run_id'."""
    sa, sb = json.load(open(os.path.join(a, "summary.json"))), json.load(open(os.path.join(b, "summary.json")))
    check("ranks" not in sa and [r["file"] for r in sb.get("ranks", [])] in
          (["run.rank0.h5", "run.rank1.h5"], ["run.rank%d.h5" % i for i in range(2)]),
          "%s: summary.json's rank table" % what)
    for s in (sa, sb):
        s.pop("dump", None)
        s.pop("run_id", None)
        s.pop("ranks", None)
    check(sa == sb, "%s: summary.json differs" % what)
    diffs = []
    with h5py.File(os.path.join(a, "analysis.h5"), "r") as fa, h5py.File(os.path.join(b, "analysis.h5"), "r") as fb:
        def attrs_equal(x, y, name):
            ka = sorted(k for k in x.attrs if k not in ("dump", "run_id"))
            kb = sorted(k for k in y.attrs if k not in ("dump", "run_id"))
            if ka != kb:
                diffs.append("%s attrs %s vs %s" % (name, ka, kb))
                return
            for k in ka:
                if not np.array_equal(np.asarray(x.attrs[k]), np.asarray(y.attrs[k])):
                    diffs.append("%s attr %s" % (name, k))

        def visit(name, obj):
            other = fb.get(name)
            if other is None:
                diffs.append("missing " + name)
                return
            attrs_equal(obj, other, name)
            if isinstance(obj, h5py.Dataset):
                x, y = obj[()], other[()]
                if x.dtype.kind == "f":
                    ok = x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8))
                else:
                    ok = np.array_equal(x, y)
                if not ok:
                    diffs.append("dataset " + name)
        attrs_equal(fa, fb, "/")
        fa.visititems(visit)
        nb = []
        fb.visititems(lambda n, o: nb.append(n))
        na = []
        fa.visititems(lambda n, o: na.append(n))
        if sorted(na) != sorted(nb):
            diffs.append("object lists differ")
    check(not diffs, "%s: analysis.h5 differs: %s" % (what, diffs[:5]))


def read_all(path, names=("q", "k", "v", "o", "do", "lse", "x", "w_q")):
    """Every slice of every step/layer through libtilescope's reader, as one dict."""
    d = ctypes.c_void_p()
    st = lib.tsc_dump_open(ctypes.byref(d), path.encode())
    if st != 0:
        return None, lib.tsc_error_last().decode()
    out = {}
    with h5py.File(one, "r") as f:  # the geometry of the one dump
        B, H, K = f.attrs["batch"], f.attrs["n_head"], f.attrs["n_kv_head"]
        T, D, C = f.attrs["seq_len"], f.attrs["head_dim"], f.attrs["d_model"]
        for step in f:
            for layer in f[step]:
                s, l = int(step[5:]), int(layer[6:])
                for n in names:
                    if n.startswith("w_"):
                        shape = f[step][layer][n].shape
                        buf = (ctypes.c_float * (shape[0] * shape[1]))()
                        st = lib.tsc_dump_read(d, s, l, n.encode(), 0, 0, buf)
                        out[(s, l, n)] = np.array(buf) if st == 0 else None
                        continue
                    hn = 1 if n == "x" else (K if n in ("k", "v") else H)
                    per = T * (C if n == "x" else (1 if n == "lse" else D))
                    for b in range(B):
                        for h in range(hn):
                            buf = (ctypes.c_float * per)()
                            st = lib.tsc_dump_read(d, s, l, n.encode(), b, h, buf)
                            out[(s, l, n, b, h)] = np.array(buf) if st == 0 else None
    lib.tsc_dump_close(d)
    return out, ""


tmp = tempfile.mkdtemp()
try:
    one = os.path.join(tmp, "one.h5")
    os.mkdir(os.path.join(tmp, "dp"))
    man = os.path.join(tmp, "dp", "run.h5")
    r = run("synth", "-q", "--shape", "llama-gqa", "--steps", "0:2", "--layers", "0,1", "--batch", "4", "-o", one)
    check(r.returncode == 0, "synth one: " + r.stderr)
    r = run("synth", "-q", "--shape", "llama-gqa", "--steps", "0:2", "--layers", "0,1", "--batch", "4", "--ranks", "2",
            "-o", man)
    check(r.returncode == 0, "synth ranks: " + r.stderr)
    files = sorted(os.listdir(os.path.join(tmp, "dp")))
    check(files == ["run.h5", "run.rank0.h5", "run.rank1.h5"], "rank files: %s" % files)

    # 1. the rank files hold the one dump's rows, and the manifest reads as the one dump
    with h5py.File(one, "r") as f, h5py.File(man.replace(".h5", ".rank1.h5"), "r") as g:
        check(g.attrs["batch"] == 2 and g.attrs["rank"] == 1 and g.attrs["world_size"] == 2, "rank 1's attributes")
        q1, q = f32(g["step_00000000/layer_001/q"], ()), f32(f["step_00000000/layer_001/q"], ())
        check(np.array_equal(q1, q[2:4]), "rank 1 holds rows 2-3 of the one dump")
    with h5py.File(man, "r") as m:
        check(m.attrs["format"] == "tilescope-manifest" and m.attrs["world_size"] == 2 and m.attrs["batch"] == 4,
              "manifest root attributes")
        check(m["ranks/rank_00001"].attrs["file"] == "run.rank1.h5" and m["ranks/rank_00001"].attrs["batch0"] == 2,
              "manifest rank table")
    ref, _ = read_all(one)
    got, err = read_all(man)
    check(got is not None and all(got[k] is not None and np.array_equal(got[k], v) for k, v in ref.items()),
          "every slice of the manifest equals the one dump's " + err)
    # out of range rows are refused, not wrapped to another rank
    d = ctypes.c_void_p()
    lib.tsc_dump_open(ctypes.byref(d), man.encode())
    buf = (ctypes.c_float * (64 * 64))()
    check(lib.tsc_dump_read(d, 0, 1, b"q", 4, 0, buf) != 0, "row 4 of a batch of 4 is refused")
    check(lib.tsc_dump_n_ranks(d) == 2, "two ranks")
    lib.tsc_dump_close(d)
    r = run("info", man, "--json")
    info = json.loads(r.stdout) if r.returncode == 0 else {}
    check(info.get("kind") == "ranks" and [x["file"] for x in info.get("ranks", [])] == ["run.rank0.h5", "run.rank1.h5"]
          and info["meta"]["batch"] == 4, "info --json lists the ranks: " + r.stderr)

    # 2. diagnose: manifest, folder, one dump
    outs = {}
    for name, src in (("one", one), ("man", man), ("dir", os.path.join(tmp, "dp"))):
        outs[name] = os.path.join(tmp, "diag_" + name)
        r = run("diagnose", src, "-o", outs[name], "-q", timeout=120)
        check(r.returncode == 0, "diagnose %s: %s" % (name, r.stderr[-300:]))
    same_analysis(outs["one"], outs["man"], "manifest vs one dump")
    same_analysis(outs["one"], outs["dir"], "folder vs one dump")

    # the report names the ranks, and splits each at-risk head's accumulated delta bias by rank:
    # the parts are delta_diff summed over each rank's rows (h5py here), and add up to the total
    pdf = os.path.join(tmp, "rep.pdf")
    r = run("report", outs["man"], "-o", pdf, "-q", timeout=120)
    check(r.returncode == 0, "report: " + r.stderr[-300:])
    text = subprocess.run(["pdftotext", "-layout", pdf, "-"], capture_output=True, text=True).stdout
    flat = " ".join(text.split())
    check("rank 0 run.rank0.h5 (rows 0-1" in flat and "rank 1 run.rank1.h5 (rows 2-3" in flat,
          "the report lists the rank files and their rows")
    summ = json.load(open(os.path.join(outs["man"], "summary.json")))
    ar = summ["diagnosis"]["at_risk"]
    check(len(ar) > 0, "the planted heads are at risk")
    import re
    with h5py.File(os.path.join(outs["man"], "analysis.h5"), "r") as fa:
        for h in ar[:3]:
            L, H = h["layer"], h["head"]
            parts = [0.0, 0.0]
            for step in summ["computed_over"]["step_list"]:
                g = fa["step_%08d/layer_%03d" % (step, L)]
                row = list(g["heads"][()]).index(H)
                dd = g["delta_diff"][()][row]
                parts[0] += dd[0:2].sum()
                parts[1] += dd[2:4].sum()
            m = re.search(r"layer %d head %d \(([-+0-9.e]+)\): rank 0 ([-+0-9.e]+) \(\d+%%\), rank 1 ([-+0-9.e]+)" % (L, H),
                          flat)
            check(m is not None, "layer %d head %d: a by-rank line" % (L, H))
            if m:
                tot, p0, p1 = (float(x) for x in m.groups())
                check(abs(tot - h["delta_cumsum"]) <= 6e-3 * abs(tot), "total %g is the table's %g" % (tot, h["delta_cumsum"]))
                check(abs(p0 - parts[0]) <= 6e-3 * abs(p0) and abs(p1 - parts[1]) <= 6e-3 * abs(p1),
                      "parts %g %g are the rows' sums %g %g" % (p0, p1, parts[0], parts[1]))
                check(abs(p0 + p1 - tot) <= 1.2e-2 * abs(tot), "the parts add up to the total")

    # 3. tensor- and pipeline-parallel ranks, split from the one dump
    def split(dst, tp, pp):
        """The one dump as tp x pp rank files (heads in contiguous blocks, layers in blocks)."""
        os.mkdir(dst)
        with h5py.File(one, "r") as f:
            H, K, L = f.attrs["n_head"], f.attrs["n_kv_head"], f.attrs["n_layer"]
            layers = sorted(f["step_00000000"])
            for t in range(tp):
                for p in range(pp):
                    rank = t * pp + p
                    with h5py.File(os.path.join(dst, "run.rank%d.h5" % rank), "w") as g:
                        for k, v in f.attrs.items():
                            g.attrs[k] = v
                        g.attrs["n_head"], g.attrs["n_kv_head"] = H // tp, K // tp
                        g.attrs["rank"], g.attrs["world_size"] = rank, tp * pp
                        g.attrs["tp_rank"], g.attrs["tp_size"], g.attrs["pp_rank"], g.attrs["pp_size"] = t, tp, p, pp
                        g.attrs["dp_rank"], g.attrs["dp_size"] = 0, 1
                        for step in f:
                            gs = g.create_group(step)
                            for k, v in f[step].attrs.items():
                                gs.attrs[k] = v
                            mine = [x for i, x in enumerate(layers) if i * pp // len(layers) == p]
                            for layer in mine:
                                gl = gs.create_group(layer)
                                for n, ds in f[step][layer].items():
                                    if n.startswith("w_") and tp > 1:
                                        continue
                                    tid = ds.id.get_type()
                                    raw = np.empty(ds.shape, dtype="u%d" % tid.get_size())
                                    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=tid)
                                    if ds.ndim >= 3 and n != "x":
                                        hn = ds.shape[1] // tp
                                        raw = np.ascontiguousarray(raw[:, t * hn:(t + 1) * hn])
                                    space = h5py.h5s.create_simple(raw.shape)
                                    nd = h5py.h5d.create(gl.id, n.encode(), tid, space)
                                    nd.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=tid)
                                    for k, v in ds.attrs.items():
                                        gl[n].attrs[k] = v

    for tp, pp in ((2, 1), (1, 2), (2, 2)):
        dst = os.path.join(tmp, "tp%dpp%d" % (tp, pp))
        split(dst, tp, pp)
        r = run("merge", dst)
        check(r.returncode == 0 and "%d ranks" % (tp * pp) in r.stdout, "merge tp %d pp %d: %s" % (tp, pp, r.stderr))
        got, err = read_all(os.path.join(dst, "manifest.h5"), names=("q", "k", "v", "o", "do", "lse", "x"))
        check(got is not None and all(got[k] is not None and np.array_equal(got[k], v)
                                      for k, v in ref.items() if not k[2].startswith("w_")),
              "tp %d pp %d: every slice equals the one dump's %s" % (tp, pp, err))
        if tp == 1:
            out = os.path.join(tmp, "diag_pp")
            r = run("diagnose", dst, "-o", out, "-q", timeout=120)
            check(r.returncode == 0, "diagnose pp: " + r.stderr[-300:])
            same_analysis(outs["one"], out, "pipeline ranks vs one dump")

    # 4. merge and its refusals
    dp = os.path.join(tmp, "dp")
    r = run("merge", "-o", os.path.join(dp, "again.h5"), os.path.join(dp, "run.rank1.h5"), os.path.join(dp, "run.rank0.h5"))
    check(r.returncode == 0 and "2 ranks, batch 4" in r.stdout, "merge from files in any order: " + r.stderr)
    r = run("merge", "-o", os.path.join(dp, "half.h5"), os.path.join(dp, "run.rank0.h5"))
    check(r.returncode == 1 and "rank 1 of world_size 2 is missing" in r.stderr, "a missing rank is named: " + r.stderr)
    shutil.copy(os.path.join(dp, "run.rank0.h5"), os.path.join(tmp, "elsewhere.rank1.h5"))
    r = run("merge", "-o", os.path.join(dp, "x.h5"), os.path.join(dp, "run.rank0.h5"), os.path.join(tmp, "elsewhere.rank1.h5"))
    check(r.returncode == 1 and "in another folder" in r.stderr, "a rank in another folder: " + r.stderr)
    shutil.copy(os.path.join(dp, "run.rank0.h5"), os.path.join(dp, "dup.h5"))
    r = run("merge", "-o", os.path.join(dp, "x.h5"), os.path.join(dp, "run.rank0.h5"), os.path.join(dp, "dup.h5"))
    check(r.returncode == 1 and "both hold rank 0" in r.stderr, "two files of one rank: " + r.stderr)
    bad = os.path.join(tmp, "bad")
    shutil.copytree(dp, bad)
    with h5py.File(os.path.join(bad, "run.rank1.h5"), "r+") as g:
        g.attrs["seq_len"] = 32
    r = run("info", os.path.join(bad, "run.h5"))
    check(r.returncode == 1 and "run.rank1.h5" in r.stderr, "a disagreeing rank is named: " + r.stderr)
    shutil.copy(os.path.join(dp, "run.rank1.h5"), os.path.join(bad, "run.rank1.h5"))
    with open(os.path.join(bad, "run.rank1.h5"), "r+b") as fh:
        fh.truncate(4096)
    r = run("diagnose", os.path.join(bad, "run.h5"), "-o", os.path.join(tmp, "diag_bad"), timeout=30)
    check(r.returncode == 1 and "rank 1 of 2 (run.rank1.h5)" in r.stderr, "a corrupt rank file is named: " + r.stderr)
    for name, target in (("up", "../one.h5"), ("abs", one), ("ctl", "a\x01b"), ("self", "run.h5")):
        p = os.path.join(bad, name + ".h5")
        shutil.copy(os.path.join(dp, "run.h5"), p)
        with h5py.File(p, "r+") as m:
            m["ranks/rank_00000"].attrs["file"] = target if name != "self" else name + ".h5"
        r = run("info", p, timeout=20)
        want = "refused"
        check(r.returncode == 1 and want in r.stderr and name + ".h5" in r.stderr,
              "hostile manifest (%s): %s" % (name, r.stderr))
    ln = os.path.join(tmp, "ln")
    os.mkdir(ln)
    shutil.copy(os.path.join(dp, "run.rank0.h5"), os.path.join(ln, "run.rank0.h5"))
    os.symlink(os.path.join(dp, "run.rank1.h5"), os.path.join(ln, "run.rank1.h5"))
    r = run("info", ln)
    check(r.returncode == 1 and "symbolic link" in r.stderr and "run.rank1.h5" in r.stderr, "a symlinked rank: " + r.stderr)
    r = run("--trust-links", "info", ln) if False else run("info", "--trust-links", ln)
    check(r.returncode == 0, "--trust-links follows it: " + r.stderr)
finally:
    shutil.rmtree(tmp)
checks.finish()
