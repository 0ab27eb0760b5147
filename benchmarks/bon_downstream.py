"""Downstream numbers for ``cheems correlate``: best-of-N with each scorer on a bench with gold ranks.

Stands in for ``cheems bon`` (issue 12, item 2, built in parallel) so that BENCHMARKS.md's correlation
table has a downstream column. For each scorer, read from the details file ``cheems eval --details``
wrote (every response of a ranked pair carries its score): per prompt, the response with the highest
score (ties: the first in the record's response order) is the pick, and its gold quality is the
prompt's human rank. Two metrics per scorer:

- ``bon_top1``: share of prompts whose pick has the prompt's best rank;
- ``bon_quality``: mean over prompts of (worst rank - pick's rank) / (worst rank - best rank),
  1 = always the best response, 0 = always the worst.

Only prompts with at least two rank levels count. A random pick's expected values are printed too.

    python benchmarks/bon_downstream.py BENCH.jsonl NAME=DETAILS.jsonl ... -o downstream.csv
"""

from __future__ import annotations

import argparse
import csv
import io

from cheems.data.io import read_records, write_text
from cheems.evaluate.details import read_details


def scores_of(details_path: str) -> dict[str, dict[str, float]]:
    """prompt id -> {response id: score} from a details file's pairs."""
    out: dict[str, dict[str, float]] = {}
    for prompts in read_details(details_path).outcomes.values():
        for o in prompts:
            scores = out.setdefault(o.prompt_id, {})
            for p in o.pairs:
                scores[p.chosen], scores[p.rejected] = p.chosen_score, p.rejected_score
    return out


def pick_metrics(ranks: dict[str, dict[str, int]], order: dict[str, list[str]], scores: dict) -> tuple[float, float]:
    """(bon_top1, bon_quality) of the highest-scored response of each prompt."""
    top1, quality = [], []
    for pid, rank in ranks.items():
        scored = [r for r in order[pid] if r in scores.get(pid, {})]
        pick = max(scored, key=lambda r: scores[pid][r])  # max keeps the first of equal scores
        best, worst = min(rank.values()), max(rank.values())
        top1.append(rank[pick] == best)
        quality.append((worst - rank[pick]) / (worst - best))
    return sum(top1) / len(top1), sum(quality) / len(quality)


def main() -> None:
    """Write the downstream CSV and print it with the random pick's expectation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", help="records with gold ranks (the held-out split)")
    parser.add_argument("details", nargs="+", help="NAME=DETAILS.jsonl, one per scorer")
    parser.add_argument("-o", "--output", required=True, help="downstream CSV for cheems correlate")
    args = parser.parse_args()
    records = read_records(args.bench).records
    ranks = {r.id: r.rank for r in records if r.rank and len(set(r.rank.values())) > 1}
    order = {r.id: [resp.id for resp in r.responses] for r in records}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["name", "bon_top1", "bon_quality"])
    for item in args.details:
        name, path = item.split("=", 1)
        top1, quality = pick_metrics(ranks, order, scores_of(path))
        writer.writerow([name, f"{top1:.6f}", f"{quality:.6f}"])
    write_text(args.output, buffer.getvalue())
    print(buffer.getvalue(), end="")
    random_top1 = sum(sum(v == min(r.values()) for v in r.values()) / len(r) for r in ranks.values()) / len(ranks)
    random_quality = sum(
        sum((max(r.values()) - v) / (max(r.values()) - min(r.values())) for v in r.values()) / len(r)
        for r in ranks.values()
    ) / len(ranks)
    print(f"# {len(ranks)} prompts; random pick: bon_top1 {random_top1:.4f}, bon_quality {random_quality:.4f}")


if __name__ == "__main__":
    main()
