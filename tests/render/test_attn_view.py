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

Tokens and batch rows: a second dump (2 batch rows that differ, integer q and k again) holds its
step's input tokens, row 1's hostile (the end of a script element, markup with event handlers,
quotes, a 4-byte emoji, a newline). The page of both rows (--batches 0,1) carries each row's tokens
once, none of their markup raw. The self-test clicks a head, picks batch row 1 in the menu as a user
would and moves the mouse onto a cell: the level there must be row 1's (not row 0's), the hover text
"row I '<token>' -> key J '<token>': P ~ x" with row 1's tokens and that P, the axis labels row 1's
tokens; nothing from the tokens runs (the document title stays, no element from their markup, no
console error). The size budget holds across batch rows: every (batch row, head) has its overview,
full patterns are added within --max-mb.
"""
import html as htmlmod
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from tsc_testlib import Checks, read_png  # noqa: E402
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
    return (json.loads(htmlmod.unescape(m.group(1))) if m and m.group(1) else None), console, r


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
        c.check(got.get("shown") == "0/0/0/2" and got.get("selected") == 2, "%s: head 2 is shown: %s" % (spec, got))
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


# Batch row 1's tokens: hostile ones at odd positions, in turn; row 0's are words.
HOSTILE = ["</script>", "<img src=x onerror=alert(1)>", "\U0001F600", "\n", "say \"hi\" 'x'",
           "<svg onload=document.title=1>"]
TB, TT, TH = 2, 40, 2


def token(b, i):
    return " a%d" % i if b == 0 else HOSTILE[(i // 2) % len(HOSTILE)] if i % 2 else "b%d" % i


def shown_token(t):
    """The display form (a newline as the two characters \\n)."""
    return t.replace("\n", "\\n")


def axis_label(t):
    c_ = list(shown_token(t).replace(" ", "\u2423"))
    return "".join(c_[:12]) + "\u2026" if len(c_) > 12 else "".join(c_)


def make_token_dump(path):
    rng = np.random.default_rng(11)
    q = rng.integers(-2, 3, size=(TB, TH, TT, D)).astype(np.float32)
    k = rng.integers(-2, 3, size=(TB, TH, TT, D)).astype(np.float32)
    v = rng.standard_normal((TB, TH, TT, D)).astype(np.float32)
    z = np.zeros((TB, TH, TT, D), np.float32)
    write_dump(path, {0: {0: {"q": q, "k": k, "v": v, "o": z, "do": z}}}, causal=True, softmax_scale=ALPHA,
               dtype="fp32", policy="fp32")
    import h5py
    with h5py.File(path, "a") as f:
        g = f["step_00000000"]
        g.create_dataset("tokens", data=np.arange(TB * TT, dtype=np.int64).reshape(TB, TT))
        g.create_dataset("token_text", data=np.array([[token(b, i).encode() for i in range(TT)] for b in range(TB)],
                                                     dtype="S32"))
    return q, k


def token_levels(q, k, b, h):
    s = ALPHA * q[b, h].astype(np.float64) @ k[b, h].astype(np.float64).T
    vis = np.tril(np.ones((TT, TT), bool))
    s = np.where(vis, s, -np.inf)
    p = np.where(vis, np.exp(s - s.max(axis=1, keepdims=True)), 0)
    return level(p / p.sum(axis=1, keepdims=True))


def check_tokens_view(tmp, browser):
    dump, html = os.path.join(tmp, "tok.h5"), os.path.join(tmp, "tok.html")
    q, k = make_token_dump(dump)
    r = subprocess.run([TSC, "view", dump, "--batches", "0,1", "-o", html], capture_output=True, text=True)
    if not c.check(r.returncode == 0 and "2 batch rows" in r.stdout and "input tokens" in r.stdout,
                   "view --batches 0,1 of a dump with tokens: %s %s" % (r.stdout, r.stderr)):
        return
    text = open(html, encoding="utf-8").read()
    data = json.loads(re.search(r'<script id="data" type="application/json">\n(.*?)</script>', text, re.S).group(1))
    c.check(data["meta"]["batches"] == [0, 1] and sorted({(h["b"], h["h"]) for h in data["heads"]}) ==
            [(0, 0), (0, 1), (1, 0), (1, 1)], "every (batch row, head) has its pattern")
    toks = {(t["s"], t["b"]): t.get("text") for t in data["tokens"]}
    c.check(toks == {(0, b): [shown_token(token(b, i)) for i in range(TT)] for b in range(TB)},
            "each (step, batch row)'s tokens once, in display form")
    c.check(text.count("</script>") == 2 and "<img src=x" not in text and "<svg onload" not in text,
            "no token's markup is in the page raw")
    # the cell of head 1 where batch rows 0 and 1 differ most, its row token "</script>", key token the
    # emoji or the newline
    lv = [token_levels(q, k, b, 1) for b in range(TB)]
    cells = [(abs(int(lv[1][i, j]) - int(lv[0][i, j])), i, j) for i in range(TT) for j in range(i + 1)
             if token(1, i) == "</script>" and token(1, j) in ("\U0001F600", "\n")]
    diff, i, j = max(cells)
    c.check(diff >= 3, "the rows' levels differ at (%d, %d) by %d" % (i, j, diff))
    for spec, b in (("0,0,1,%d,%d" % (i, j), 0), ("0,0,1,%d,%d,b1" % (i, j), 1), ("0,0,1,%d,%d,zoom,b1" % (i, j), 1)):
        got, console, r = run_page(browser, html, spec, tmp)
        if not c.check(got is not None, "%s: the harness wrote its record (rc %d, %s)" % (spec, r.returncode,
                                                                                        r.stderr[-800:])):
            continue
        c.check(got.get("errors") == [] and not [x for x in console if "rror" in x],
                "%s: no error (%s %s)" % (spec, got.get("errors"), console))
        c.check(got.get("shown") == "0/%d/0/1" % b and got.get("batch") == b and got.get("selected") == 1,
                "%s: batch row %d's head 1 is shown: %s" % (spec, b, got.get("shown")))
        c.check(got.get("level") == lv[b][i, j] and got.get("pixel") == got.get("colour"),
                "%s: the level at (%d, %d) is row %d's %d (got %s; row %d's is %d)" % (
                    spec, i, j, b, lv[b][i, j], got.get("level"), 1 - b, lv[1 - b][i, j]))
        want = "row %d '%s' \u2192 key %d '%s': P \u2248 " % (i, shown_token(token(b, i)), j, shown_token(token(b, j)))
        hv = got.get("hover", "")
        pv = 10 ** (-6 * (1 - (lv[b][i, j] - 1) / 254))
        c.check(hv.startswith(want) and abs(float(hv[len(want):]) / pv - 1) < 0.01,
                "%s: hover %r, expected %r%.3g" % (spec, hv, want, pv))
        rows, keys = dict(map(tuple, got.get("rows", []))), dict(map(tuple, got.get("keys", [])))
        lo = max(0, i - 8) if "zoom" in spec else 0
        c.check(sorted(rows) == list(range(lo, min(TT, i + 8) if "zoom" in spec else TT)) and
                rows.get(i) == axis_label(token(b, i)) and keys.get(j) == axis_label(token(b, j)),
                "%s: the axes labelled with row %d's tokens (row %d: %r, key %d: %r)" % (
                    spec, b, i, rows.get(i), j, keys.get(j)))
        c.check(got.get("doctitle") == "tilescope view" and "batch row %d" % b in got.get("title", ""),
                "%s: nothing from the tokens ran (title %r)" % (spec, got.get("doctitle")))
        dom = r.stdout
        c.check(not re.search(r"<img[^>]*src=.?x", dom) and "<svg" not in dom, "%s: no element from the tokens" % spec)
    # the budget across batch rows: overviews of every (batch row, head), full patterns within --max-mb
    r = subprocess.run([TSC, "view", dump, "--batches", "all", "--overview", "16", "--max-mb", "0.01", "-o",
                        os.path.join(tmp, "x.html")], capture_output=True, text=True)
    m = re.search(r"--max-mb ([0-9.]+) or more", r.stderr)
    if c.check(r.returncode == 1 and m, "a budget below the overviews: %s" % r.stderr.strip()):
        base = float(m.group(1))
        budget = base + 0.6 * (os.path.getsize(html) / 1e6 - base)
        small = os.path.join(tmp, "tok_small.html")
        r = subprocess.run([TSC, "view", dump, "--batches", "all", "--overview", "16", "--max-mb", "%.6f" % budget,
                            "-o", small], capture_output=True, text=True)
        if c.check(r.returncode == 0, "view within %.4f MB: %s" % (budget, r.stderr)):
            d2 = json.loads(re.search(r'<script id="data" type="application/json">\n(.*?)</script>',
                                      open(small, encoding="utf-8").read(), re.S).group(1))
            full = [h["full"] is not None for h in d2["heads"]]
            c.check(os.path.getsize(small) <= budget * 1e6 and len(d2["heads"]) == 4 and
                    all(h["ovf"] == 3 for h in d2["heads"]) and 0 < sum(full) < 4 and len(d2["tokens"]) == 2,
                    "within the budget: 4 overviews (40 -> 14, pooled 3x3), %d of 4 full patterns, the tokens" % sum(full))
    r = subprocess.run([TSC, "view", dump, "--batches", "2:4", "-o", os.path.join(tmp, "y.html")], capture_output=True,
                       text=True)
    c.check(r.returncode == 1 and "selects no batch row" in r.stderr and "batch rows 0-1" in r.stderr,
            "--batches of no row names the rows: %s" % r.stderr.strip())


def main():
    tmp = tempfile.mkdtemp(prefix="tsc_attn_view_")
    try:
        dump = os.path.join(tmp, "d.h5")
        q, k = make_dump(dump)
        check_figure(tmp, dump, q, k)
        check_analysis_folder(tmp)
        check_view(tmp, dump, q, k)
        check_tokens_view(tmp, chromium())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
