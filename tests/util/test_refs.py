"""Every reference in the prose resolves: each file path named in docs/*.md, README.md and the
comments of source files (render/figure.c, docs/FORMAT.md §3, tests/python/test_import_pt.py, a
bare tsc_surface.h or heatmap.c) is a file or folder of the tree, and each tsc_* name they cite
(tsc_figure_write, `tsc_attn_run(`) occurs in some source file's code (comments and docstrings
left out, so a stale name cannot vouch for itself). A rename that leaves its
old name in a comment or a doc fails here, naming the file, the line and the reference.

What counts as a path: a word starting with one of the tree's top folders (render/, docs/, ...),
or a bare name ending in .c, .h, .cu or .sh (bare .py names in the prose are mostly the user's
scripts: my_train.py). Without an extension it may also name a program built from a source
(bench/attn_bits) or a test as ctest names it (capture/test_cuda). A name ending in '-' is a prefix,
one ending in '...' is elided (its folder must exist), `a-5..11` a numbered range, words with <, {
are templates, and a word with * a glob that must match. Paths under a folder .gitignore names are
outputs (bench/results/). A tsc_* name may also be a module's prefix (tsc_strbuf for
tsc_strbuf_*). The checker is tested on a planted tree first: a missing file, a missing function and
a stale bare name must be reported.
"""
import fnmatch
import io
import os
import re
import sys
import tempfile
import tokenize

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks  # noqa: E402

TOP = ("util", "kernels", "capture", "train", "analyze", "render", "cli", "python", "examples", "bench", "fuzz",
       "tests", "docs", "scripts", "cmake", ".ci")
BARE_EXT = (".c", ".h", ".cu", ".sh")
# Words the prose writes that look like paths of this tree and are not; each with why.
NOT_PATHS = {
    "llm.c", "train_gpt2.c", "train_gpt2.cu",  # another project (karpathy/llm.c) and its files
    "cblas.h",  # a system header (scripts/setup.sh says which package has it)
    # names in training logs (TensorBoard/W&B tags, their CSV columns) and the train/validation split
    "train/loss", "train/loss__MIN", "train/loss__MAX", "train/validation",
}

PATH_RE = re.compile(r"(?<![\w./*-])((?:%s)/[\w./*<>{}+-]*[\w*>}+.-]|[\w+-]+(?:%s))(?![\w/])" % (
    "|".join(re.escape(t) for t in TOP), "|".join(re.escape(e) for e in BARE_EXT)))
NAME_RE = re.compile(r"(?<![\w.])(tsc_[a-z0-9_]+)\b(?!\.(?:h|c|cu|py|sh|md)\b)")


def ignored_dirs(root):
    """The folders .gitignore names by a relative path (bench/results/): what scripts write."""
    try:
        lines = open(os.path.join(root, ".gitignore"), encoding="utf-8").read().split("\n")
    except OSError:
        return []
    return [x.strip("/") for x in lines if x.endswith("/") and "*" not in x and x.strip("/")]


def tree(root):
    """Every file of the tree (build folders and .git left out), relative to root."""
    for d, dirs, files in os.walk(root):
        if d == root:
            dirs[:] = [x for x in dirs if not x.startswith("build") and x != ".git"]
        for f in files:
            yield os.path.relpath(os.path.join(d, f), root)


def c_split(text):
    """([(line, comment)], code) of C source: // and /* */ comments apart from code and literals."""
    com, code, line, i, n = [], [], 1, 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        else:
            if text[i] in "\"'":
                q, j = text[i], i + 1
                while j < n and text[j] not in (q, "\n"):
                    j += 2 if text[j] == "\\" else 1
                j = min(j + 1, n)
            else:
                j = i + 1
                while j < n and text[j] not in "\"'/":
                    j += 1
            code.append(text[i:j])
            line += text.count("\n", i, j)
            i = j
            continue
        com.append((line, text[i:j]))
        line += text.count("\n", i, j)
        code.append(" ")
        i = j
    return com, "".join(code)


def py_split(text):
    """([(line, comment or docstring)], code) of Python source."""
    com, code = [], []
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [(1, text)], ""
    for t in toks:
        if t.type == tokenize.COMMENT or (t.type == tokenize.STRING and t.string.lstrip("rbuRBU").startswith(('"""', "'''"))):
            com.append((t.start[0], t.string))
        else:
            code.append(t.string)
    return com, " ".join(code)


def hash_split(text):
    """([(line, comment)], code) of shell and CMake: '#' at a line's start or after a blank."""
    com, code = [], []
    for k, line in enumerate(text.split("\n"), 1):
        m = re.search(r"(?:^|\s)#(?![!{])", line)
        if m:
            com.append((k, line[m.start():]))
            code.append(line[:m.start()])
        else:
            code.append(line)
    return com, "\n".join(code)


