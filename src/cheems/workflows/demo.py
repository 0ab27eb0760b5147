"""The demo: the main job end to end, offline, on the small sample the package ships."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cheems.analysis.bon import BonResult, best_of_n
from cheems.data.io import ScoreKey, write_json, write_records, write_scores
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.evaluate import EvalReport, evaluate_scores, load_bench, score
from cheems.evaluate.report import print_report
from cheems.models import ScoreCache, load_scorer
from cheems.ranking import resolve_file_records

SUBSETS = ("open", "human")
TRAINED = "m3e-small trained on open"


def demo_files() -> list[Path]:
    """The shipped sample bench files (illustrative, not human-annotated)."""
    folder = files("cheems") / "assets" / "demo"
    return [Path(str(folder / f"{name}.jsonl")) for name in SUBSETS]


def resolve_sample(output: Path, console: Console) -> list[Path]:
    """Resolve the sample's annotator comparisons into ranks; write the ranked bench files."""
    table = Table(title="step 1 · resolve conflicting comparisons (Algorithm 1)")
    for col in ("subset", "prompts", "comparisons", "conflicts", "conflict ratio"):
        table.add_column(col, justify="left" if col == "subset" else "right")
    ranked = []
    for path in demo_files():
        records, stats, _ = resolve_file_records(read_records(path).records)
        target = output / "bench" / path.name
        write_records(target, records)
        write_json(output / "bench" / f"{path.stem}.conflicts.json", stats.to_dict())
        table.add_row(
            path.stem, str(stats.records), str(stats.comparisons), str(stats.conflicts), f"{stats.conflict_ratio:.3f}"
        )
        ranked.append(target)
    console.print(table)
    return ranked


def slug(model: str) -> str:
    """A model spec as a file-name part (a folder by its name)."""
    return Path(model).name if Path(model).is_dir() else model.replace(":", "-").replace("/", "_")


def score_and_evaluate(
    model: str, bench_files: list[Path], output: Path, console: Console, step: int
) -> tuple[EvalReport, dict[ScoreKey, float]]:
    """Score the bench with one model, write its scores and metrics, print the table; return both."""
    bench = load_bench(bench_files)
    scores = score(bench, load_scorer(model), cache=ScoreCache(output / "scores.sqlite"))
    write_scores(output / f"scores.{slug(model)}.jsonl", scores)
    report = evaluate_scores(bench, scores, model)
    write_json(output / f"metrics.{slug(model)}.json", report.to_dict())
    print_report(report, title=f"step {step} · evaluate: {model}", console=console)
    return report, scores


def best_of_five(
    human: Path, scores: dict[str, dict[ScoreKey, float]], output: Path, console: Console, step: int
) -> dict[str, BonResult]:
    """Best-of-5 on the held-out ``human`` subset with each scorer: the gold quality of its picks.

    Gold = the ranks resolved from the annotators' comparisons (step 1): the author's hidden quality
    order is not shipped, so the resolved ranks stand in for it.
    """
    records = read_records(human).records
    results = {name: best_of_n(records, values, n=5, scorer=name) for name, values in scores.items()}
    write_json(output / "best-of-5.json", {name: result.to_dict() for name, result in results.items()})
    last = next(iter(results.values())).curve[-1]
    table = Table(title=f"step {step} · best-of-5 on the held-out human subset ({last['prompts']} prompts)")
    for col in ("pick by", "mean quality", "top-tier share"):
        table.add_column(col, justify="left" if col == "pick by" else "right")
    table.add_row("oracle (the best of the 5)", f"{last['quality']['oracle']:.3f}", f"{last['top_tier']['oracle']:.3f}")
    for name, result in results.items():
        point = result.curve[-1]
        table.add_row(name, f"{point['quality']['pick']:.3f}", f"{point['top_tier']['pick']:.3f}")
    table.add_row("random pick (expected)", f"{last['quality']['random']:.3f}", f"{last['top_tier']['random']:.3f}")
    console.print(table)
    console.print(
        "gold: the ranks resolved from the annotators' comparisons in step 1 (the hidden quality order is not "
        "shipped); quality = share of the other responses the pick beats, top tier = the pick is ranked first"
    )
    return results


def train_on_open(bench_files: list[Path], output: Path, console: Console) -> str:
    """Train m3e-small on the ``open`` subset (``human`` stays held out); return the model folder."""
    from cheems.train.config import load_config
    from cheems.train.trainer import train_reward_model

    console.rule("step 4 · train a reward model on the open subset (human is held out)")
    folder = output / "rm"
    # the demo's own folder: a rerun replaces the model it trained before
    settings = {"data": [str(bench_files[0])], "output": str(folder), "max_length": 256, "epochs": 2, "overwrite": True}
    config = load_config(None, settings)
    train_reward_model(config, console=console)
    return str(folder)


def run_demo(output: Path, model: str, console: Console, train: bool = True) -> dict[str, float]:
    """Resolve the sample, score it with the length baseline and a small Chinese model, evaluate both;
    then train m3e-small on the open subset and evaluate it too; last, best-of-5 on the human subset
    with each scorer (the gold quality of its picks)."""
    console.rule("cheems demo: a CheemsBench-style evaluation on the shipped sample")
    console.print(
        "sample: Chinese prompts across 8 categories with simulated annotator comparisons (illustrative, "
        "not human-annotated)"
    )
    bench_files = resolve_sample(output, console)
    results, scores = {}, {}
    for step, name in enumerate(("length", model), start=2):
        try:
            report, scores[name] = score_and_evaluate(name, bench_files, output, console, step)
        except InputError as e:  # 'length' cannot fail: an error without a place of its own is --model's
            raise e.located("--model") from None
        results[name] = report.overall
    if train:
        folder = train_on_open(bench_files, output, console)
        report, scores[TRAINED] = score_and_evaluate(folder, bench_files, output, console, 5)
        results[TRAINED] = report.overall
    picks = best_of_five(bench_files[1], scores, output, console, 6 if train else 4)
    summary = Table(title="summary")
    summary.add_column("scorer")
    summary.add_column("overall", justify="right")
    summary.add_column("best-of-5", justify="right")
    for name, value in results.items():
        summary.add_row(name, f"{value:.3f}", f"{picks[name].curve[-1]['quality']['pick']:.3f}")
    console.print(summary)
    console.print("overall: mean over subsets of (accuracy + exact match) / 2; best-of-5: mean quality of the picks")
    console.print(f"files written to {output}/ (ranked bench, scores, metrics and best-of-5 JSON)")
    return results
