#!/usr/bin/env python3
"""merge_rows.py: one README row from the rows of N runs of the same benchmark.

Reads "TABLE | ... |" rows (one per run, the same benchmark) on stdin and prints one row in which
every number is replaced by "MEDIAN (MIN–MAX)" over the runs, the numbers matched by position; the
text around them comes from the rows of the most common shape (the first of them; ties go to the
shape seen first), so one busy run that claimed no ratio cannot set the shape for the others. The
median of an even count is the lower middle value, so every figure printed is one that was measured.
A row of another shape (a run that claimed no ratio, a failed run) is left out and counted.
    bench/merge_rows.py < rows.txt   ->   "TABLE | ... | 2326 (2290–2410) / ... | ... (5 runs) |"
"""
import re
import sys

NUM = re.compile(r"-?\d+(?:\.\d+)?")


def merge(rows):
    rows = [r.rstrip("\n") for r in rows if r.startswith("TABLE |")]
    if not rows:
        return None, 0
    shapes = [NUM.sub("#", r) for r in rows]
    common = max(shapes, key=lambda sh: (shapes.count(sh), -shapes.index(sh)))
    kept = [r for r, sh in zip(rows, shapes) if sh == common]
    first, skipped = kept[0], len(rows) - len(kept)
    cols = [NUM.findall(r) for r in kept]
    if len(cols) == 1:
        return first, skipped
    out, i = [], 0

    def repl(m):
        nonlocal i
        vals = sorted((c[i] for c in cols), key=float)
        i += 1
        med = vals[(len(vals) - 1) // 2]
        return med if vals[0] == vals[-1] else "%s (%s–%s)" % (med, vals[0], vals[-1])

    row = NUM.sub(repl, first)
    row = row.rstrip().rstrip("|").rstrip() + " (median of %d runs, range in brackets) |" % len(cols)
    return row, skipped


if __name__ == "__main__":
    row, skipped = merge(sys.stdin.readlines())
    if row is None:
        sys.exit("merge_rows: no TABLE row on stdin")
    print(row)
    if skipped:
        print("merge_rows: %d run(s) left out: their row is not of the runs' common shape" % skipped, file=sys.stderr)
