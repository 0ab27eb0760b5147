"""``cheems curate run RECIPE.yaml``: filter -> judge -> distant supervision -> debias -> merge.

A recipe names the inputs and the stages to run; a stage left out (or set to null) is skipped::

    output_dir: curated/
    human: human.jsonl              # the gold subset (optional: without it, final = the judge subset)
    judge_input: pool.jsonl         # prompts + responses to judge, or records already judged
    filter: {max_length_ratio: 3.0} # FilterConfig keys; {} = the defaults
    judge: {judge_model: gpt-4o}    # settings for the LLM judge; leave out when judge_input is judged
    distant: {scores: s.jsonl, margin: 0.0}   # or {model: path/to/rm} to score with an RM
    debias: {seed: 0}

Relative paths are resolved against the recipe's folder. Every stage writes its records into
``output_dir`` (``01-filtered.jsonl``, ``02-judged.jsonl``, ``03-distant.jsonl``,
``04-debiased.jsonl``, ``final.jsonl``) and ``summary.json`` / ``summary.md`` hold, per stage,
the Table-1 statistics, the conflict ratio (Table 5) and the stage's report.

Each stage streams the file the stage before wrote through the step the single command runs
(``filter_step``, ``distant_step``, ``debias_step``, ``merge_step`` over
:class:`~cheems.data.stream.Records`), so a run holds a few chunks of the pool, not the pool; only the
LLM judge, an RM scorer and the human subset get their records as a list.

The ``judge:`` section is a :class:`~cheems.judge.judge_settings.JudgeSettings`, checked (file, line
and key) with the rest of the recipe. The judge and the RM scorer themselves are injected
(``run_recipe(..., judge=, score=)``), so this package does not import the judge's backends or the
model or training packages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import model_validator

from cheems.curate.debias import DebiasReport, DebiasSettings, debias_step
from cheems.curate.distant import DistantSettings, distant_step, source_counts
from cheems.curate.filters import FilterConfig, FilterReport, filter_step
from cheems.curate.subsets import MergeReport, merge_step
from cheems.data.dataset_stats import Counts
from cheems.data.io import ScoreKey, record_line, write_json, write_lines, write_scores, write_text
from cheems.data.schema import Record
from cheems.data.stream import Records, same_record
from cheems.errors import InputError
from cheems.judge.judge_settings import JudgeSettings
from cheems.outputs import claim_outputs
from cheems.ranking.resolve import ResolveStats, record_stats
from cheems.settings import Settings, invalid
from cheems.yamlfile import KeyPath, line_of, load_yaml_model

JudgeFn = Callable[[list[Record], JudgeSettings], list[Record]]
ScoreFn = Callable[[list[Record], str], dict[ScoreKey, float]]

FILES = {
    "filter": "01-filtered.jsonl",
    "judge": "02-judged.jsonl",
    "distant": "03-distant.jsonl",
    "debias": "04-debiased.jsonl",
    "final": "final.jsonl",
}
SUMMARY_FILES = ("summary.json", "summary.md")
SCORES_FILE = "scores.jsonl"  # the RM's scores, when distant supervision scores with a model


class DistantStage(DistantSettings):
    """Distant supervision settings: exactly one of ``scores`` (a scores file) or ``model`` (an RM)."""

    scores: Path | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _one_scorer(self) -> "DistantStage":
        if (self.scores is None) == (self.model is None):
            raise ValueError("give exactly one of 'scores' (a scores file) or 'model' (a reward model)")
        return self


class DebiasStage(DebiasSettings):
    """Length debias settings."""

    unit: Literal["chars", "tokens"] = "chars"

    @model_validator(mode="after")
    def _tokens_need_a_tokenizer(self) -> "DebiasStage":
        if self.unit == "tokens" and self.tokenizer is None:  # checked here: the error names the recipe's line
            raise invalid(
                "length in tokens needs a tokenizer", at="unit", hint="add 'tokenizer: PATH' (a folder or hub id)"
            )
        return self


class Recipe(Settings):
    """The RECIPE.yaml of ``cheems curate run``."""

    output_dir: Path
    judge_input: Path
    human: Path | None = None
    filter: FilterConfig | None = None
    judge: JudgeSettings | None = None
    distant: DistantStage | None = None
    debias: DebiasStage | None = None


def _resolve(base: Path, value: str | Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _maybe_local(base: Path, value: str) -> str:
    """A model/tokenizer spec: a path relative to the recipe when one exists there, else unchanged (hub "
    "id, 'length')."""
    candidate = _resolve(base, value)
    return str(candidate) if candidate.exists() else value


def _require_file(path: Path, recipe_path: str, lines: dict[KeyPath, int], key: KeyPath) -> None:
    if not path.is_file():
        raise InputError(
            f"no such file: {path}",
            path=recipe_path,
            line=line_of(lines, key),
            field=".".join(map(str, key)),
            hint="paths are relative to the recipe's folder",
        )


JUDGE_PATH_KEYS = ("criteria", "cache")  # judge settings that name files: relative to the recipe too


def load_recipe(path: str | Path) -> Recipe:
    """Read and check a recipe: unknown keys, bad values (the judge's settings too) and missing
    input files name file and line, before any stage runs."""
    recipe, lines = load_yaml_model(path, Recipe, what="recipe")
    base = Path(path).resolve().parent
    where = str(path)
    recipe.output_dir = _resolve(base, recipe.output_dir)
    recipe.judge_input = _resolve(base, recipe.judge_input)
    _require_file(recipe.judge_input, where, lines, ("judge_input",))
    if recipe.human is not None:
        recipe.human = _resolve(base, recipe.human)
        _require_file(recipe.human, where, lines, ("human",))
    if recipe.distant is not None:
        if recipe.distant.scores is not None:
            recipe.distant.scores = _resolve(base, recipe.distant.scores)
            _require_file(recipe.distant.scores, where, lines, ("distant", "scores"))
        if recipe.distant.model is not None:
            recipe.distant.model = _maybe_local(base, recipe.distant.model)
    if recipe.debias is not None and recipe.debias.tokenizer is not None:
        recipe.debias.tokenizer = _maybe_local(base, recipe.debias.tokenizer)
    if recipe.judge is not None:
        for key in JUDGE_PATH_KEYS:
            value = getattr(recipe.judge, key)
            if value is not None:
                setattr(recipe.judge, key, str(_resolve(base, value)))
    try:
        claim_outputs(
            inputs=_inputs(recipe, path),
            folders=[("output_dir", recipe.output_dir, output_files(recipe))],
            note="finished judgements are in the judge cache; rerun the recipe to resume" if recipe.judge else None,
        )
    except InputError as e:  # point at the recipe's output_dir line
        raise InputError(
            f"{e.path} {e.message}",
            path=where,
            line=line_of(lines, ("output_dir",)),
            field="output_dir",
            hint="choose another output_dir",
        ) from None
    return recipe


def output_files(recipe: Recipe) -> list[str]:
    """The files a run of ``recipe`` writes into its ``output_dir``."""
    stages = [FILES[s] for s in ("filter", "judge", "distant", "debias") if getattr(recipe, s) is not None]
    scores = [SCORES_FILE] if recipe.distant is not None and recipe.distant.model is not None else []
    return [*stages, *scores, FILES["final"], *SUMMARY_FILES]


def _inputs(recipe: Recipe, path: str | Path) -> list[tuple[str, Path | str | None]]:
    """The files a run of ``recipe`` reads (the judge's cache too: a stage file must never replace it)."""
    return [
        ("the recipe", path),
        ("judge_input", recipe.judge_input),
        ("human", recipe.human),
        ("distant.scores", recipe.distant.scores if recipe.distant else None),
        *((f"judge.{key}", getattr(recipe.judge, key, None)) for key in JUDGE_PATH_KEYS),
    ]


@dataclass
class StageSummary:
    """One stage's output: its file, Table-1 statistics, conflict ratio and report."""

    name: str
    file: str | None
    stats: dict[str, Any]
    conflicts: dict[str, Any]
    report: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.file,
            "stats": self.stats,
            "conflicts": self.conflicts,
            "report": self.report,
        }


