"""Win rate of best-of-N picks against a baseline response, judged by an LLM judge or by people.

Each pick (a scores-file row ``{prompt_id, response_id, score}``, one per prompt) becomes a :class:`Matchup`,
a two-response record ``pick`` vs ``baseline`` (:func:`matchup_record`). :func:`judge_winrate` asks an LLM
judge through :func:`cheems.judge.judge_records` (the client, cache and verdict parser of ``cheems judge``;
the annotation prompt, which allows C = no clear difference); :func:`annotation_records` and
:func:`human_winrate` make the matchups an annotation project and read its export back. How wins, losses,
ties and the win rate are counted, for a user: the README ("Win rate of best-of-N picks against a baseline").

Decisions a reader of the code needs:

- a baseline taken from ``reference`` leaves the record without a reference: the judge would otherwise be
  told that the baseline is the correct answer;
- a verdict that could not be parsed is a tie, never dropped, and counted; a question with no verdict for
  another reason (server down, request budget spent) stops the run with an error, as in
  :mod:`cheems.evaluate.judge_bench`: the verdicts are cached and a rerun asks only the missing ones;
- the interval is drawn from the outcome counts alone (:func:`cheems.metrics.bootstrap.win_rate_interval`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.data.io import load_rows, read_scores
from cheems.data.schema import Record, Response
from cheems.errors import InputError, Notify, unlisted
from cheems.evaluate.judge_bench import require_complete
from cheems.evaluate.run_settings import WinrateSettings
from cheems.judge import JudgeSettings, judge_records
from cheems.metrics.bootstrap import win_rate_interval

if TYPE_CHECKING:
    from rich.console import Console

    from cheems.annotate.store import PlanSummary

PICK, BASELINE = "pick", "baseline"
OUTCOMES = ("win", "loss", "tie")


@dataclass(frozen=True)
class Matchup:
    """One prompt's pick against its baseline: the two-response record and the pool id of the pick."""

    record: Record
    response_id: str


@dataclass
class PromptResult:
    """One prompt's outcome and the votes it came from (``pick``, ``baseline``, ``tie``; None: unparseable)."""

    prompt_id: str
    response_id: str
    outcome: str
    votes: list[str | None]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able row."""
        return {
            "prompt_id": self.prompt_id,
            "response_id": self.response_id,
            "outcome": self.outcome,
            "votes": self.votes,
        }


@dataclass
class WinRate:
    """Wins, losses and ties of the picks, the win rate and its bootstrap interval, and who judged."""

    prompts: list[PromptResult]
    interval: tuple[float, float] | None
    resamples: int
    seed: int
    level: float = 0.95
    judged_by: dict[str, Any] = field(default_factory=dict)

    @property
    def counts(self) -> Counter[str]:
        """Prompts per outcome."""
        return Counter(p.outcome for p in self.prompts)

    @property
    def win_rate(self) -> float | None:
        """(wins + ties / 2) / n; None without prompts."""
        c = self.counts
        return (c["win"] + c["tie"] / 2) / len(self.prompts) if self.prompts else None

    def to_dict(self) -> dict[str, Any]:
        """The ``--output-json`` document."""
        c = self.counts
        unparsed = [p for p in self.prompts if None in p.votes]
        return {
            "n": len(self.prompts),
            "wins": c["win"],
            "losses": c["loss"],
            "ties": c["tie"],
            "win_rate": self.win_rate,
            "interval": None
            if self.interval is None
            else {
                "low": self.interval[0],
                "high": self.interval[1],
                "level": self.level,
                "method": "percentile bootstrap over prompts",
                "resamples": self.resamples,
                "seed": self.seed,
            },
            "parse_failures": sum(p.votes.count(None) for p in self.prompts),
            "prompts_with_parse_failure": len(unparsed),
            "judged_by": self.judged_by,
            "prompts": [p.to_dict() for p in self.prompts],
        }


# ---------------------------------------------------------------------------- matchups


def read_picks(path: str | Path) -> list[tuple[int, str, str]]:
    """(line, prompt id, response id) of every row of a picks file; one pick per prompt."""
    read_scores(path)  # the scores-file checks: object rows, fields and their types, no repeated row
    seen: dict[str, int] = {}
    picks = []
    for line, row in load_rows(path):
        prompt_id = row["prompt_id"]
        if prompt_id in seen:
            raise InputError(
                f"second pick for prompt '{prompt_id}' (first at line {seen[prompt_id]})",
                path=str(path),
                line=line,
                hint="a picks file has one row per prompt (cheems bon writes one)",
            )
        seen[prompt_id] = line
        picks.append((line, prompt_id, row["response_id"]))
    return picks


def baseline_text(record: Record, field_name: str) -> str | None:
    """The record's ``field_name`` (``reference`` or an extra key) when it is a non-empty text."""
    value = record.reference if field_name == "reference" else (record.model_extra or {}).get(field_name)
    return value if isinstance(value, str) and value.strip() else None


