"""Length-disentangled training (``cheems train --length-head``, ODIN, arXiv 2402.07319) against the plain recipe.

Two m3e-small reward models trained on the same data with the same settings and seed, one with ``--length-head``
(a second head that absorbs the length-driven part of the preference during training and is dropped from the
saved model), the other without:

- data: oasst1_zh (../shared/data; human-ranked replies), ``cheems split``'s split (20% of prompts held out,
  seed 0); both train on the other 80%;
- recipe: ``cheems train``'s defaults for m3e-small (the small preset), max length 256 and ``--epochs`` (1 by
  default, as benchmarks/leaderboard.sh), seed 42; ``--length-head`` with its default weights (1, 1, 1);
- evaluated, as ``cheems eval --details`` does, on the held-out split and on the demo bench (``cheems demo``'s
  shipped sample, open + human; out of domain for both models): overall with its 95% bootstrap interval,
  accuracy on the pairs where the chosen response is longer / shorter (eval's length split), and the Pearson
  correlation of the scores with response length in characters (ODIN's own measure); then ``cheems compare``
  (paired bootstrap over prompts, McNemar) of the two details files on each bench.

    python benchmarks/length_head.py [--out runs/length-head] [--epochs 1] [--max-length 256]
                                     [--quality-corr-weight 1.0]

The trained models are kept in OUT/rm-plain and OUT/rm-length-head (OUT/rm-length-head-qW with another
``--quality-corr-weight`` W) and reused when there (delete them to train
again); the eval JSONs, details files and comparisons are written beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from cheems.analysis.compare import compare, print_comparison
from cheems.data.importers import import_file
from cheems.data.io import ScoreKey, write_json, write_records, write_scores
from cheems.data.schema import Record
from cheems.data.split import split_records
from cheems.evaluate import load_bench, score
from cheems.evaluate.evaluation import ScoredBy, evaluate_files
from cheems.models import load_scorer
from cheems.train.config import load_config
from cheems.train.trainer import train_reward_model
from cheems.workflows.demo import demo_files

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
RECIPES = {"plain": False, "length-head": True}


def train(name: str, data: Path, out: Path, args: argparse.Namespace) -> tuple[Path, float | None]:
    """One recipe's model (trained unless already in ``out``); its training seconds (None when reused)."""
    weighted = RECIPES[name] and args.quality_corr_weight != 1.0
    folder = out / (f"rm-{name}-q{args.quality_corr_weight:g}" if weighted else f"rm-{name}")
    if (folder / "config.json").is_file():
        return folder, None
    settings = {
        "model": "m3e-small",
        "data": [str(data)],
        "output": str(folder),
        "epochs": args.epochs,
        "max_length": args.max_length,
        "seed": 42,
        "progress": False,
        "length_head": RECIPES[name],
        **({"quality_corr_weight": args.quality_corr_weight} if RECIPES[name] else {}),
    }
    start = time.perf_counter()
    train_reward_model(load_config(None, settings))
    return folder, time.perf_counter() - start


def length_correlation(bench: dict[str, list[Record]], scores: dict[ScoreKey, float]) -> float:
    """Pearson's r of the scores with the responses' length in characters, over every response of the bench."""
    pairs = [(scores[r.id, x.id], len(x.content)) for recs in bench.values() for r in recs for x in r.responses]
    values, lengths = np.array(pairs, dtype=float).T
    return float(np.corrcoef(values, lengths)[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/length-head"))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument(
        "--quality-corr-weight", type=float, default=1.0, help="the length-head run's quality_corr_weight"
    )
    args = parser.parse_args()
    source = DATA / "oasst1_zh" / "oaast_rm_zh.json"
    if not source.is_file():
        sys.exit(f"skipped: no data at {DATA} (the team checkout has ../shared/data beside the repository)")
    args.out.mkdir(parents=True, exist_ok=True)
    train_split, test_split = split_records(import_file(source, "ranked", skip_invalid=True).records)
    write_records(args.out / "oasst1-train.jsonl", train_split)
    write_records(args.out / "oasst1-test.jsonl", test_split)
    benches = {"oasst1_zh held out": [args.out / "oasst1-test.jsonl"], "demo bench": demo_files()}
    print(
        f"machine: {os.cpu_count()} CPU cores (shared with other jobs); m3e-small, max_length {args.max_length}, "
        f"{args.epochs} epoch(s), seed 42; oasst1_zh: {len(train_split)} training prompts, {len(test_split)} held out"
    )

    folders = {}
    for name in RECIPES:
        folders[name], took = train(name, args.out / "oasst1-train.jsonl", args.out, args)
        print(f"{name}: {'reused ' + str(folders[name]) if took is None else f'trained in {took:.0f} s'}")

    details: dict[tuple[str, str], Path] = {}
    print(
        "\n| bench | recipe | overall [95% CI] | chosen longer (pairs) | chosen shorter (pairs) | r(score, length) |\n"
        "|---|---|---:|---:|---:|---:|"
    )
    for bench_name, files in benches.items():
        bench, slug = load_bench(files), bench_name.split()[0]
        for name, folder in folders.items():
            # scored once, then evaluated from the scores file as cheems eval --scores does (intervals, details)
            scores = score(bench, load_scorer(str(folder), max_length=args.max_length))
            stem = f"{slug}.{name}"
            write_scores(args.out / f"{stem}.scores.jsonl", scores)
            result = evaluate_files(files, ScoredBy(scores=args.out / f"{stem}.scores.jsonl"), fingerprint=True)
            details[bench_name, name] = args.out / f"{stem}.details.jsonl"
            result.write(args.out / f"{stem}.json", None, details[bench_name, name])
            report = result.report.to_dict()
            longer, shorter = report["length"]["chosen_longer"], report["length"]["chosen_shorter"]
            print(
                f"| {bench_name} | {name} | {report['overall']:.3f} [{report['overall_ci'][0]:.3f}, "
                f"{report['overall_ci'][1]:.3f}] | {longer['accuracy']:.3f} ({longer['n_pairs']}) | "
                f"{shorter['accuracy']:.3f} ({shorter['n_pairs']}) | {length_correlation(bench, scores):+.3f} |"
            )
    console = Console(width=150)
    for bench_name in benches:
        comparison = compare(details[bench_name, "length-head"], details[bench_name, "plain"])
        write_json(args.out / f"compare-{bench_name.split()[0]}.json", comparison.to_dict())
        console.print(f"\ncheems compare, {bench_name}: A = length-head, B = plain")
        print_comparison(comparison, console)


if __name__ == "__main__":
    main()
