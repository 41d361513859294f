# ctest-labels: slow (over 5 s on 2 cores)
"""`tilescope figure attn` and `tilescope view` on a dump whose answer is known.

The dump (written with examples/write_dump.py) has integer-valued q and k and a power-of-two
softmax scale, so every score is exact in FP32 and in float64: the tied rows and sink keys of the
documented rules (analyze/tsc_attn_map.h, docs/VIEW.md) are computed here independently with numpy
and must be exactly the ones the figure reports and draws. Query head 0 attends to a planted sink
at key 0 (a bonus on its score in every row); GQA: 4 query heads share 2 kv heads.

Figure: the PNG's pixels are checked cell by cell: the causal mask (j > i) is grey hatching and
every visible cell is a viridis colour; a red tick beside exactly the tied rows; an orange mark
above exactly the sink keys. Viewer: the HTML has no external resource; headless chromium opens
it with #selftest=..., whose harness clicks a head's tile with a real click event and writes into
the DOM which head is shown, the level of P at one cell and the canvas pixel there. The level must
be the one computed here from the dump for that head (and differ from every other head's), with no
console error; a second page with a broken pattern image must report its error.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from tsc_testlib import Checks  # noqa: E402
from write_dump import write_dump  # noqa: E402

TSC = os.environ["TSC"]
B, H, HKV, T, D, ALPHA = 1, 4, 2, 48, 8, 0.5
TIE_EPS, SINK_SHARE, SINK_UNIFORM, PMIN = 1e-3, 0.10, 2.0, 1e-6
c = Checks()


def make_dump(path):
    rng = np.random.default_rng(7)
    q = rng.integers(-2, 3, size=(B, H, T, D)).astype(np.float32)
    k = rng.integers(-2, 3, size=(B, HKV, T, D)).astype(np.float32)
    k[:, :, :, 0] = 0
    k[:, :, 0, 0] = 3          # key 0 of every kv head: a bonus 3 * q[..., 0] * alpha
    q[:, 0, :, 0] = 2          # head 0: +3 on key 0 in every row -> the sink
    q[:, 1:, :, 0] = 0         # other heads: no bonus
    v = rng.standard_normal((B, HKV, T, D)).astype(np.float32)
    zeros = np.zeros((B, H, T, D), np.float32)
    write_dump(path, {0: {0: {"q": q, "k": k, "v": v, "o": zeros, "do": zeros}}}, causal=True, softmax_scale=ALPHA,
               dtype="fp32")
    return q, k


def expected(q, k, h):
    """P, tied rows and sink keys of query head h by the documented rules, in float64."""
    s = ALPHA * q[0, h].astype(np.float64) @ k[0, h // (H // HKV)].astype(np.float64).T
    vis = np.tril(np.ones((T, T), bool))
    s = np.where(vis, s, -np.inf)
    mx = s.max(axis=1, keepdims=True)
    p = np.where(vis, np.exp(s - mx), 0)
    p /= p.sum(axis=1, keepdims=True)
    tied = [i for i in range(T) if np.sum(s[i] >= mx[i] - TIE_EPS) >= 2]
    uniform = (vis / vis.sum(axis=1, keepdims=True)).sum(axis=0)
    mass = p.sum(axis=0)
    sinks = [j for j in range(T) if mass[j] >= SINK_SHARE * T and mass[j] >= SINK_UNIFORM * uniform[j]]
    return p, tied, sinks


def level(p):
    t = np.clip((np.log10(np.maximum(p, 1e-300)) + 6) / 6, 0, 1)
    return np.where(p > 0, 1 + np.rint(254 * t), 1).astype(int)


def read_png(path):
    """RGB rows of an 8-bit RGB or RGBA PNG (the five filters), numpy [h, w, 3]."""
    data = open(path, "rb").read()
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    out, prev = np.zeros((h, stride), np.uint8), np.zeros(stride, np.int32)
    for y in range(h):
        f, line = raw[y * (stride + 1)], np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, np.int32)
        for x in range(stride):
            a = cur[x - bpp] if x >= bpp else 0
            b, cc = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 0: pr = 0
            elif f == 1: pr = a
            elif f == 2: pr = b
            elif f == 3: pr = (a + b) // 2
            else:
                pp = a + b - cc
                pa, pb, pc = abs(pp - a), abs(pp - b), abs(pp - cc)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else cc
            cur[x] = (line[x] + pr) & 255
        out[y], prev = cur, cur
    return out.reshape(h, w, bpp)[:, :, :3].astype(int)


def is_grey(px):
    return max(px) - min(px) <= 12


def is_red(px):
    return px[0] > 170 and px[1] < 80 and px[2] < 80


def is_orange(px):
    return px[0] > 200 and 90 < px[1] < 170 and px[2] < 60


def check_figure(tmp, dump, q, k):
    for h in (0, 1):
        png = os.path.join(tmp, "attn%d.png" % h)
        r = subprocess.run([TSC, "figure", "attn", dump, "--layer", "0", "--head", str(h), "--dpi", "150", "--json",
                            "-o", png], capture_output=True, text=True)
        if not c.check(r.returncode == 0, "figure attn head %d exits 0: %s" % (h, r.stderr)):
            return
        desc = json.loads(r.stdout)
        hd = desc["heads"][0]
        p, tied, sinks = expected(q, k, h)
        c.check(hd["tied_rows"] == tied, "head %d: tied rows %s, numpy says %s" % (h, hd["tied_rows"], tied))
        c.check(hd["sinks"] == sinks, "head %d: sinks %s, numpy says %s" % (h, hd["sinks"], sinks))
        c.check(0 < len(tied) < T, "head %d: some rows tied, some not (%d)" % (h, len(tied)))
        if h == 0:
            c.check(sinks == [0], "head 0: the planted sink is key 0 and only it (%s)" % sinks)
        c.check(hd["pool"] == [1, 1], "no pooling at this size (%s)" % hd["pool"])
        img = read_png(png)
        c.check(list(img.shape[:2]) == desc["image_px"][::-1], "PNG size as described")
        x0, y0, w, hh = hd["plot_px"]
        cw, ch = w / T, hh / T
        bad_mask = bad_vis = 0
        for i in range(T):
            for j in range(T):
                px = img[int(y0 + (i + 0.5) * ch), int(x0 + (j + 0.5) * cw)]
                if j > i:
                    bad_mask += not is_grey(px)
                else:
                    bad_vis += is_grey(px)
        c.check(bad_mask == 0, "head %d: every cell j > i is drawn as the grey mask (%d are not)" % (h, bad_mask))
        c.check(bad_vis == 0, "head %d: no visible cell j <= i is grey (%d are)" % (h, bad_vis))
        marked = [i for i in range(T) if is_red(img[int(y0 + (i + 0.5) * ch), int(x0 + w + 3)])]
        c.check(marked == tied, "head %d: red ticks beside rows %s, tied rows %s" % (h, marked, tied))
        tops = [j for j in range(T) if is_orange(img[int(y0 - 6), int(x0 + (j + 0.5) * cw)])]
        c.check(tops == sinks, "head %d: orange marks above keys %s, sinks %s" % (h, tops, sinks))
    r = subprocess.run([TSC, "figure", "attn", dump, "--layer", "0", "--head", "9", "-o",
                        os.path.join(tmp, "x.png")], capture_output=True, text=True)
    c.check(r.returncode == 1 and "head 9 out of range" in r.stderr and "heads 0-3" in r.stderr,
            "an out-of-range head is an error listing the heads: %s" % r.stderr.strip())
    r = subprocess.run([TSC, "figure", "attn-grid", dump, "--layer", "0", "--dpi", "80", "--json", "-o",
                        os.path.join(tmp, "grid.png")], capture_output=True, text=True)
    if c.check(r.returncode == 0, "attn-grid exits 0: %s" % r.stderr):
        heads = json.loads(r.stdout)["heads"]
        c.check([(x["head"], x["kv_head"]) for x in heads] == [(0, 0), (1, 0), (2, 1), (3, 1)],
                "the grid has every head with its kv head")
        c.check(all(x["tied_rows"] == expected(q, k, x["head"])[1] for x in heads), "grid: tied rows of every head")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name) or (os.path.exists("/usr/bin/" + name) and "/usr/bin/" + name)
        if p:
            return p
    return None


def run_page(browser, html, spec, tmp):
    prof = tempfile.mkdtemp(dir=tmp)
    # the browser must not inherit the ASan runtime that a sanitized build preloads into this process
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    r = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                        "--user-data-dir=" + prof, "--virtual-time-budget=5000", "--dump-dom",
                        "file://%s#selftest=%s" % (html, spec)], capture_output=True, text=True, timeout=180, env=env)
    m = re.search(r'<pre id="selftest"[^>]*>([^<]*)</pre>', r.stdout)
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln]
    return (json.loads(m.group(1).replace("&quot;", '"')) if m and m.group(1) else None), console, r


def check_view(tmp, dump, q, k):
    html = os.path.join(tmp, "view.html")
    r = subprocess.run([TSC, "view", dump, "-o", html], capture_output=True, text=True)
    if not c.check(r.returncode == 0, "view exits 0: %s" % r.stderr):
        return
    text = open(html, encoding="utf-8").read()
    c.check(not re.search(r'(src|href)\s*=\s*["\']?(https?:|//)', text) and "<link" not in text,
            "the page loads nothing from elsewhere")
    c.check(len(re.findall(r"<script", text)) == 2 and "<script src" not in text, "inline scripts only")
    r = subprocess.run([TSC, "view", dump, "--steps", "5", "-o", os.path.join(tmp, "none.html")], capture_output=True,
                       text=True)
    c.check(r.returncode == 1 and "selects no step" in r.stderr and "steps 0" in r.stderr,
            "an empty step selection is an error listing the steps: %s" % r.stderr.strip())
    r = subprocess.run([TSC, "figure", "attn", dump, "--layer", "0", "--head", "2", "--policy", "bf16-fa2", "--json",
                        "-o", os.path.join(tmp, "pol.png")], capture_output=True, text=True)
    c.check(r.returncode == 0 and json.loads(r.stdout)["policy"].startswith("bf16") and
            json.loads(r.stdout)["heads"][0]["tied_rows"] == expected(q, k, 2)[1],
            "--policy bf16-fa2: S rounded under it (exact integer scores: the same ties) %s" % r.stderr)
    # budget: a tiny one keeps the overviews and drops the full patterns
    small = os.path.join(tmp, "small.html")
    r = subprocess.run([TSC, "view", dump, "--overview", "16", "--max-mb", "0.03", "-o", small], capture_output=True,
                       text=True)
    if c.check(r.returncode == 0, "view within a small budget: %s" % r.stderr):
        data = json.loads(re.search(r'<script id="data" type="application/json">\n(.*?)</script>',
                                    open(small).read(), re.S).group(1))
        c.check(os.path.getsize(small) <= 0.03e6, "the file keeps its budget (%d bytes)" % os.path.getsize(small))
        c.check(all(h["ovf"] == 3 for h in data["heads"]) and any(h["full"] is None for h in data["heads"]),
                "over budget: overviews (48 -> 16, pooled 3x3), not every full pattern")
        c.check(all(h["full"] is None for h in data["heads"]) or data["heads"][0]["full"] is not None,
                "full patterns go to the head with the sink first")
    browser = chromium()
    if not browser:
        print("SKIP: no chromium (scripts/setup.sh --test installs it)")
        sys.exit(77)
    # the cell where head 2 differs most from the other heads
    lv = [level(expected(q, k, h)[0]) for h in range(H)]
    others = np.min([np.abs(lv[2] - lv[h]) for h in (0, 1, 3)], axis=0)
    i, j = np.unravel_index(np.argmax(np.where(np.tril(np.ones((T, T), bool)), others, -1)), (T, T))
    for spec, f in (("0,0,2,%d,%d" % (i, j), 1), ("0,0,2,%d,%d,zoom" % (i, j), 1)):
        got, console, r = run_page(browser, html, spec, tmp)
        if not c.check(got is not None, "%s: the harness wrote its record (rc %d, %s)" % (spec, r.returncode,
                                                                                        r.stderr[-800:])):
            continue
        c.check(got.get("errors") == [] and not [x for x in console if "rror" in x],
                "%s: no console error (%s %s)" % (spec, got.get("errors"), console))
        c.check(got.get("shown") == "0/0/2" and got.get("selected") == 2, "%s: head 2 is shown: %s" % (spec, got))
        c.check(got.get("f") == f, "%s: full resolution (%s)" % (spec, got.get("f")))
        c.check(abs(got.get("level", -99) - lv[2][i, j]) <= 1 and others[i, j] >= 3,
                "%s: level at (%d, %d) is head 2's %d (got %s; other heads differ by >= %d)" %
                (spec, i, j, lv[2][i, j], got.get("level"), others[i, j]))
        c.check(got.get("pixel") == got.get("colour"), "%s: the canvas pixel is that level's colour" % spec)
        c.check(got.get("tied") == len(expected(q, k, 2)[1]), "%s: the head's tied rows" % spec)
    # a broken page: its error must reach the record (so the checks above can fail)
    broken = os.path.join(tmp, "broken.html")
    open(broken, "w").write(re.sub(r'"ov": "data:image/png;base64,[^"]{12}', '"ov": "data:image/png;base64,AAAA',
                                   text, count=0))
    got, console, r = run_page(browser, broken, "0,0,2,%d,%d" % (i, j), tmp)
    c.check(got is not None and got.get("errors") and "decode" in " ".join(got["errors"]),
            "a broken pattern image is reported: %s" % got)


def check_analysis_folder(tmp):
    """With an analysis folder as SOURCE: the analysis' sink counts of each head beside its pattern."""
    dump, out = os.path.join(tmp, "tiny.h5"), os.path.join(tmp, "an")
    r = subprocess.run([TSC, "synth", "-o", dump, "--steps", "0", "--quiet"], capture_output=True, text=True)
    r2 = r.returncode == 0 and subprocess.run([TSC, "analyze", dump, "-o", out], capture_output=True, text=True)
    if not c.check(r2 and r2.returncode == 0, "synth + analyze: %s" % (r2.stderr if r2 else r.stderr)):
        return
    html = os.path.join(tmp, "an.html")
    r = subprocess.run([TSC, "view", out, "-o", html], capture_output=True, text=True)
    if not c.check(r.returncode == 0, "view of an analysis folder: %s" % r.stderr):
        return
    data = json.loads(re.search(r'<script id="data" type="application/json">\n(.*?)</script>', open(html).read(),
                                re.S).group(1))
    summ = json.load(open(os.path.join(out, "summary.json")))
    n = 0
    for rec in summ["heads"]:
        h = [x for x in data["heads"] if (x["s"], x["l"], x["h"]) == (rec["step"], rec["layer"], rec["head"])]
        want = "; ".join("key %g: %g rows" % (a, b) for a, b in zip(rec["ties"]["sink_keys"], rec["ties"]["sink_counts"])
                         if a >= 0)
        got = dict(h[0]["rec"]).get("row max at key (analysis sink counts)") if h else None
        n += c.check(got == want, "head %s: analysis sink counts %r, summary.json %r" % (rec["head"], got, want))
    c.check(n == len(summ["heads"]) > 0, "every analysed head carries its numbers (%d)" % n)
    r = subprocess.run([TSC, "figure", "attn", out, "--layer", "1", "--head", "1", "--json", "-o",
                        os.path.join(tmp, "an.png")], capture_output=True, text=True)
    c.check(r.returncode == 0 and json.loads(r.stdout)["dump"] == "tiny.h5", "figure attn of an analysis folder")


def main():
    tmp = tempfile.mkdtemp(prefix="tsc_attn_view_")
    try:
        dump = os.path.join(tmp, "d.h5")
        q, k = make_dump(dump)
        check_figure(tmp, dump, q, k)
        check_analysis_folder(tmp)
        check_view(tmp, dump, q, k)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