def build_matchups(
    picks_path: str | Path,
    pool: Sequence[Record],
    pool_path: str | Path,
    field_name: str,
    skip_missing: bool = False,
) -> tuple[list[Matchup], list[InputError]]:
    """A matchup per pick, in picks order; a pick whose prompt, response or baseline is missing is an error
    naming the picks file and line (with ``skip_missing``: left out and returned in the second list)."""
    by_id = {r.id: r for r in pool}
    matchups: list[Matchup] = []
    skipped: list[InputError] = []
    for line, prompt_id, response_id in read_picks(picks_path):
        record = by_id.get(prompt_id)
        if record is None:
            problem = f"prompt '{prompt_id}' is not in {pool_path}"
        elif response_id not in {r.id for r in record.responses}:
            problem = f"response '{response_id}' is not a response of prompt '{prompt_id}' in {pool_path}"
        elif baseline_text(record, field_name) is None:
            problem = f"prompt '{prompt_id}' in {pool_path} has no baseline text in field '{field_name}'"
        else:
            matchups.append(Matchup(matchup_record(record, response_id, field_name), response_id))
            continue
        error = InputError(
            problem,
            path=str(picks_path),
            line=line,
            hint="pick from the same pool, give each prompt the baseline field, or pass --skip-missing",
        )
        if not skip_missing:
            raise error
        skipped.append(error)
    return matchups, skipped


def matchup_record(record: Record, response_id: str, field_name: str) -> Record:
    """The two-response record ``pick`` vs ``baseline`` of one prompt (no comparisons, no rank): ``pick`` is the
    picked response (its ``model`` kept, its pool id under ``pool_id``), ``baseline`` the text of the record's
    field ``field_name`` (``reference`` or any extra key; ``model`` ``baseline:FIELD``)."""
    picked = record.response(response_id)
    baseline = baseline_text(record, field_name)
    assert baseline is not None  # build_matchups makes a matchup only of a record with a baseline
    return Record(
        id=record.id,
        input=record.input,
        category=record.category,
        sys_prompt=record.sys_prompt,
        reference=None if field_name == "reference" else record.reference,
        responses=[
            # pool_id: an extra key, which Response allows (extra="allow") and its typed signature does not show
            Response(id=PICK, content=picked.content, model=picked.model, pool_id=response_id),  # type: ignore[call-arg]
            Response(id=BASELINE, content=baseline, model=f"baseline:{field_name}"),
        ],
    )


# ---------------------------------------------------------------------------- outcomes


def _vote(a: str, b: str, label: str) -> str:
    """A comparison label (``a``/``b``/``tie``) as the side it names: ``pick``, ``baseline`` or ``tie``."""
    return "tie" if label == "tie" else (a if label == "a" else b)


def _result(prompts: list[PromptResult], resamples: int, seed: int, judged_by: dict[str, Any]) -> WinRate:
    counts = Counter(p.outcome for p in prompts)
    interval = win_rate_interval(counts["win"], counts["loss"], counts["tie"], resamples, seed)
    return WinRate(prompts, interval, resamples, seed, judged_by=judged_by)


