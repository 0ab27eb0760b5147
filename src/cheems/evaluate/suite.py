"""A benchmark suite: the benches a reward model is reported on, each with its own metric, evaluated by one scorer.

``cheems suite CONFIG.yaml --model M`` (or ``--scores`` / ``--judge-model``) prints and writes what
:func:`suite_files` returns. The config (:class:`SuiteConfig`, read by :func:`load_suite`) lists the benches;
each is evaluated as ``cheems eval --bench FILES --metric METRIC`` evaluates it (:func:`evaluate_files`), so
its report, intervals included, is the one that command writes. The reward model is loaded once and its score
cache shared by every bench. The suite's score is the mean of the benches' headline numbers (each report's
``overall``); its interval comes from the same resamples (:func:`suite_interval`). The JSON
(:meth:`SuiteResult.to_dict`, docs/suite.md) is one row of ``cheems leaderboard``: a column per bench.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import Field

from cheems.data.io import ScoreKey
from cheems.errors import InputError
from cheems.evaluate.evaluation import BenchEvaluation, ScoredBy, evaluate_files
from cheems.evaluate.run_settings import EvalSettings, check_metric
from cheems.settings import Text, TextList, rule
from cheems.yamlfile import KeyPath, line_of, load_yaml_model

if TYPE_CHECKING:
    from rich.console import Console

BENCH_SUFFIX = ".jsonl"  # the files a bench folder holds: canonical records, one subset each
NAME_SEP = "="  # --scores NAME=FILE; a bench's name never holds it


class SuiteBench(EvalSettings):
    """One bench of a suite: its name, its files, and how ``cheems eval`` measures it (any of its settings:
    ``metric``, ``resamples``, ``bootstrap_seed``, ...; one left out is the suite's, else eval's default)."""

    name: Annotated[Text, rule(str.strip, "is empty", "name the bench")] = Field(
        description="The bench's name: its column in the suite's table and leaderboard."
    )
    bench: Annotated[TextList, Field(min_length=1)] = Field(
        description="A bench file, a folder of *.jsonl bench files, or a list of them (relative to the config's "
        "folder); each file is a subset, named by its stem."
    )


class SuiteConfig(EvalSettings):
    """A suite's CONFIG.yaml: the benches, and ``cheems eval`` settings that apply to every bench that leaves them
    out (``metric``, ``resamples``, ``bootstrap_seed``, ...)."""

    benches: Annotated[list[SuiteBench], Field(min_length=1)] = Field(description="The benches, in table order.")


@dataclass(frozen=True)
class SuiteEntry:
    """A bench of a loaded suite: its name, its files (resolved) and its settings (the suite's filled in)."""

    name: str
    files: list[Path]
    settings: EvalSettings
    metric_at: tuple[int | None, str] = (None, "metric")  # the config's line and key that set its metric


@dataclass(frozen=True)
class Suite:
    """A checked suite config: its benches in order, and the file it was read from."""

    source: str
    benches: list[SuiteEntry]

    def files(self) -> list[Path]:
        """Every bench file of the suite, in order."""
        return [f for entry in self.benches for f in entry.files]


def load_suite(path: str | Path) -> Suite:
    """Read and check a suite config: unknown keys, bad values, an unknown metric, a bench named twice, a missing
    bench file or an empty bench folder are each an ``InputError`` naming the config's file and line."""
    config, lines = load_yaml_model(path, SuiteConfig, what="suite config")
    source = str(path)
    base = Path(path).resolve().parent
    shared = config.model_dump(include=config.model_fields_set & set(EvalSettings.model_fields))
    if "metric" in shared:  # checked even where every bench names its own: a misspelling is never silent
        _check_metric(config.metric, source, lines, ("metric",))
    seen: dict[str, int] = {}
    entries = []
    for i, bench in enumerate(config.benches):
        at: KeyPath = ("benches", i)
        if bench.name in seen:
            raise InputError(
                f"bench '{bench.name}' is named twice (also bench {seen[bench.name] + 1})",
                path=source,
                line=line_of(lines, (*at, "name")),
                field=f"benches.{i}.name",
                hint="give every bench its own name",
            )
        if NAME_SEP in bench.name:  # --scores NAME=FILE ends a bench's name at its first "=": one reading only
            raise InputError(
                f"bench name '{bench.name}' holds '{NAME_SEP}'",
                path=source,
                line=line_of(lines, (*at, "name")),
                field=f"benches.{i}.name",
                hint=f"name it without '{NAME_SEP}' (--scores NAME=FILE splits at the first '{NAME_SEP}')",
            )
        seen[bench.name] = i
        own = bench.model_dump(include=bench.model_fields_set & set(EvalSettings.model_fields))
        settings = EvalSettings(**(shared | own))
        metric_at: KeyPath = (*at, "metric") if "metric" in own else ("metric",)
        _check_metric(settings.metric, source, lines, metric_at)
        files = [
            f
            for j, given in enumerate(bench.bench)
            for f in _bench_files(base, given, source, lines, (*at, "bench", j))
        ]
        where = (line_of(lines, metric_at), ".".join(map(str, metric_at)))
        entries.append(SuiteEntry(bench.name, files, settings, where))
    return Suite(source, entries)


def _check_metric(metric: str, source: str, lines: dict[KeyPath, int], at: KeyPath) -> None:
    from cheems.metrics.metric_registry import METRICS

    if metric not in METRICS:
        raise InputError(
            f"unknown metric {metric!r}",
            path=source,
            line=line_of(lines, at),
            field=".".join(map(str, at)),
            hint=METRICS.hint(),
        )


def _bench_files(base: Path, given: str, source: str, lines: dict[KeyPath, int], at: KeyPath) -> list[Path]:
    """The files one ``bench`` entry names: the file, or a folder's ``*.jsonl`` files in name order."""
    p = Path(given).expanduser()
    p = p if p.is_absolute() else base / p
    files = sorted(f for f in p.iterdir() if f.suffix == BENCH_SUFFIX and f.is_file()) if p.is_dir() else [p]
    if files and files[0].is_file():
        return files
    wrong = f"bench folder {p} holds no {BENCH_SUFFIX} file" if p.is_dir() else f"no such bench file: {p}"
    hint = "name the bench files" if p.is_dir() else "paths are relative to the config's folder"
    raise InputError(wrong, path=source, line=line_of(lines, at), field=".".join(map(str, at[:-1])), hint=hint)


@dataclass
class SuiteBenchRun:
    """One bench's evaluation in a suite: its entry and :func:`evaluate_files`' result."""

    entry: SuiteEntry
    evaluation: BenchEvaluation

    @cached_property
    def report(self) -> dict[str, Any]:
        """The bench's eval JSON, as ``cheems eval --output-json`` writes it (made once: a table and the JSON
        both read it)."""
        return self.evaluation.to_dict()

    def summary(self) -> dict[str, Any]:
        """The bench's headline: its metric, ``score`` (the report's ``overall``), ``score_ci`` when drawn, and
        the prompts and pairs it was measured on."""
        report = self.report
        subsets = report["subsets"].values()
        out: dict[str, Any] = {"metric": self.entry.settings.metric, "score": report["overall"]}
        if "overall_ci" in report:
            out["score_ci"] = report["overall_ci"]
        out |= {"n_prompts": sum(s["n_prompts"] for s in subsets), "n_pairs": sum(s["n_pairs"] for s in subsets)}
        return out


@dataclass
class SuiteResult:
    """A suite's evaluation by one scorer: each bench's run, the mean of their scores and its interval."""

    source: str
    scorer: str
    runs: list[SuiteBenchRun]
    overall_ci: tuple[float, float] | None = None
    bootstrap: dict[str, Any] | None = None
    unmatched_scores: list[ScoreKey] = field(default_factory=list)  # scores of no response of any bench

    @property
    def overall(self) -> float:
        """The mean over benches of their headline scores."""
        return cast("float", sum(run.report["overall"] for run in self.runs) / len(self.runs))

    def to_dict(self) -> dict[str, Any]:
        """The suite JSON (docs/suite.md): ``benches`` (each bench's headline), ``overall`` (their mean) with
        ``overall_ci``, and ``reports`` (each bench's eval JSON)."""
        out: dict[str, Any] = {"metric": "suite", "suite": self.source, "scorer": self.scorer}
        out["benches"] = {run.entry.name: run.summary() for run in self.runs}
        out["overall"] = self.overall
        if self.overall_ci is not None:
            out |= {"overall_ci": list(self.overall_ci), "bootstrap": self.bootstrap}
        out["reports"] = {run.entry.name: run.report for run in self.runs}
        return out

    def write(self, output_json: str | Path) -> None:
        """Write :meth:`to_dict` as ``--output-json`` does: never onto the suite config or a bench file."""
        from cheems.data.io import write_json
        from cheems.outputs import claim_outputs

        benches = [("bench", f) for run in self.runs for f in run.entry.files]
        claim_outputs(inputs=[("CONFIG", self.source), *benches], files=[("--output-json", output_json)])
        write_json(output_json, self.to_dict())


def suite_interval(runs: list[SuiteBenchRun]) -> tuple[tuple[float, float], dict[str, Any]] | None:
    """The interval of the suite's mean score: the mean over benches of each bench's ``overall`` in resample r,
    for every r (each bench's prompts are resampled on their own). None unless every bench drew intervals with
    the same resamples, seed and level."""
    import numpy as np

    from cheems.metrics.bootstrap import percentile_interval

    drawn = [(run.evaluation.other or run.evaluation.report).intervals for run in runs]
    draws = [b.draws for b in drawn if b is not None and b.draws is not None]
    settings = [b.settings() for b in drawn if b is not None]
    if len(draws) != len(runs) or any(s != settings[0] for s in settings):
        return None
    return percentile_interval(np.mean(draws, axis=0), settings[0]["level"]), settings[0]


def suite_files(
    suite: Suite | str | Path,
    by: ScoredBy | Mapping[str, Path],
    *,
    workers: int | None = None,
    progress: bool = True,
) -> SuiteResult:
    """Evaluate every bench of a suite (a :class:`Suite` or its config file, :func:`load_suite`) by one scorer.

    ``by``: a :class:`ScoredBy` (a reward model, loaded once, its score cache shared by the benches; an LLM
    judge; or one scores file holding every bench's scores), or ``{bench name: scores file}``, one per bench.
    Each bench is :func:`evaluate_files` with its settings. ``result.to_dict()`` is what
    ``cheems suite --output-json`` writes.
    """
    if not isinstance(suite, Suite):
        suite = load_suite(suite)
    scored = _scored_by_bench(suite, by)
    _check_metrics_can_read(suite, scored)
    if isinstance(by, ScoredBy) and by.scores is not None and len(suite.benches) > 1:
        _refuse_shared_ids(suite, by.scores)
    runs = []
    for entry in suite.benches:
        try:
            run = evaluate_files(entry.files, scored[entry.name], entry.settings, workers=workers, progress=progress)
        except InputError as e:  # which bench: its files' own errors name a file, an option's name the option
            raise InputError(
                f"bench '{entry.name}': {e.message}", path=e.path, line=e.line, field=e.field, hint=e.hint
            ) from None
        runs.append(SuiteBenchRun(entry, run))
    source = by.source if isinstance(by, ScoredBy) else ", ".join(str(p) for p in by.values())
    result = SuiteResult(suite.source, source, runs, unmatched_scores=_unmatched(runs, isinstance(by, ScoredBy)))
    interval = suite_interval(runs)
    if interval is not None:
        result.overall_ci, result.bootstrap = interval
    return result


def suite_and_scores(config: Path, scores: list[str]) -> tuple[Suite, dict[str, Path], Path | None]:
    """The suite of ``config`` and what ``--scores`` gives it (:func:`suite_scores`): ``{bench name: file}``, and
    the file that counts as the one ``--scores`` beside ``--model`` or ``--judge-model`` (any of the per-bench
    files), or None."""
    suite = load_suite(config)
    given = suite_scores(suite, scores)  # which --scores value is NAME=FILE: the suite's bench names say
    named = given if isinstance(given, dict) else {}
    counted = given if isinstance(given, Path) else next(iter(named.values()), None)
    return suite, named, counted


def suite_run(
    config: Path,
    suite: Suite,
    by: ScoredBy,
    named: Mapping[str, Path],
    *,
    output_json: Path | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> SuiteResult:
    """What ``cheems suite`` runs: ``output_json`` checked first (it may replace neither the config, a bench nor a
    scores file), then :func:`suite_files` by ``named`` (``{bench name: scores file}``) when given, else ``by``."""
    from cheems.outputs import claim_outputs

    inputs = [("CONFIG.yaml", config), *by.inputs(suite.files()), *((f"--scores {n}", f) for n, f in named.items())]
    claim_outputs(inputs=inputs, files=[("--output-json", output_json)])
    return suite_files(suite, named or by, workers=workers, progress=progress)


def print_suite(result: SuiteResult, console: Console) -> None:
    """The suite's table, and how its intervals were drawn."""
    console.print(suite_table(result))
    if result.bootstrap is not None:
        from cheems.evaluate.report_html import interval_note

        note = f"{interval_note(result.bootstrap)}; the mean's: the benches' resamples averaged"
        console.print(f"note: {note}", soft_wrap=True, markup=False)


def suite_scores(suite: Suite, values: list[str]) -> Path | dict[str, Path] | None:
    """What ``--scores`` gives a suite: one scores file for every bench, ``{bench name: file}``, or None (none).

    The rule: a value is ``NAME=FILE`` when the text before its first ``=`` is the name of one of the suite's
    benches (bench names hold no ``=``, :func:`load_suite`); any other value is a scores file's path, so
    ``run=1.jsonl`` is a file unless a bench is named ``run``. A value that is both (bench ``run`` and a file
    ``run=1.jsonl``) is refused, as is a value with ``=`` that is neither; each error says how to write it.
    """
    names = [entry.name for entry in suite.benches]
    files: list[Path] = []
    named: dict[str, Path] = {}
    for value in values:
        name, sep, file = value.partition(NAME_SEP)
        if sep and name in names:
            if Path(value).expanduser().is_file():
                raise InputError(
                    f"'{value}' is bench '{name}' with scores {file}, and also a file",
                    path="--scores",
                    hint=f"for the file, give it as ./{value} (or its full path); for the bench, rename the file",
                )
            if name in named:
                raise InputError(f"bench '{name}' is given twice", path="--scores", hint="give one file per bench")
            named[name] = Path(file)
        elif sep and not Path(value).expanduser().exists():
            raise InputError(
                f"no bench named '{name}' in {suite.source}, and no scores file '{value}'",
                path="--scores",
                hint=f"NAME=FILE takes a bench's name (benches: {', '.join(names)}); any other value is a file path",
            )
        else:
            files.append(Path(value))
    if len(files) > 1 or (files and named):
        raise InputError(
            "give one --scores FILE for every bench, or --scores NAME=FILE once per bench",
            path="--scores",
            hint=f"e.g. --scores {names[0]}=s1.jsonl" + (f" --scores {names[1]}=s2.jsonl" if len(names) > 1 else ""),
        )
    return files[0] if files else named or None


def _check_metrics_can_read(suite: Suite, scored: Mapping[str, ScoredBy]) -> None:
    """Every bench's metric can read what scores it (eval's rule, :func:`check_metric`), checked for all the
    benches before the first is evaluated: a judge is never asked for a bench whose metric then refuses it."""
    for entry in suite.benches:
        try:
            check_metric(entry.settings.metric, None, judge=scored[entry.name].judge is not None)
        except InputError as e:
            line, key = entry.metric_at
            raise InputError(
                f"bench '{entry.name}': {e.message}", path=suite.source, line=line, field=key, hint=e.hint
            ) from None


def _unmatched(runs: list[SuiteBenchRun], shared: bool) -> list[ScoreKey]:
    """The scores no bench used: of one file for all the benches, those every bench left; of a file per bench,
    each bench's."""
    lists = [run.evaluation.report.unmatched_scores for run in runs]
    if not shared:
        return [key for keys in lists for key in keys]
    used_somewhere = set().union(*(set(lists[0]) - set(keys) for keys in lists[1:]))
    return [key for key in lists[0] if key not in used_somewhere]


def _scored_by_bench(suite: Suite, by: ScoredBy | Mapping[str, Path]) -> dict[str, ScoredBy]:
    """What scores each bench: the one ``by``, or each bench's own scores file (every bench needs one)."""
    names = [entry.name for entry in suite.benches]
    if isinstance(by, ScoredBy):
        return dict.fromkeys(names, by)
    unknown = [name for name in by if name not in names]
    if unknown:
        raise InputError(
            f"no bench named '{unknown[0]}' in {suite.source}", path="--scores", hint=f"benches: {', '.join(names)}"
        )
    missing = [name for name in names if name not in by]
    if missing:
        raise InputError(
            f"bench '{missing[0]}' has no scores file",
            path="--scores",
            hint="give --scores NAME=FILE for every bench, or one --scores FILE for all of them",
        )
    return {name: ScoredBy(scores=Path(by[name])) for name in names}


def _refuse_shared_ids(suite: Suite, scores: Path) -> None:
    """One scores file for several benches is keyed by prompt id: a prompt id in two benches would take one
    score for two different responses."""
    from cheems.evaluate.bench import stream_bench

    owner: dict[str, str] = {}
    for entry in suite.benches:
        ids = {i for _, records in stream_bench(entry.files) for i in records.map(attrgetter("id"))}
        for prompt_id in ids:
            if owner.setdefault(prompt_id, entry.name) != entry.name:
                raise InputError(
                    f"prompt id '{prompt_id}' is in bench '{owner[prompt_id]}' and bench '{entry.name}': one scores "
                    "file cannot tell their scores apart",
                    path="--scores",
                    hint="give each bench its own scores file: --scores NAME=FILE, once per bench",
                )


def suite_table(result: SuiteResult, title: str = "") -> Any:
    """The suite as a rich table: bench | metric | score [low, high] | prompts, then the mean."""
    from rich.table import Table
    from rich.text import Text

    from cheems.evaluate.report_html import with_ci

    data = result.to_dict()
    table = Table(title=title or f"suite {result.source}: {result.scorer}", caption="mean = mean over benches")
    for col in ("bench", "metric", "score", "prompts"):
        table.add_column(col, justify="left" if col in ("bench", "metric") else "right", overflow="fold")
    for name, bench in data["benches"].items():
        table.add_row(name, bench["metric"], with_ci(bench, "score", compact=True), str(bench["n_prompts"]))
    prompts = sum(b["n_prompts"] for b in data["benches"].values())
    table.add_row(
        Text("mean", style="bold"), "", Text(with_ci(data, "overall", compact=True), style="bold"), str(prompts)
    )
    return table
