#!/usr/bin/env python3
"""The benchmark suite's summary table, each figure beside the last run's.

    bench_summary.py ROWS [BASELINE]
    bench_summary.py --check

ROWS holds the `BENCH|figure|ours|reference|ratio|goal` lines of this run;
BASELINE (if it exists) those of an earlier run of the same mode on this
machine, after a first line `# <date> <commit>`. Prints the markdown table
with a column "vs last run" and, below it, every figure that got more than
10% worse, so that a regression is seen in the summary itself.

Which way is better: a figure with a goal (`<= x1.25`, `>= x1.0`) compares
its ratio, which is measured against a reference in the same run and so
shrugs off a busier machine; one without compares its own value by its unit
(per second: higher is better; ms, s, calls, MiB: lower is better). A figure
with neither is shown, not judged.
"""

import re
import sys

THRESHOLD = 0.10


def number(text):
    """The first number in `text` (thousands separators dropped), or None."""
    m = re.search(r"-?\d[\d,]*(?:\.\d+)?", text or "")
    return float(m.group(0).replace(",", "")) if m else None


def direction_of_goal(goal):
    """+1 when a higher ratio is better, -1 when lower, None when unknown."""
    g = goal.replace(" ", "")
    if g.startswith(("<=", "≤", "<")):
        return -1
    if g.startswith((">=", "≥", ">")):
        return 1
    return None


def direction_of_unit(value):
    if "/s" in value:
        return 1
    if re.search(r"\b(ms|s|calls|MiB|MB|KiB)\b", value):
        return -1
    return None


def judged(new, old):
    """(text for the column, regressed?) comparing one figure with its old row."""
    if old is None:
        return "new", False
    goal_dir = direction_of_goal(new["goal"])
    if goal_dir is not None and number(new["ratio"]) and number(old["ratio"]):
        field, better = "ratio", goal_dir
    else:
        field, better = "ours", direction_of_unit(new["ours"])
    a, b = number(new[field]), number(old[field])
    if better is None or a is None or not b:
        return f"was {old['ours']}", False
    change = (a - b) / abs(b)
    worse = -change * better
    text = f"{old[field]} → {new[field]} ({change:+.0%})"
    if worse > THRESHOLD:
        return f"**{text}, worse**", True
    return text, False


def rows(path):
    out = {}
    order = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("|")
                if len(parts) != 6 or parts[0] != "BENCH":
                    continue
                row = dict(zip(["figure", "ours", "reference", "ratio", "goal"], parts[1:]))
                if row["figure"] not in out:
                    order.append(row["figure"])
                out[row["figure"]] = row
    except FileNotFoundError:
        return None, []
    return out, order


def check():
    """The comparisons on known rows (`--check`; the smoke run calls it)."""
    def row(ours, ratio, goal):
        return {"figure": "f", "ours": ours, "reference": "r", "ratio": ratio, "goal": goal}

    cases = [
        # A ratio with a goal "at most": up by 14% is worse.
        (row("0.95 ms", "x2.26", "<= x1.25"), row("0.84 ms", "x1.99", "<= x1.25"), True),
        # ... and down is better, whatever the own value did.
        (row("0.95 ms", "x1.80", "<= x1.25"), row("0.84 ms", "x1.99", "<= x1.25"), False),
        # A ratio with a goal "at least": down by 20% is worse.
        (row("4,000 rows/s", "x0.80", ">= x1.0"), row("5,000 rows/s", "x1.00", ">= x1.0"), True),
        # No goal: per second, higher is better; within 10% is not worse.
        (row("1,000 URLs/s", "x0.03", "report"), row("1,076 URLs/s", "x0.03", "report"), False),
        (row("900 URLs/s", "x0.03", "report"), row("1,076 URLs/s", "x0.03", "report"), True),
        # No goal: calls and ms, lower is better.
        (row("11.0 calls", "n/a", "report"), row("9.4 calls", "n/a", "report"), True),
        (row("300 ms", "x0.2", "-"), row("400 ms", "x0.3", "-"), False),
        # Neither: shown, not judged.
        (row("7", "x2", "-"), row("1", "x1", "-"), False),
    ]
    for new, old, worse in cases:
        text, got = judged(new, old)
        assert got == worse, (new, old, text)
    assert judged(row("1 ms", "x1", "-"), None) == ("new", False)
    assert number("1,076 URLs/s") == 1076 and number("x1.99") == 1.99 and number("n/a") is None
    print(f"bench_summary: {len(cases) + 1} comparisons as expected")


def main():
    if sys.argv[1:] == ["--check"]:
        check()
        return
    new, order = rows(sys.argv[1])
    old, _ = rows(sys.argv[2]) if len(sys.argv) > 2 else (None, [])
    since = None
    if old is not None:
        with open(sys.argv[2], encoding="utf-8") as f:
            first = f.readline().strip()
        since = first[1:].strip() if first.startswith("#") else "an earlier run"
    print("| figure | ours | reference | ratio | goal | vs last run |")
    print("|---|---:|---:|---:|---|---|")
    regressed = []
    for figure in order:
        r = new[figure]
        text, worse = judged(r, (old or {}).get(figure)) if old is not None else ("–", False)
        if worse:
            regressed.append(figure)
        print(f"| {figure} | {r['ours']} | {r['reference']} | {r['ratio']} | {r['goal']} | {text} |")
    print()
    if old is None:
        print("No earlier run of this mode here to compare with.")
    elif regressed:
        print(f"Worse by more than {THRESHOLD:.0%} than the last run ({since}):")
        for f in regressed:
            print(f"- {f}")
    else:
        print(f"No figure is worse by more than {THRESHOLD:.0%} than the last run ({since}).")


if __name__ == "__main__":
    main()
