#!/usr/bin/env python3
"""merge_rows.py: one README row from the rows of N runs of the same benchmark.

Reads "TABLE | ... |" rows (one per run, the same benchmark) on stdin and prints one row in which
every number is replaced by "MEDIAN (MIN–MAX)" over the runs, the numbers matched by position; the
text around them comes from the first row. The median of an even count is the lower middle value,
so every figure printed is one that was measured. A row whose numbers do not line up with the
first (a run that claimed no ratio, a failed run) is left out and counted.
    bench/merge_rows.py < rows.txt   ->   "TABLE | ... | 2326 (2290–2410) / ... | ... (5 runs) |"
"""
import re
import sys

NUM = re.compile(r"-?\d+(?:\.\d+)?")


def merge(rows):
    rows = [r.rstrip("\n") for r in rows if r.startswith("TABLE |")]
    if not rows:
        return None, 0
    first = rows[0]
    cols = [NUM.findall(first)]
    skipped = 0
    for r in rows[1:]:
        n = NUM.findall(r)
        if len(n) == len(cols[0]) and NUM.sub("#", r) == NUM.sub("#", first):
            cols.append(n)
        else:
            skipped += 1
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
        print("merge_rows: %d run(s) left out: their row does not match the first's shape" % skipped, file=sys.stderr)
