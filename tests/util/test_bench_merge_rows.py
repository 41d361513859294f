"""bench/merge_rows.py, which makes the README's speed rows from several runs: every number the
median over the runs (the lower middle one for an even count, so it was measured) with the min-max
range, matched by position; a row of another shape (a run that claimed nothing) is left out."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.environ.get("TSC_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                      "..", "..")), "bench"))
from tsc_testlib import Checks  # noqa: E402
import merge_rows  # noqa: E402

c = Checks()
rows = ["TABLE | gpt2 fp32, B 8 | 2326 / 2620 | 1515.0 | 1.54x |\n",
        "not claimed: machine busy\n",
        "TABLE | gpt2 fp32, B 8 | 2400 / 2600 | 1500.0 | 1.60x |\n",
        "TABLE | gpt2 fp32, B 8 | 2300 / 2700 | 1520.0 | 1.51x |\n",
        "TABLE | gpt2 fp32, B 8 | n/a / 2700 | 1520.0 | n/a |\n"]
row, skipped = merge_rows.merge(rows)
want = ("TABLE | gpt2 fp32, B 8 | 2326 (2300–2400) / 2620 (2600–2700) | 1515.0 (1500.0–1520.0) | "
        "1.54 (1.51–1.60)x (median of 3 runs, range in brackets) |")
c.check(row == want, "merged row:\n  %s\nwant\n  %s" % (row, want))
c.check(skipped == 1, "the n/a row is left out and counted (%d)" % skipped)
# the first run claimed nothing (busy): the other runs' shape wins, and the first is the one left out
row, skipped = merge_rows.merge(["TABLE | x | 83.3 ms | not claimed (machine busy) |\n"] +
                                ["TABLE | x | %s ms | %sx |\n" % (t, r) for t, r in (("80.9", "3.73"), ("79.9", "3.74"),
                                                                                      ("76.5", "4.01"))])
c.check(row == "TABLE | x | 79.9 (76.5–80.9) ms | 3.74 (3.73–4.01)x (median of 3 runs, range in brackets) |"
        and skipped == 1, "a busy first run does not decide the shape: %s (%d left out)" % (row, skipped))
row, _ = merge_rows.merge(["TABLE | a 1 | 4 |\n", "TABLE | a 1 | 2 |\n", "TABLE | a 1 | 3 |\n", "TABLE | a 1 | 9 |\n"])
c.check(row == "TABLE | a 1 | 3 (2–9) (median of 4 runs, range in brackets) |", "even count: lower middle: %s" % row)
row, skipped = merge_rows.merge(["TABLE | one run | 7.5 |\n"])
c.check(row == "TABLE | one run | 7.5 |" and skipped == 0, "a single row stays as it was: %s" % row)
c.check(merge_rows.merge(["no rows\n"]) == (None, 0), "no TABLE row: nothing")
c.finish()
