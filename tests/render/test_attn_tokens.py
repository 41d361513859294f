"""`tilescope figure attn` reads: token labels, --from DIR, the captured layers, title over subtitle.

A dump written here (examples/write_dump.py) holds its step's input tokens (step_S/tokens and
step_S/token_text, written with h5py as docs/FORMAT.md describes them), some of them hostile: the
end of a script element, markup with event handlers, quotes, a 4-byte emoji, a newline, a
right-to-left override. Its step holds layers 0 and 2 of 4.

Checked: --json names the token of every shown row and key in display form (the newline as the two
characters \\n, the override as \\u202E) and the labels drawn with their boxes: every row and key
of a zoom of 24 labelled with its token (a space as U+2423, long tokens cut with an ellipsis), a
whole pattern of 64 rows labelled every few rows as "i: token" at multiples of a stride, no two
labels overlapping, each beside the plot; batch row 1 gets its own tokens; ids only give "id N";
no tokens give no labels; an SVG holds no text of the tokens (glyphs are drawn as shapes), so no
markup from them. --from DIR draws what SOURCE DIR draws; --from with a file or with SOURCE is a
usage error. A missing layer is an error naming the layers the step holds (0, 2), not the model's
(0-3). The title and the subtitle have boxes that do not overlap, and the PNG's pixel rows show
two runs of ink separated by blank rows inside those boxes.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from tsc_testlib import Checks, read_png  # noqa: E402
from write_dump import write_dump  # noqa: E402

TSC = os.environ["TSC"]
B, H, T, D = 2, 2, 64, 8
c = Checks()

# stored token text (bytes) of batch row 0 at some positions; the rest are words with a leading space
HOSTILE = {3: "</script>", 5: "<img src=x onerror=alert(1)>", 7: "say \"hi\" 'x'", 9: "\U0001F600",
           11: "\n", 13: "<svg onload=document.title=1>", 15: "\u202e", 17: "</text><script>"}


def stored(b, i):
    if b == 0 and i in HOSTILE:
        return HOSTILE[i]
    return " w%d" % i if b == 0 else "B%d_%d" % (b, i)


def display(s):
    """The display form the reader gives and the figure shows: control characters as \\n, \\xNN;
    characters that reorder text as \\uXXXX."""
    out = ""
    for ch in s:
        o = ord(ch)
        if ch == "\n":
            out += "\\n"
        elif o < 0x20 or o == 0x7F:
            out += "\\x%02X" % o
        elif 0x80 <= o <= 0x9F or o in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029) or 0x202A <= o <= 0x202E or \
                0x2066 <= o <= 0x2069:
            out += "\\u%04X" % o
        else:
            out += ch
    return out


def label(text, sub_index=None, max_chars=12):
    s = text.replace(" ", "\u2423")
    if len(s) > max_chars:
        s = s[:max_chars] + "\u2026"
    return s if sub_index is None else "%d: %s" % (sub_index, s)


def make_dump(path, tokens="text", layers=(0, 2)):
    rng = np.random.default_rng(3)
    step = {}
    for layer in layers:
        q = rng.integers(-2, 3, size=(B, H, T, D)).astype(np.float32)
        k = rng.integers(-2, 3, size=(B, H, T, D)).astype(np.float32)
        v = rng.standard_normal((B, H, T, D)).astype(np.float32)
        z = np.zeros((B, H, T, D), np.float32)
        step[layer] = {"q": q, "k": k, "v": v, "o": z, "do": z}
    write_dump(path, {0: step}, n_layer=4, causal=True, softmax_scale=0.5, dtype="fp32")
    if tokens:
        with h5py.File(path, "a") as f:
            g = f["step_00000000"]
            g.create_dataset("tokens", data=np.arange(B * T, dtype=np.int64).reshape(B, T) + 1000)
            if tokens == "text":
                txt = np.array([[stored(b, i).encode("utf-8") for i in range(T)] for b in range(B)], dtype="S32")
                g.create_dataset("token_text", data=txt)


def attn(*args):
    """figure attn ARGS (at 100 dpi unless ARGS name one): the run and its --json."""
    dpi = [] if "--dpi" in args else ["--dpi", "100"]
    r = subprocess.run([TSC, "figure", "attn"] + list(args) + dpi, capture_output=True, text=True)
    return r, (json.loads(r.stdout) if r.returncode == 0 and "--json" in args else None)


def overlaps(a, b):
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def no_overlap(labels):
    boxes = [x["box_px"] for x in labels]
    return all(not overlaps(boxes[i], boxes[j]) for i in range(len(boxes)) for j in range(i + 1, len(boxes)))


def check_labels(d, what, r0, r1, b=0):
    """Token texts of the rows and keys shown; labels in the form the figure says it used."""
    cols = r1  # causal: keys 0..r1-1
    c.check(d["tokens"] == "text", "%s: tokens text (%s)" % (what, d.get("tokens")))
    c.check(d["row_tokens"] == [display(stored(b, i)) for i in range(r0, r1)],
            "%s: the token of every shown row in display form: %s" % (what, d["row_tokens"][:18]))
    c.check(d["key_tokens"] == [display(stored(b, i)) for i in range(cols)], "%s: the token of every key" % what)
    plot = d["heads"][0]["plot_px"]
    for axis, key, n0, n1, allf in (("row_labels", "row", r0, r1, "rows_all_labelled"),
                                    ("key_labels", "key", 0, cols, "keys_all_labelled")):
        labs = d[axis]
        idx = [x[key] for x in labs]
        if d[allf]:
            c.check(idx == list(range(n0, n1)), "%s: every %s labelled (%s)" % (what, key, idx))
            want = [label(display(stored(b, i))) for i in idx]
        else:
            step = idx[1] - idx[0] if len(idx) > 1 else 0
            c.check(len(idx) >= 2 and all(i % step == 0 for i in idx) and idx == list(range(idx[0], n1, step)),
                    "%s: %ss labelled at the multiples of a stride (%s)" % (what, key, idx))
            want = [label(display(stored(b, i)), i) for i in idx]
        c.check([x["label"] for x in labs] == want, "%s: %s labels %s, expected %s" % (
            what, key, [x["label"] for x in labs][:10], want[:10]))
        c.check(no_overlap(labs), "%s: no two %s labels overlap" % (what, key))
    c.check(all(x["box_px"][0] + x["box_px"][2] <= plot[0] for x in d["row_labels"]),
            "%s: row labels left of the plot" % what)
    c.check(all(x["box_px"][1] >= plot[1] + plot[3] for x in d["key_labels"]), "%s: key labels under the plot" % what)
    W, Hh = d["image_px"]
    c.check(all(x["box_px"][0] >= 0 and x["box_px"][1] >= 0 and x["box_px"][0] + x["box_px"][2] <= W and
                x["box_px"][1] + x["box_px"][3] <= Hh for x in d["row_labels"] + d["key_labels"]),
            "%s: every label inside the image" % what)


def check_title(tmp, src, what, *extra):
    png = os.path.join(tmp, "title.png")
    r, d = attn(src, "--dpi", "100", "--json", "-o", png, *extra)
    if not c.check(d is not None, "%s: figure attn exits 0: %s" % (what, r.stderr)):
        return
    lay = d["layout"]
    t, s, hm = lay["title_px"], lay["subtitle_px"], lay["heatmap_px"]
    c.check(d["subtitle"] and " tied row" in d["subtitle"], "%s: a subtitle (%s)" % (what, d["subtitle"]))
    c.check(not overlaps(t, s) and t[1] + t[3] <= s[1], "%s: the title box %s lies above the subtitle box %s" %
            (what, t, s))
    c.check(s[1] + s[3] <= hm[1] <= d["heads"][0]["plot_px"][1], "%s: the subtitle above the heatmap %s" % (what, hm))
    top = int(hm[1])
    img = read_png(png, top + 1)
    ink = (img.min(axis=2) < 110).any(axis=1)  # rows with dark text pixels
    runs, y = [], 0
    while y < top:
        if ink[y]:
            y0 = y
            while y < top and ink[y]:
                y += 1
            runs.append((y0, y))
        y += 1
    c.check(len(runs) == 2, "%s: two runs of ink above the heatmap, title and subtitle (%s)" % (what, runs))
    if len(runs) == 2:
        c.check(t[1] - 1 <= runs[0][0] and runs[0][1] <= t[1] + t[3] + 1 and s[1] - 1 <= runs[1][0] and
                runs[1][1] <= s[1] + s[3] + 1 and runs[1][0] - runs[0][1] >= 2,
                "%s: the title's ink %s in its box, the subtitle's %s in its own, blank rows between" % (
                    what, runs[0], runs[1]))


def main():
    tmp = tempfile.mkdtemp(prefix="tsc_attn_tokens_")
    try:
        dump = os.path.join(tmp, "tok.h5")
        make_dump(dump)
        # a zoom of 24 rows: every row and key labelled with its token
        r, d = attn(dump, "--layer", "0", "--head", "1", "--rows", "0:24", "--json", "-o", os.path.join(tmp, "z.png"))
        if c.check(d is not None, "zoom with tokens exits 0: %s" % r.stderr):
            c.check(d["rows_all_labelled"] and d["keys_all_labelled"], "zoom of 24: every row and key labelled")
            check_labels(d, "zoom 0:24", 0, 24)
            c.check(d["row_tokens"][3] == "</script>" and d["row_tokens"][11] == "\\n" and
                    d["row_tokens"][9] == "\U0001F600" and d["row_tokens"][15] == "\\u202E",
                    "hostile tokens reported as text: %s" % d["row_tokens"][3:16])
            c.check(d["row_labels"][5]["label"] == "<img\u2423src=x\u2423o\u2026",
                    "a long token cut to 12 characters: %r" % d["row_labels"][5]["label"])
        # the whole pattern, 64 rows: every few rows, "i: token"
        r, d = attn(dump, "--layer", "0", "--head", "0", "--json", "-o", os.path.join(tmp, "w.png"))
        if c.check(d is not None, "whole pattern with tokens exits 0: %s" % r.stderr):
            c.check(not d["rows_all_labelled"] and not d["keys_all_labelled"], "64 rows: a subset labelled")
            check_labels(d, "whole", 0, T)
        # a small figure: a zoom of 24 no longer fits a label per row
        r, d = attn(dump, "--layer", "0", "--head", "0", "--rows", "0:24", "--width", "3", "--height", "3", "--json",
                    "-o", os.path.join(tmp, "s.png"))
        if c.check(d is not None, "small figure exits 0: %s" % r.stderr):
            c.check(not d["rows_all_labelled"], "3 x 3 in: a subset of the 24 rows labelled")
            check_labels(d, "small", 0, 24)
        # batch row 1: its own tokens
        r, d = attn(dump, "--layer", "2", "--head", "0", "--rows", "4:20", "--batch", "1", "--json", "-o",
                    os.path.join(tmp, "b1.png"))
        if c.check(d is not None, "batch 1 exits 0: %s" % r.stderr):
            check_labels(d, "batch 1", 4, 20, b=1)
            c.check(d["row_labels"][0]["label"] == "B1_4", "batch 1: row 4 is B1_4 (%s)" % d["row_labels"][0])
        # the grid: each panel labelled; tokens cut shorter
        r, d = attn(dump, "--layer", "0", "--head", "all", "--rows", "0:16", "--dpi", "100", "--json", "-o",
                    os.path.join(tmp, "g.png"))
        if c.check(d is not None, "grid with tokens exits 0: %s" % r.stderr):
            c.check(len(d["heads"]) == 2 and no_overlap(d["row_labels"]) and no_overlap(d["key_labels"]) and
                    d["row_labels"][0]["label"] in ("\u2423w0", "0: \u2423w0"), "grid: labels %s" % d["row_labels"][:2])
        # SVG: the tokens' text is drawn as glyph shapes, so no markup of theirs can reach the file
        svg = os.path.join(tmp, "z.svg")
        r, _ = attn(dump, "--layer", "0", "--head", "1", "--rows", "0:24", "-o", svg)
        if c.check(r.returncode == 0, "SVG with tokens: %s" % r.stderr):
            body = open(svg, "rb").read()
            c.check(b"<script" not in body and b"onerror" not in body and b"onload" not in body and b"<img" not in body,
                    "the SVG holds no markup from the tokens")
        # ids only, and no tokens at all
        ids = os.path.join(tmp, "ids.h5")
        make_dump(ids, tokens="ids")
        r, d = attn(ids, "--layer", "0", "--head", "0", "--rows", "0:10", "--json", "-o", os.path.join(tmp, "i.png"))
        if c.check(d is not None, "ids only exits 0: %s" % r.stderr):
            c.check(d["tokens"] == "ids" and d["row_tokens"] == ["id %d" % (1000 + i) for i in range(10)] and
                    [x["label"] for x in d["row_labels"]] == ["id %d" % (1000 + i) for i in range(10)],
                    "ids only: labels 'id N' (%s)" % [x["label"] for x in d["row_labels"]][:4])
        plain = os.path.join(tmp, "plain.h5")
        make_dump(plain, tokens=None)
        r, d = attn(plain, "--layer", "0", "--head", "0", "--json", "-o", os.path.join(tmp, "p.png"))
        if c.check(d is not None, "no tokens exits 0: %s" % r.stderr):
            c.check(d["tokens"] is None and "row_labels" not in d, "no tokens: no token labels")
        # the missing layer: the layers the step holds, not the model's
        r, _ = attn(dump, "--layer", "1", "--head", "0", "-o", os.path.join(tmp, "m.png"))
        c.check(r.returncode == 1 and "has no layer 1" in r.stderr and "captured at that step are 0, 2" in r.stderr and
                "0-3" not in r.stderr, "a missing layer names the captured layers: %s" % r.stderr.strip())
        r, _ = attn(dump, "--layer", "3", "--head", "0", "-o", os.path.join(tmp, "m.png"))
        c.check(r.returncode == 1 and "are 0, 2" in r.stderr, "layer 3 too: %s" % r.stderr.strip())
        # --from DIR: the analysis folder, as SOURCE
        tiny, an = os.path.join(tmp, "tiny.h5"), os.path.join(tmp, "an")
        r = subprocess.run([TSC, "synth", "-o", tiny, "--steps", "0", "-q"], capture_output=True, text=True)
        r2 = r.returncode == 0 and subprocess.run([TSC, "analyze", tiny, "-o", an, "-q"], capture_output=True, text=True)
        if c.check(r2 and r2.returncode == 0, "synth + analyze: %s" % (r2.stderr if r2 else r.stderr)):
            ra, da = attn("--from", an, "--layer", "1", "--head", "1", "--json", "-o", os.path.join(tmp, "f1.png"))
            rb, db = attn(an, "--layer", "1", "--head", "1", "--json", "-o", os.path.join(tmp, "f2.png"))
            if c.check(da is not None and db is not None, "--from DIR and SOURCE DIR exit 0: %s %s" % (ra.stderr, rb.stderr)):
                da.pop("file"), db.pop("file")
                c.check(da == db and da["dump"] == "tiny.h5" and "Analysis" not in json.dumps(da["heads"]),
                        "--from DIR draws what SOURCE DIR draws")
                c.check(open(os.path.join(tmp, "f1.png"), "rb").read() == open(os.path.join(tmp, "f2.png"), "rb").read(),
                        "--from DIR and SOURCE DIR: the same PNG")
            r, _ = attn("--from", tiny, "--layer", "1", "-o", os.path.join(tmp, "x.png"))
            c.check(r.returncode == 2 and "--from expects a folder" in r.stderr, "--from FILE: %s" % r.stderr[:200])
            r, _ = attn(tiny, "--from", an, "--layer", "1", "-o", os.path.join(tmp, "x.png"))
            c.check(r.returncode == 2 and "not both" in r.stderr, "SOURCE and --from: %s" % r.stderr[:200])
            r = subprocess.run([TSC, "figure", "attn-grid", "--from", an, "--layer", "1", "--dpi", "60", "-o",
                                os.path.join(tmp, "fg.png")], capture_output=True, text=True)
            c.check(r.returncode == 0, "attn-grid --from DIR: %s" % r.stderr)
            # the title over the subtitle: the planted layer's head, whole and zoomed
            check_title(tmp, tiny, "synth layer 1 head 1", "--layer", "1", "--head", "1")
            check_title(tmp, tiny, "synth zoom", "--layer", "1", "--head", "1", "--rows", "8:40")
        check_title(tmp, dump, "tokens zoom", "--layer", "0", "--head", "1", "--rows", "0:24")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    c.finish()


if __name__ == "__main__":
    main()
