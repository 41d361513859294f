"""Keeps a partial benchmark run from dropping the rest of the results file.

usage: merge_results.py OLD NEW > OUT

NEW is what bench/run_all.sh wrote for a selection (TSC_BENCH_ONLY); OLD the results file before it.
OUT is NEW's header, then the benchmarks in OLD's order: NEW's section where this run measured the
benchmark, else OLD's, kept as it was with a line saying when it was measured (its run's date and
commit). Benchmarks only NEW has come last. Every section says when it was measured."""
import re
import sys


def split(text):
    """(header lines, [(command, section lines)]) of a results file."""
    head, secs = [], []
    for line in text.splitlines():
        m = re.match(r"^## `(.*)`$", line)
        if m:
            secs.append((m.group(1), [line]))
        elif secs:
            secs[-1][1].append(line)
        else:
            head.append(line)
    return head, secs


def field(head, name):
    for line in head:
        if line.startswith(f"- {name}: "):
            return line[len(name) + 4:]
    return "unknown"


def stamped(lines, when):
    """The section with a '- measured:' line after its heading (kept when it has one)."""
    if any(l.startswith("- measured: ") for l in lines):
        return lines
    return lines[:2] + [f"- measured: {when}"] + lines[2:]


def main():
    old_head, old = split(open(sys.argv[1]).read())
    new_head, new = split(open(sys.argv[2]).read())
    new_when = f"{field(new_head, 'date')}, commit {field(new_head, 'commit')}"
    old_when = f"{field(old_head, 'date')}, commit {field(old_head, 'commit')} (an earlier run, kept)"
    fresh = dict(new)
    out = list(new_head)
    seen = set()
    for cmd, lines in old:
        if cmd in fresh:
            out += stamped(fresh[cmd], new_when)
        else:
            out += stamped(lines, old_when)
        seen.add(cmd)
    for cmd, lines in new:
        if cmd not in seen:
            out += stamped(lines, new_when)
    print("\n".join(out))


if __name__ == "__main__":
    main()