def judge_winrate(
    matchups: Sequence[Matchup], settings: JudgeSettings, progress: bool = True, resamples: int = 1000, seed: int = 0
) -> WinRate:
    """Ask the judge about every matchup (once in the seeded order, or in both orders) and count the outcomes:
    a *win* only when every verdict names the pick, a *loss* only when every verdict names the baseline,
    otherwise a *tie* (a C, two orders that disagree, or a verdict that could not be parsed)."""
    result = judge_records([m.record for m in matchups], settings, progress)
    require_complete(result, settings)
    votes: dict[str, list[str | None]] = {m.record.id: [] for m in matchups}
    for record in result.records:
        votes[record.id] += [_vote(c.a, c.b, c.label) for c in record.comparisons]
    for failure in result.failures:  # only parse failures are left (require_complete)
        votes[failure.prompt_id].append(None)
    asked = 2 if settings.both_orders else 1
    prompts = []
    for m in matchups:
        got = votes[m.record.id]
        outcome = "tie"
        if len(got) == asked and all(v == PICK for v in got):
            outcome = "win"
        elif len(got) == asked and all(v == BASELINE for v in got):
            outcome = "loss"
        prompts.append(PromptResult(m.record.id, m.response_id, outcome, got))
    return _result(prompts, resamples, seed, {"judge": result.stats.to_dict(), "both_orders": settings.both_orders})


def winrate(
    matchups: Sequence[Matchup],
    by: JudgeSettings | str | Path,
    *,
    progress: bool = True,
    resamples: int = 1000,
    seed: int = 0,
) -> WinRate:
    """The win rate of the matchups judged ``by`` an LLM judge (:func:`judge_winrate`) or by the people of an
    annotation project, given as the file ``cheems annotate export`` wrote (:func:`human_winrate`)."""
    if isinstance(by, JudgeSettings):
        return judge_winrate(matchups, by, progress, resamples, seed)
    from cheems.data.stream import read_records

    return human_winrate(matchups, read_records(by).records, by, resamples, seed)


def annotation_records(matchups: Sequence[Matchup]) -> list[Record]:
    """The records of a human annotation project: one two-response (pairwise) task per prompt."""
    return [m.record for m in matchups]


def human_winrate(
    matchups: Sequence[Matchup],
    exported: Sequence[Record],
    export_path: str | Path,
    resamples: int = 1000,
    seed: int = 0,
) -> WinRate:
    """Count the people's answers of an exported project (``cheems annotate export``) per prompt, by majority:
    each standing answer is a vote (an adjudicated task counts its consensus only, as the export writes it);
    more votes for the pick is a win, more for the baseline a loss, equal a tie. A prompt with no answer yet
    stops the run."""
    by_id = {r.id: r for r in exported}
    wanted = [m.record.id for m in matchups]
    extra = sorted(set(by_id) - set(wanted))
    if extra:
        raise InputError(
            f"prompt '{extra[0]}' of the export is not among the picks ({len(extra)} such prompt(s))",
            path=str(export_path),
            hint="export the project made by `cheems winrate --annotate` from these picks",
        )
    waiting = [pid for pid in wanted if pid not in by_id or not _human_votes(by_id[pid])]
    if waiting:
        raise InputError(
            f"{len(waiting)} of {len(wanted)} prompts have no human answer yet (first: '{waiting[0]}'); "
            "no win rate is computed from an unfinished project",
            path=str(export_path),
            hint="finish the annotation, then run `cheems annotate export` again",
        )
    prompts = []
    for m in matchups:
        record = by_id[m.record.id]
        if [(r.id, r.content) for r in record.responses] != [(r.id, r.content) for r in m.record.responses]:
            raise InputError(
                f"prompt '{record.id}': the exported responses are not this pick and baseline",
                path=str(export_path),
                hint="export the project made from the same picks, pool and --baseline-field",
            )
        got: list[str | None] = list(_human_votes(record))
        for_pick, for_baseline = got.count(PICK), got.count(BASELINE)
        outcome = "win" if for_pick > for_baseline else "loss" if for_baseline > for_pick else "tie"
        prompts.append(PromptResult(m.record.id, m.response_id, outcome, got))
    annotators = sorted({c.annotator or "" for r in exported for c in r.comparisons if c.source == "human"})
    return _result(prompts, resamples, seed, {"people": annotators, "export": str(export_path)})


def _human_votes(record: Record) -> list[str]:
    """The side each human comparison of an exported record names."""
    return [_vote(c.a, c.b, c.label) for c in record.comparisons if c.source == "human"]


# ---------------------------------------------------------------------------- ``cheems winrate`` as one call


