"""bench/merge_results.py, which keeps a partial benchmark run (TSC_BENCH_ONLY) from dropping the
other benchmarks' sections of bench/RESULTS.md: the selected sections are replaced, the others kept in
their order, and every section says the date and commit it was measured at."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tsc_testlib import Checks  # noqa: E402

SRC = os.environ.get("TSC_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
c = Checks()
old = ("# Benchmark results\n\n- date: 2026-01-01 10:00 UTC\n- commit: aaa111\n\n"
       "## `bench one`\n\n- status: ok\n- row: | `bench one` | old one |\n\n```text\nold output 1\n```\n\n"
       "## `bench two`\n\n- status: ok\n- row: | `bench two` | old two |\n\n```text\nold output 2\n```\n")
new = ("# Benchmark results\n\n- date: 2026-02-02 12:00 UTC\n- commit: bbb222\n\n"
       "## `bench two`\n\n- status: ok\n- row: | `bench two` | new two |\n\n```text\nnew output 2\n```\n\n"
       "## `bench three`\n\n- status: ok\n- row: | `bench three` | new three |\n")


def merge(old_text, new_text):
    """merge_results.py's output for the two files' texts."""
    with tempfile.TemporaryDirectory() as d:
        po, pn = os.path.join(d, "old.md"), os.path.join(d, "new.md")
        open(po, "w").write(old_text)
        open(pn, "w").write(new_text)
        return subprocess.run([sys.executable, os.path.join(SRC, "bench", "merge_results.py"), po, pn],
                              capture_output=True, text=True, check=True).stdout


out = merge(old, new)
heads = [l for l in out.splitlines() if l.startswith("## ")]
c.check(heads == ["## `bench one`", "## `bench two`", "## `bench three`"], "sections in OLD's order, new ones last: %s" % heads)
c.check("- date: 2026-02-02 12:00 UTC" in out and "2026-01-01 10:00 UTC\n- commit" not in out,
        "the header is the new run's")
c.check("| old one |" in out and "old output 1" in out, "the unselected section is kept whole")
c.check("| old two |" not in out and "old output 2" not in out and "| new two |" in out,
        "the selected section is replaced")
one = out.split("## `bench one`")[1].split("## ")[0]
two = out.split("## `bench two`")[1].split("## ")[0]
c.check("- measured: 2026-01-01 10:00 UTC, commit aaa111 (an earlier run, kept)" in one,
        "the kept section says when it was measured: %r" % one[:120])
c.check("- measured: 2026-02-02 12:00 UTC, commit bbb222" in two and "earlier" not in two,
        "the new section says this run: %r" % two[:120])
# merging again keeps one '- measured' line per section
out2 = merge(out, new)
c.check(out2.count("- measured: ") == 3, "one '- measured' line per section after a second merge: %d" % out2.count("- measured: "))
c.finish()
