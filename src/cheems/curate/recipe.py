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

The ``judge:`` section is a :class:`~cheems.annotate.settings.JudgeSettings`, checked (file, line
and key) with the rest of the recipe. The judge and the RM scorer themselves are injected
(``run_recipe(..., judge=, score=)``), so this package does not import the judge's backends or the
model or training packages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from cheems.annotate.settings import JudgeSettings
from cheems.curate.debias import length_debias
from cheems.curate.distant import distant_supervision, source_counts
from cheems.curate.filters import FilterConfig, filter_records
from cheems.curate.merge import merge_subsets
from cheems.data.io import ScoreKey, read_records, read_scores, write_json, write_records, write_scores, write_text
from cheems.data.outputs import claim_outputs
from cheems.data.schema import Record
from cheems.data.settings import Settings, invalid
from cheems.data.stats import dataset_stats
from cheems.data.yamlfile import KeyPath, line_of, load_yaml_model
from cheems.errors import InputError
from cheems.ranking import conflict_stats

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


class DistantStage(Settings):
    """Distant supervision settings: exactly one of ``scores`` (a scores file) or ``model`` (an RM)."""

    scores: Path | None = None
    model: str | None = None
    margin: float = Field(0.0, ge=0)
    sources: list[str] = Field(default_factory=lambda: ["judge"])
    all_sources: bool = False

    @model_validator(mode="after")
    def _one_scorer(self) -> "DistantStage":
        if (self.scores is None) == (self.model is None):
            raise ValueError("give exactly one of 'scores' (a scores file) or 'model' (a reward model)")
        return self


class DebiasStage(Settings):
    """Length debias settings."""

    seed: int = 0
    unit: Literal["chars", "tokens"] = "chars"
    tokenizer: str | None = None

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


def _stage(name: str, records: list[Record], file: str | None, report: dict[str, Any] | None = None) -> StageSummary:
    return StageSummary(name, file, dataset_stats(records).to_dict(), conflict_stats(records).to_dict(), report)


def run_recipe(
    recipe: Recipe,
    *,
    judge: JudgeFn | None = None,
    score: ScoreFn | None = None,
    skip_invalid: bool = False,
    log: Callable[[str], None] | None = None,
) -> RecipeSummary:
    """Run the recipe's stages in order, writing every intermediate file and the summary.

    ``judge(records, settings)`` runs the LLM judge (needed when the recipe has ``judge:``);
    ``score(records, model)`` scores every response with an RM (needed for ``distant: {model: …}``).
    With ``skip_invalid``, bad input lines are skipped and listed in the summary.
    """
    say = log or (lambda _msg: None)
    out = recipe.output_dir  # created by the first write: a run that fails before it leaves no folder
    summary = RecipeSummary(output_dir=str(out))

    def write(stage: str, records: list[Record]) -> str:
        write_records(out / FILES[stage], records)
        say(f"{stage}: {len(records)} records -> {out / FILES[stage]}")
        return FILES[stage]

    pool = _read(recipe.judge_input, skip_invalid, summary, "input", say)
    records = pool
    if recipe.filter is not None:
        records, rep = filter_records(records, recipe.filter)
        summary.stages.append(_stage("filter", records, write("filter", records), rep.to_dict()))
    else:
        summary.skipped.append("filter")

    if recipe.judge is not None:
        if judge is None:
            raise InputError("the recipe has a 'judge' stage but no judge was given", field="judge")
        records = judge(records, recipe.judge)
        counts = dict(source_counts(records))
        summary.stages.append(_stage("judge", records, write("judge", records), {"comparisons_by_source": counts}))
    else:
        summary.skipped.append("judge")
        if not any(r.comparisons for r in records):
            raise InputError(
                "judge_input has no comparisons and the recipe has no 'judge' stage",
                path=str(recipe.judge_input),
                hint="add 'judge:' to the recipe, or give records the judge has already compared",
            )

    if recipe.distant is not None:
        scores, scores_path = _distant_scores(recipe.distant, records, score, out)
        records, distant_report = distant_supervision(
            records,
            scores,
            recipe.distant.margin,
            None if recipe.distant.all_sources else recipe.distant.sources,
            scores_path=scores_path,
        )
        summary.stages.append(_stage("distant", records, write("distant", records), distant_report.to_dict()))
    else:
        summary.skipped.append("distant")

    if recipe.debias is not None:
        records, debias_report = length_debias(records, recipe.debias.seed, recipe.debias.unit, recipe.debias.tokenizer)
        summary.stages.append(_stage("debias", records, write("debias", records), debias_report.to_dict()))
    else:
        summary.skipped.append("debias")

    if recipe.human is not None:
        human = _read(recipe.human, skip_invalid, summary, "human", say)
        records, merge_report = merge_subsets(human, records)
        summary.stages.append(_stage("final", records, write("final", records), merge_report.to_dict()))
    else:
        summary.stages.append(
            _stage("final", records, write("final", records), {"note": "no human subset: final = the judge subset"})
        )

    json_file, markdown_file = SUMMARY_FILES
    write_json(out / json_file, summary.to_dict())
    write_text(out / markdown_file, summary.to_markdown())
    say(f"summary -> {out / json_file}, {out / markdown_file}")
    return summary


def _read(
    path: Path, skip_invalid: bool, summary: RecipeSummary, name: str, say: Callable[[str], None]
) -> list[Record]:
    result = read_records(path, skip_invalid=skip_invalid)
    for e in result.skipped:  # nothing is dropped silently: each skipped line is logged and kept in the summary
        say(f"skipped {e}")
    report = {"skipped_lines": [str(e) for e in result.skipped]} if result.skipped else None
    summary.stages.append(_stage(name, result.records, str(path), report))
    return result.records


def _distant_scores(
    stage: DistantStage,
    records: list[Record],
    score: ScoreFn | None,
    out: Path,
) -> tuple[dict[ScoreKey, float], str]:
    """The RM's scores: read from the scores file, or computed with the model (and saved as scores.jsonl)."""
    if stage.scores is not None:
        return read_scores(stage.scores), str(stage.scores)
    if score is None:
        raise InputError("'distant.model' needs a scorer to be given", field="distant.model")
    assert stage.model is not None  # the model validator promises one of the two
    scores = score(records, stage.model)
    write_scores(out / SCORES_FILE, scores)
    return scores, str(out / SCORES_FILE)