def winrate_files(
    picks: Path,
    pool: Path,
    settings: WinrateSettings,
    judge: JudgeSettings | None = None,
    *,
    from_export: Path | None = None,
    annotate: Path | None = None,
    people: Path | None = None,
    output_json: Path | None = None,
    progress: bool = True,
    on_skipped: Notify = unlisted,
) -> WinRate | PlanSummary:
    """The win rate of the ``picks`` of ``pool`` against the baseline field of ``settings``, judged by exactly one of
    ``judge``, the people of an exported project (``from_export``), or, with ``annotate`` and ``people``, the plan
    of a new annotation project of the matchups in the folder ``annotate`` (for people to answer, then export).

    The numbers go to ``output_json``; no output may replace an input or the judge's cache. Picks and pool lines
    left out (``settings.skip_missing``) go to ``on_skipped``.
    """
    from cheems.annotate.people import ProjectSettings, load_people
    from cheems.annotate.store import Project
    from cheems.data.io import write_json
    from cheems.data.stream import read_records
    from cheems.outputs import Named, claim_outputs

    if annotate is not None and people is None:
        raise InputError("is needed with --annotate", path="--people", hint="PEOPLE.yaml names who annotates")
    inputs: list[Named] = [("PICKS", picks), ("--pool", pool), ("--people", people), ("--from-export", from_export)]
    inputs += judge.inputs() if judge is not None else []
    claim_outputs(inputs=inputs, files=[("--output-json", output_json)], folders=[("--annotate", annotate, ())])
    read = read_records(pool)
    on_skipped(read.skipped)
    assert settings.baseline_field is not None  # a setting the command requires
    matchups, skipped = build_matchups(picks, read.records, pool, settings.baseline_field, settings.skip_missing)
    on_skipped(skipped)
    if annotate is not None:
        assert people is not None  # refused above without it
        project = ProjectSettings(overlap=settings.overlap)
        return Project.create(annotate, annotation_records(matchups), load_people(people), (), project)[2]
    by = judge if judge is not None else from_export
    assert by is not None  # the one of the three left
    result = winrate(matchups, by, progress=progress, resamples=settings.resamples, seed=settings.bootstrap_seed)
    if output_json:
        write_json(output_json, result.to_dict())
    return result


def print_winrate(result: WinRate, console: Console) -> None:
    """The numbers as a small table."""
    from rich.table import Table

    numbers = result.to_dict()
    judged = result.judged_by
    judged_by = judged["judge"]["judge_model"] if "judge" in judged else f"people ({judged['export']})"
    table = Table(title=f"win rate against the baseline: {judged_by}", show_header=False)
    table.add_column("what")
    table.add_column("n", justify="right")
    for key in ("n", "wins", "losses", "ties"):
        table.add_row(key, str(numbers[key]))
    if numbers["parse_failures"]:
        table.add_row(
            "unparseable replies (their prompts are ties)",
            f"{numbers['parse_failures']} in {numbers['prompts_with_parse_failure']} prompt(s)",
        )
    rate, interval = numbers["win_rate"], numbers["interval"]
    text = "-" if rate is None else f"{rate:.3f}"
    if interval is not None:
        text += f" [{interval['low']:.3f}, {interval['high']:.3f}]"
    table.add_row("win rate (wins + ties/2)/n, 95% CI", text)
    console.print(table)


def print_winrate_project(
    plan: PlanSummary, folder: Path, picks: Path, pool: Path, settings: WinrateSettings, console: Console, err: Console
) -> None:
    """The annotation project made of the matchups, and how to serve, export and read it back."""
    from cheems.annotate.store import TOKENS_NAME

    if plan.shared:
        from rich.text import Text  # a style for our words, never markup in a string

        err.print(
            Text.assemble(("warning: ", "yellow"), f"{len(plan.shared)} prompt(s) have more overlap than annotators")
        )
    console.print(
        f"planned {plan.tasks} pairwise tasks (pick vs baseline) over {plan.prompts} prompts, "
        f"overlap {settings.overlap}"
    )
    console.print(f"project: {folder}   tokens: {folder / TOKENS_NAME} (one per person; keep it private)")
    console.print(f"next: cheems annotate serve {folder}", soft_wrap=True)
    console.print(f"then: cheems annotate export {folder} -o exported.jsonl", soft_wrap=True)
    console.print(
        f"then: cheems winrate {picks} --pool {pool} --baseline-field {settings.baseline_field} "
        "--from-export exported.jsonl",
        soft_wrap=True,
    )