@dataclass
class RecipeSummary:
    """Every stage of one recipe run, in order."""

    output_dir: str
    stages: list[StageSummary] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def stage(self, name: str) -> StageSummary:
        """The stage called ``name``."""
        return next(s for s in self.stages if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"output_dir": self.output_dir, "stages": [s.to_dict() for s in self.stages], "skipped": self.skipped}

    def to_markdown(self) -> str:
        """Tables 1 and 5 in one table, then each stage's report."""
        lines = [
            "# Curation summary",
            "",
            "| stage | file | prompts | responses | resp./prompt | comparisons (no ties) | prompt chars | "
            "chosen chars | rejected chars | conflict ratio |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for s in self.stages:
            st = s.stats
            lines.append(
                f"| {s.name} | {s.file or ''} | {st['prompts']} | {st['responses']} | "
                f"{st['responses_per_prompt']:.2f} | "
                f"{st['comparisons']} | {st['avg_prompt_chars']:.1f} | {st['avg_chosen_chars']:.1f} | "
                f"{st['avg_rejected_chars']:.1f} | {s.conflicts['conflict_ratio']:.3f} |"
            )
        if self.skipped:
            lines += ["", f"Skipped stages: {', '.join(self.skipped)}."]
        for s in self.stages:
            if s.report:
                lines += ["", f"## {s.name}", "", "```json", json.dumps(s.report, indent=2, ensure_ascii=False), "```"]
        return "\n".join(lines) + "\n"


def _stage(name: str, records: Records, file: str | None, report: dict[str, Any] | None = None) -> StageSummary:
    """A stage's summary, its statistics summed record by record (files are streamed)."""
    counts, conflicts = Counts(), ResolveStats()
    for mine, theirs in records.map(record_stats):
        counts += mine
        conflicts += theirs
    return StageSummary(name, file, counts.stats().to_dict(), conflicts.to_dict(), report)


def _line(out: Record | str) -> str:
    return out if isinstance(out, str) else record_line(out)


def run_recipe(
    recipe: Recipe,
    *,
    judge: JudgeFn | None = None,
    score: ScoreFn | None = None,
    skip_invalid: bool = False,
    log: Callable[[str], None] | None = None,
    workers: int | None = None,
) -> RecipeSummary:
    """Run the recipe's stages in order, writing every intermediate file and the summary.

    Each stage streams the previous stage's file through its step (:class:`~cheems.data.stream.Records`
    on ``workers`` processes, ``None``: every core), so memory stays bounded by a few chunks, except
    where a stage needs every record at once: the judge and an RM scorer, which get a list.
    ``judge(records, settings)`` runs the LLM judge (needed when the recipe has ``judge:``);
    ``score(records, model)`` scores every response with an RM (needed for ``distant: {model: …}``).
    With ``skip_invalid``, bad input lines are skipped and listed in the summary.
    """
    say = log or (lambda _msg: None)
    out = recipe.output_dir  # created by the first write: a run that fails before it leaves no folder
    summary = RecipeSummary(output_dir=str(out))

    def files(path: Path, label: str, skip: bool = False) -> Records:
        return Records([path], skip_invalid=skip, workers=workers, label=f"curate run: {label}")

    def write(stage: str, outputs: Iterable[Record | str], report: Callable[[], dict[str, Any]]) -> Records:
        n = write_lines(out / FILES[stage], map(_line, outputs))
        say(f"{stage}: {n} records -> {out / FILES[stage]}")
        written = files(out / FILES[stage], stage) if n else Records([])  # an empty file is not a record file
        summary.stages.append(_stage(stage, written, FILES[stage], report()))
        return written

    records = _read(files(recipe.judge_input, "input", skip_invalid), summary, "input", say)
    if recipe.filter is not None:
        filtered = FilterReport()
        records = write("filter", filter_step(records, recipe.filter, filtered), filtered.to_dict)
    else:
        summary.skipped.append("filter")

    if recipe.judge is not None:
        if judge is None:
            raise InputError("the recipe has a 'judge' stage but no judge was given", field="judge")
        judged = judge(list(records.map(same_record)), recipe.judge)
        counts = dict(source_counts(judged))
        records = write("judge", judged, lambda: {"comparisons_by_source": counts})
        del judged
    else:
        summary.skipped.append("judge")
        if not summary.stages[-1].conflicts["comparisons"]:
            raise InputError(
                "judge_input has no comparisons and the recipe has no 'judge' stage",
                path=str(recipe.judge_input),
                hint="add 'judge:' to the recipe, or give records the judge has already compared",
            )

    if recipe.distant is not None:
        stage = recipe.distant
        kept, distant_report = distant_step(
            records,
            _distant_scores(stage, records, score, out),
            stage.margin,
            stage.filtered,
        )
        records = write("distant", kept, distant_report.to_dict)
    else:
        summary.skipped.append("distant")

    if recipe.debias is not None:
        debiased = DebiasReport(seed=recipe.debias.seed, unit=recipe.debias.unit)
        records = write("debias", debias_step(records, debiased, recipe.debias.tokenizer), debiased.to_dict)
    else:
        summary.skipped.append("debias")

    merged = MergeReport()
    human: list[Record] = []
    if recipe.human is not None:
        human = list(_read(files(recipe.human, "human", skip_invalid), summary, "human", say).map(same_record))
    final = merge_step(human, records, merged)
    if recipe.human is not None:
        write("final", final, merged.to_dict)
    else:
        write("final", final, lambda: {"note": "no human subset: final = the judge subset"})

    json_file, markdown_file = SUMMARY_FILES
    write_json(out / json_file, summary.to_dict())
    write_text(out / markdown_file, summary.to_markdown())
    say(f"summary -> {out / json_file}, {out / markdown_file}")
    return summary


def _read(records: Records, summary: RecipeSummary, name: str, say: Callable[[str], None]) -> Records:
    """An input file, summarised as a stage (a first pass over it, which checks every line)."""
    stage = _stage(name, records, str(records.paths[0]))
    skipped = records.issues.skipped
    for e in skipped:  # nothing is dropped silently: each skipped line is logged and kept in the summary
        say(f"skipped {e}")
    stage.report = {"skipped_lines": [str(e) for e in skipped]} if skipped else None
    summary.stages.append(stage)
    return records


def _distant_scores(stage: DistantStage, records: Records, score: ScoreFn | None, out: Path) -> Path:
    """The RM's scores file: the recipe's, or the model's scores of every record, saved as scores.jsonl."""
    if stage.scores is not None:
        return stage.scores
    if score is None:
        raise InputError("'distant.model' needs a scorer to be given", field="distant.model")
    assert stage.model is not None  # the model validator promises one of the two
    write_scores(out / SCORES_FILE, score(list(records.map(same_record)), stage.model))
    return out / SCORES_FILE
