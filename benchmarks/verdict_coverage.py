"""Verdict coverage: how many realistic judge replies ``parse_verdict`` reads, and that it never guesses.

The corpus (tests/data/verdict_corpus.jsonl) holds judge replies in the styles GPT-4o, Qwen2.5,
DeepSeek-V3/R1 and GLM-4 use when asked for "A, B or C only", each labelled with its intended
verdict (A/B/C) or null when the reply states no clear final answer (a label only in reasoning, a
hedge, a self-contradiction, two labels, a truncated reply). ``set`` says when a reply was written:
``dev`` while the parser was written, ``fresh-1..3`` in three later batches, each first measured
before the parser was changed for it (those first-contact figures are in BENCHMARKS.md).

Prints markdown tables: coverage (clear replies read with the intended label) by language, with
or without a reasoning block and by set; refusals of the no-verdict replies; and the failure
reason of every reply that got no verdict.

    python benchmarks/verdict_coverage.py [--corpus tests/data/verdict_corpus.jsonl]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from cheems.judge.verdict import FAILURE_REASONS, parse_verdict

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    """Print the coverage tables for the corpus."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "data" / "verdict_corpus.jsonl")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        row["got"] = parse_verdict(row["reply"])

    groups: dict[str, dict[str, list[dict]]] = {
        "all": {"all": rows},
        "language": defaultdict(list),
        "reasoning block": defaultdict(list),
        "set": defaultdict(list),
    }
    for row in rows:
        groups["language"][row["lang"]].append(row)
        groups["reasoning block"]["with a think block" if row["think"] else "without"].append(row)
        groups["set"][row["set"]].append(row)

    print("| group | value | clear replies | read right | coverage | no-verdict replies | refused | false verdicts |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for group, parts in groups.items():
        for value, part in sorted(parts.items()):
            clear = [r for r in part if r["verdict"] is not None]
            right = sum(r["got"].label == r["verdict"] for r in clear)
            nulls = [r for r in part if r["verdict"] is None]
            refused = sum(r["got"].label is None for r in nulls)
            false = sum(r["got"].label not in (None, r["verdict"]) for r in part)
            share = f"{right / len(clear):.1%}" if clear else "-"
            print(f"| {group} | {value} | {len(clear)} | {right} | {share} | {len(nulls)} | {refused} | {false} |")

    print("\n| failure reason | meaning | clear replies refused | no-verdict replies refused |")
    print("|---|---|---:|---:|")
    missed = Counter(r["got"].failure for r in rows if r["verdict"] is not None and r["got"].label is None)
    refused_nulls = Counter(r["got"].failure for r in rows if r["verdict"] is None and r["got"].label is None)
    for reason, meaning in FAILURE_REASONS.items():
        print(f"| {reason} | {meaning} | {missed[reason]} | {refused_nulls[reason]} |")

    misses = [r for r in rows if r["verdict"] is not None and r["got"].label != r["verdict"]]
    if misses:
        print("\nClear replies not read:")
        for r in misses:
            print(f"- {r['reply']!r} (intended {r['verdict']}, {r['got'].failure}; {r['set']})")


if __name__ == "__main__":
    main()
