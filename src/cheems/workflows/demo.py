"""The demo: the main job end to end, offline, on the small sample the package ships."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cheems.data.io import read_records, write_json, write_records, write_scores
from cheems.evaluate import EvalReport, evaluate, load_bench, score_bench
from cheems.evaluate.report import print_report
from cheems.models import ScoreCache, load_scorer
from cheems.ranking import resolve_file_records

SUBSETS = ("open", "human")


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


def score_and_evaluate(model: str, bench_files: list[Path], output: Path, console: Console, step: int) -> EvalReport:
    """Score the bench with one model, write its scores and metrics, print the table."""
    bench = load_bench(bench_files)
    scores = score_bench(bench, load_scorer(model), ScoreCache(output / "scores.sqlite"))
    slug = Path(model).name if Path(model).is_dir() else model.replace(":", "-").replace("/", "_")
    write_scores(output / f"scores.{slug}.jsonl", scores)
    report = evaluate(bench, scores, model)
    write_json(output / f"metrics.{slug}.json", report.to_dict())
    print_report(report, title=f"step {step} · evaluate: {model}", console=console)
    return report


def train_on_open(bench_files: list[Path], output: Path, console: Console) -> str:
    """Train m3e-small on the ``open`` subset (``human`` stays held out); return the model folder."""
    from cheems.train.config import load_config
    from cheems.train.trainer import train_reward_model

    console.rule("step 4 · train a reward model on the open subset (human is held out)")
    folder = output / "rm"
    config = load_config(None, {"data": [str(bench_files[0])], "output": str(folder), "max_length": 256, "epochs": 2})
    train_reward_model(config, console=console)
    return str(folder)


def run_demo(output: Path, model: str, console: Console, train: bool = True) -> dict[str, float]:
    """Resolve the sample, score it with the length baseline and a small Chinese model, evaluate both;
    then train m3e-small on the open subset and evaluate it too."""
    console.rule("cheems demo: a CheemsBench-style evaluation on the shipped sample")
    console.print(
        "sample: Chinese prompts across 8 categories with simulated annotator comparisons (illustrative, "
        "not human-annotated)"
    )
    bench_files = resolve_sample(output, console)
    results = {}
    for step, name in enumerate(("length", model), start=2):
        results[name] = score_and_evaluate(name, bench_files, output, console, step).overall
    if train:
        folder = train_on_open(bench_files, output, console)
        results["m3e-small trained on open"] = score_and_evaluate(folder, bench_files, output, console, 5).overall
    summary = Table(title="summary: overall = mean over subsets of (accuracy + exact match) / 2")
    summary.add_column("scorer")
    summary.add_column("overall", justify="right")
    for name, value in results.items():
        summary.add_row(name, f"{value:.3f}")
    console.print(summary)
    console.print(f"files written to {output}/ (ranked bench, scores, metrics JSON)")
    return results