def scan(root):
    """The references of root's prose that do not resolve: [(file, line, reference, why)]."""
    files = sorted(tree(root))
    fileset, dirs, stems, bases = set(files), set(), set(), set()
    for f in files:
        bases.add(os.path.basename(f))
        stems.add(os.path.splitext(f)[0])
        p = f
        while "/" in p:
            p = p.rsplit("/", 1)[0]
            dirs.add(p)
    prose, code = [], []  # prose: (file, first line, text)
    for f in files:
        if f.startswith(("fuzz/corpus/", "fuzz/regressions/", "fuzz/pending/", "tests/data/")):
            continue
        full = os.path.join(root, f)
        if (f.startswith("docs/") and f.endswith(".md") and f.count("/") == 1) or f == "README.md":
            prose.extend((f, k, line) for k, line in enumerate(open(full, encoding="utf-8").read().split("\n"), 1))
            continue
        base = os.path.basename(f)
        if f.endswith((".c", ".h", ".cu")):
            com, cd = c_split(open(full, encoding="utf-8", errors="replace").read())
            prose.extend((f, k, c) for k, c in com)
            code.append(cd)
        elif f.endswith(".py"):
            com, cd = py_split(open(full, encoding="utf-8", errors="replace").read())
            prose.extend((f, k, c) for k, c in com)
            code.append(cd)
        elif f.endswith((".sh", ".cmake", ".in")) or base in ("CMakeLists.txt", "Makefile") or f.startswith(".ci/"):
            com, cd = hash_split(open(full, encoding="utf-8", errors="replace").read())
            prose.extend((f, k, c) for k, c in com)
            code.append(cd)
    names = set(NAME_RE.findall("\n".join(code)))
    prefixes = {x[:i + 1] for x in names for i, ch in enumerate(x) if ch == "_"}
    outputs = ignored_dirs(root)

    def path_ok(p):
        if p in NOT_PATHS or any(p.startswith(o + "/") for o in outputs):
            return True
        if "<" in p or "{" in p:
            return True  # a template (tests/<layer>/test_*.c): nothing to look up
        if "*" in p:
            return any(fnmatch.fnmatch(f, p) for f in files) or any(fnmatch.fnmatch(d, p) for d in dirs)
        m = re.match(r"^(.*?)(\d+)\.\.(\d+)$", p)
        if m:
            return all(path_ok(m.group(1) + m.group(k)) for k in (2, 3))
        if p.endswith("..."):
            return os.path.dirname(p) in dirs  # an elided name: fuzz/regressions/dump/crash-...
        p = p.rstrip(".")
        if p.endswith("-"):
            return any(f.startswith(p) for f in files)
        if "/" not in p:
            return p in bases
        if p in fileset or p in dirs or p.rstrip("/") in dirs:
            return True
        if not os.path.splitext(p)[1] and p in stems:
            return True  # a program built from a source of that name
        _, _, test = p.partition("/")
        return "/" not in test and test.startswith("test_") and ("tests/" + p) in stems  # a ctest name

    bad = []
    for f, k, text in prose:
        for m in PATH_RE.finditer(text):
            if not path_ok(m.group(1)):
                bad.append((f, k + text.count("\n", 0, m.start()), m.group(1).rstrip("."), "no such file or folder"))
        for m in NAME_RE.finditer(text):
            n = m.group(1)
            if n in names or (n if n.endswith("_") else n + "_") in prefixes:
                continue  # the name, or a prefix: tsc_inc_<layer>, a module (tsc_strbuf)
            bad.append((f, k + text.count("\n", 0, m.start()), n, "no source file's code has this name"))
    return bad


def self_test(c):
    """The checker catches a planted missing file, a missing function and a stale bare name."""
    with tempfile.TemporaryDirectory(prefix="tsc-refs-") as t:
        for d in ("docs", "render"):
            os.makedirs(os.path.join(t, d))
        open(os.path.join(t, "render", "real.c"), "w").write(
            "/* real.c: see render/real.c and docs/A.md; gone.h was renamed */\nint tsc_real_fn(void) { return 0; }\n")
        open(os.path.join(t, "docs", "A.md"), "w").write(
            "`tsc_real_fn()` in render/real.c, `tsc_gone_fn(` in render/gone.c, tests/<layer>/test_*.c.\n")
        got = sorted((f, p) for f, _, p, _ in scan(t))
        want = [("docs/A.md", "render/gone.c"), ("docs/A.md", "tsc_gone_fn"), ("render/real.c", "gone.h")]
        c.check(got == want, "the planted references: %s (expected %s)" % (got, want))


def main():
    c = Checks()
    self_test(c)
    root = os.environ.get("TSC_SRC") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    bad = scan(os.path.abspath(root))
    for f, k, p, why in bad:
        print("%s:%d: %s: %s" % (f, k, p, why), file=sys.stderr)
    c.check(not bad, "%d references in the docs and comments do not resolve (listed above)" % len(bad))
    c.finish()


if __name__ == "__main__":
    main()
