"""``cheems suite`` on real Chinese preference data, for every scorer that runs here: each bench's number with its
95% bootstrap interval, the suite's mean, and the time each scorer's run took.

The suite is built from ../shared/data (each folder's PROVENANCE.md says what it is):

- ``oasst1``: the held-out 20% of oasst1_zh (human-ranked replies, ``cheems split``'s split), CheemsBench's metric;
- ``oasst1-bon``: the same prompts with ``bon`` (right iff the best reply outscores every other);
- ``medical``: medicalgpt_dpo_zh's 100 medical pairs (doctor's answer vs a model's), ``pairwise``;
- ``gpt4-zh``: the first ``--pairs`` GPT-4-rated pairs of gpt4_comparison_zh, ``pairwise``;
- ``dpo-zh``: dpo_zh_demo's pairs (AI-labelled), ``pairwise``.

Scorers: the length baseline, zero-shot ``similarity:m3e-small``, with ``--train`` m3e-small trained on the other
80% of oasst1_zh (1 epoch, max length 256, as benchmarks/leaderboard.sh; kept in OUT/rm-oasst1 and reused), and
any reward model folders given with ``--rm``. Each scorer runs the whole suite once, through the library call
``cheems suite`` makes (:func:`cheems.suite_files`), its scores cached in a fresh file (the time is a cold run).

    python benchmarks/suite.py [--out runs/suite] [--pairs 300] [--train] [--rm FOLDER ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import cheems
from cheems.analysis.leaderboard import board_markdown, load_leaderboard
from cheems.data.importers import import_file
from cheems.data.io import write_records
from cheems.data.split import split_records
from cheems.evaluate.evaluation import ScoredBy
from cheems.evaluate.suite import load_suite, suite_files
from cheems.models.scoring import ScoringSettings

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CONFIG = """\
resamples: 1000
benches:
  - name: oasst1
    bench: oasst1.jsonl
  - name: oasst1-bon
    bench: oasst1.jsonl
    metric: bon
  - name: medical
    bench: medical.jsonl
    metric: pairwise
  - name: gpt4-zh
    bench: gpt4.jsonl
    metric: pairwise
  - name: dpo-zh
    bench: dpo.jsonl
    metric: pairwise
"""


def build(out: Path, pairs: int) -> Path:
    """The suite's bench files and config under ``out`` (and oasst1_zh's training 80%); returns the config."""
    ranked = import_file(DATA / "oasst1_zh" / "oaast_rm_zh.json", "ranked", skip_invalid=True).records
    train, test = split_records(ranked)
    write_records(out / "oasst1.jsonl", test)
    write_records(out / "oasst1-train.jsonl", train)
    sources = {
        "medical": DATA / "medicalgpt_dpo_zh" / "medical_reward_test_100.jsonl",
        "gpt4": DATA / "gpt4_comparison_zh" / "comparison_gpt4_data_zh.first2403.json",
        "dpo": DATA / "dpo_zh_demo" / "dpo_zh_demo.json",
    }
    for name, path in sources.items():
        records = import_file(path, "pairwise", skip_invalid=True).records
        write_records(out / f"{name}.jsonl", records[:pairs] if name == "gpt4" else records)
    config = out / "suite.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/suite"))
    parser.add_argument("--pairs", type=int, default=300, help="gpt4_comparison_zh pairs in the suite")
    parser.add_argument("--train", action="store_true", help="also m3e-small trained on oasst1_zh's other 80%%")
    parser.add_argument("--rm", nargs="*", default=[], help="trained reward model folders to run as well")
    args = parser.parse_args()
    if not (DATA / "oasst1_zh").is_dir():
        sys.exit(f"skipped: no data at {DATA} (the team checkout has ../shared/data beside the repository)")
    args.out.mkdir(parents=True, exist_ok=True)
    suite = load_suite(build(args.out, args.pairs))
    for entry in suite.benches:
        print(f"{entry.name}: {', '.join(f.name for f in entry.files)}, --metric {entry.settings.metric}")
    trained = []
    if args.train:
        folder = args.out / "rm-oasst1"
        if not (folder / "config.json").is_file():
            start = time.perf_counter()
            cheems.train(data=[str(args.out / "oasst1-train.jsonl")], output=str(folder), epochs=1, max_length=256)
            print(f"trained {folder} in {time.perf_counter() - start:.0f} s")
        trained.append(str(folder))
    jsons = []
    for model in ["length", "similarity:m3e-small", *trained, *args.rm]:
        with tempfile.TemporaryDirectory() as cache:
            by = ScoredBy(scoring=ScoringSettings(model=model, cache=Path(cache) / "scores.sqlite"))
            start = time.perf_counter()
            result = suite_files(suite, by, progress=False)
            took = time.perf_counter() - start
        data = result.to_dict()
        print(f"\n{model}: {took:.1f} s (load, score, evaluate and bootstrap every bench)")
        for name, bench in data["benches"].items():
            low, high = bench["score_ci"]
            shown = f"{bench['score']:.3f} [{low:.3f}, {high:.3f}]"
            print(f"  {name:<11} {bench['metric']:<9} {shown}  {bench['n_prompts']} prompts")
        low, high = data["overall_ci"]
        print(f"  {'mean':<11} {'':<9} {data['overall']:.3f} [{low:.3f}, {high:.3f}]")
        path = args.out / f"{Path(model).name.replace(':', '-')}.json"
        result.write(path)
        jsons.append(path)
    print()
    print(board_markdown(load_leaderboard(jsons), "cheems suite: real Chinese preference data"))


if __name__ == "__main__":
    main()
