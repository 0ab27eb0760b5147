"""``cheems export judge-sft``: supervised data for a generative judge, from resolved rankings.

Every pair a record trains on (:func:`cheems.ranking.training_pairs`, the pairs ``cheems train`` uses) becomes two
chat rows, one per order, so that a judge trained on them sees as many ``[[A]]`` as ``[[B]]`` verdicts (position
balance). The user turn is the judge prompt ``cheems judge`` sends (:func:`cheems.judge.prompt.build_messages`:
the category's criteria, the reference when there is one, the fenced answers; with ``eval_prompt`` the one
``cheems eval --judge-model`` sends, which asks for A or B only); the assistant turn is the verdict
the ranking implies, a tag :func:`cheems.judge.verdict.parse_verdict` reads back. With ``ties`` two responses of
the same rank give ``[[C]]`` (both orders too).

A row (one JSON object a line)::

    {"messages": [{"role": "system", ...}, {"role": "user", ...}, {"role": "assistant", "content": "[[A]]"}],
     "prompt_id": "p1", "response_a": "r1", "response_b": "r2", "label": "A", "source": "ranked.jsonl"}

``bench``: rows whose prompt overlaps a bench prompt (:mod:`cheems.prompts.decontaminate`'s rule) are dropped
and listed. ``critiques``: a teacher judge's critiques (:func:`read_critiques`), one per shown order; a critique
whose own verdict agrees with the ranking replaces the bare tag (it ends with the tag), the others are dropped
and counted (the row keeps its bare tag).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from cheems.data.io import ReadResult, iter_rows, json_line, write_lines
from cheems.data.schema import Record
from cheems.data.stream import PromptIds, stream_records
from cheems.errors import InputError
from cheems.judge import prompt as judge_prompt
from cheems.judge.judge_settings import JudgeSettings
from cheems.judge.prompt import EVAL_TEMPLATE, JUDGE_TEMPLATE, CriteriaMap, PromptTemplate, build_messages
from cheems.judge.verdict import parse_verdict
from cheems.outputs import claim_outputs
from cheems.prompts.decontaminate import DecontaminateSettings, bench_index
from cheems.prompts.minhash import PromptKey, prompt_key
from cheems.ranking import resolve_record, training_pairs
from cheems.settings import Cli

CritiqueKey = tuple[str, str, str]
"""(prompt id, response shown as A, response shown as B)."""


def verdict_tag(label: str) -> str:
    """The assistant's verdict for ``label`` (A, B or C), as :func:`~cheems.judge.verdict.parse_verdict` reads it."""
    return f"[[{label}]]"


class JudgeSftSettings(DecontaminateSettings):
    """What ``cheems export judge-sft`` writes (the bench overlap rule is :class:`DecontaminateSettings`')."""

    ties: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Also write a [[C]] row (both orders) for two responses of the same rank."
    )
    eval_prompt: Annotated[bool, Cli(flag=True)] = Field(
        False,
        description="Ask as `cheems eval --judge-model` does (pick A or B) rather than as `cheems judge` (A, B or C); "
        "not with --ties.",
    )
    # the judge's own files, as `cheems judge` reads them
    criteria: str | Path | None = Field(None, description=JudgeSettings.model_fields["criteria"].description)
    template: str | Path | None = Field(None, description=JudgeSettings.model_fields["template"].description)


@dataclass
class Critique:
    """A teacher's critique of one shown order: its text, the label it states (None: no verdict), its line."""

    text: str
    label: str | None
    line: int


@dataclass
class JudgeSftResult:
    """What an export wrote and left out."""

    records: int = 0
    rows: int = 0
    labels: dict[str, int] = field(default_factory=lambda: {"A": 0, "B": 0, "C": 0})
    dropped: list[dict[str, Any]] = field(default_factory=list)
    """The records left out for a bench overlap: ``{"id", "bench_id", "overlap", "rows"}``."""
    critiques: int = 0
    critiques_kept: int = 0
    critiques_disagree: int = 0
    issues: ReadResult = field(default_factory=ReadResult)


def read_critiques(path: str | Path) -> dict[CritiqueKey, Critique]:
    """A teacher's critiques: JSONL rows ``{"prompt_id", "response_a", "response_b", "critique"}`` (A and B: the
    order the teacher was shown), the critique ending with its verdict (``[[A]]``)."""
    found: dict[CritiqueKey, Critique] = {}
    for n, row in iter_rows(path):
        pid, a, b, text = _critique_fields(row, str(path), n)
        if (pid, a, b) in found:
            raise InputError(
                f"a second critique of prompt '{pid}' with {a} shown first (first at line {found[pid, a, b].line})",
                path=str(path),
                line=n,
                hint="give one critique per pair and order",
            )
        found[pid, a, b] = Critique(text, parse_verdict(text).label, n)
    return found


CRITIQUE_FIELDS = ("prompt_id", "response_a", "response_b", "critique")


def _critique_fields(row: Any, path: str, n: int) -> tuple[str, str, str, str]:
    """A critique row's four strings, or an ``InputError`` at its line."""
    if not isinstance(row, dict):
        raise InputError("a critique row must be a JSON object", path=path, line=n, hint=_CRITIQUE_HINT)
    for name in CRITIQUE_FIELDS:
        value = row.get(name)
        if not isinstance(value, str) or not value.strip():
            raise InputError("is missing or not a non-empty string", path=path, line=n, field=name, hint=_CRITIQUE_HINT)
    pid, a, b, text = (str(row[name]) for name in CRITIQUE_FIELDS)
    return pid, a, b, text


_CRITIQUE_HINT = 'each line: {"prompt_id": ..., "response_a": ..., "response_b": ..., "critique": "...[[A]]"}'


def tied_pairs(record: Record) -> list[tuple[str, str]]:
    """Pairs of ranked responses with the same rank (the record's ``rank``, or its comparisons resolved)."""
    rank = record.rank or (resolve_record(record).rank if record.comparisons else None) or {}
    ranked = [r.id for r in record.responses if r.id in rank]
    return [(x, y) for x, y in combinations(ranked, 2) if rank[x] == rank[y]]


SWAPPED = {"A": "B", "C": "C"}  # the verdict of a pair shown the other way round (x better than y, or tied)
Shown = tuple[str, str, str, list[dict[str, str]]]
"""(response shown as A, response shown as B, label, the judge's system and user messages)."""


def record_rows(
    criteria: CriteriaMap, template: PromptTemplate, ties: bool, shingle: int, record: Record
) -> tuple[PromptKey, list[Shown]]:
    """A record's prompt key (for the bench check) and its rows, each pair in both orders (runs in the workers)."""
    byid = {r.id: r for r in record.responses}
    labelled = [(x, y, "A") for x, y in training_pairs(record)]
    labelled += [(x, y, "C") for x, y in tied_pairs(record)] if ties else []
    if not labelled:
        raise InputError(
            f"prompt '{record.id}' has no pair to judge: {_why_no_pair(record)}",
            field="rank",
            hint="rank at least two responses differently"
            + ("" if ties else " (or give --ties for tied pairs)")
            + ", or drop the record (--skip-invalid)",
        )
    shown: list[Shown] = []
    for x, y, label in labelled:
        for first, second, verdict in ((x, y, label), (y, x, SWAPPED[label])):
            messages = build_messages(record, byid[first], byid[second], criteria, template)
            shown.append((first, second, verdict, messages))
    return prompt_key(shingle, record), shown


def _why_no_pair(record: Record) -> str:
    """Why a record gives no row, for its error line."""
    if len(record.responses) < 2:
        return "it has one response"
    if not record.rank and not record.comparisons:
        return "it has no rank and no comparisons"
    return "its ranked responses are all tied"


def _assistant(tag: str, critique: Critique | None) -> str:
    """The critique ending with the verdict tag (added when it does not end with it), or the bare tag."""
    if critique is None:
        return tag
    text = critique.text.rstrip()
    return text if text.endswith(tag) else f"{text}\n\n{tag}"


def export_judge_sft(
    sources: Iterable[str | Path],
    output: str | Path,
    settings: JudgeSftSettings | None = None,
    *,
    bench: Iterable[str | Path] = (),
    critiques: str | Path | None = None,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> JudgeSftResult:
    """Write judge SFT rows of the ranked records in ``sources`` to ``output`` (see the module docstring).

    Checks first: the output replaces no input (:func:`cheems.outputs.claim_outputs`); the criteria, template and
    critiques files are read before the records. A record with no pair to judge is an ``InputError`` at its line
    (with ``skip_invalid``: skipped and listed); a critique that names a pair and order no record gives is one at
    its line. The output is the same for any ``workers``.
    """
    settings = settings or JudgeSftSettings()
    files, bench_files = [str(s) for s in sources], [str(b) for b in bench]
    claim_outputs(
        inputs=[
            *(("RANKED", s) for s in files),
            *(("--bench", b) for b in bench_files),
            ("--critiques", critiques),
            ("--criteria", settings.criteria),
            ("--template", settings.template),
        ],
        files=[("--output", output)],
    )
    if settings.eval_prompt and settings.ties:
        raise InputError(
            "--eval-prompt asks for A or B only, so a tie has no verdict there",
            path="--ties",
            hint="leave out --ties or --eval-prompt",
        )
    criteria = judge_prompt.load_criteria_map(settings.criteria)
    template = judge_prompt.load_template(settings.template, EVAL_TEMPLATE if settings.eval_prompt else JUDGE_TEMPLATE)
    teacher = read_critiques(critiques) if critiques is not None else {}
    index = bench_index(bench_files, settings, workers=workers) if bench_files else None
    result = JudgeSftResult(critiques=len(teacher))
    used: set[CritiqueKey] = set()
    fn = functools.partial(record_rows, criteria, template, settings.ties, settings.shingle)

    def lines() -> Iterator[str]:
        ids = PromptIds()
        for source in files:
            records = stream_records(
                source, fn, skip_invalid=skip_invalid, issues=result.issues, workers=workers, ids=ids
            )
            for key, shown in records:
                result.records += 1
                overlap = index.overlap(key) if index is not None else None
                if overlap is not None:
                    result.dropped.append({"id": key.id, **overlap, "rows": len(shown)})
                    used.update((key.id, a, b) for a, b, _, _ in shown)
                    continue
                for a, b, label, messages in shown:
                    yield json_line(_row(result, teacher, used, source, key.id, a, b, label, messages))

    write_lines(output, _checked(lines(), teacher, used, critiques))
    return result


def _row(
    result: JudgeSftResult,
    teacher: dict[CritiqueKey, Critique],
    used: set[CritiqueKey],
    source: str,
    pid: str,
    a: str,
    b: str,
    label: str,
    messages: list[dict[str, str]],
) -> dict[str, Any]:
    """One output row, with the teacher's critique when it agrees with the ranking (counted either way)."""
    critique = teacher.get((pid, a, b))
    if critique is not None:
        used.add((pid, a, b))
        if critique.label == label:
            result.critiques_kept += 1
        else:
            result.critiques_disagree += 1
            critique = None
    result.rows += 1
    result.labels[label] += 1
    content = _assistant(verdict_tag(label), critique)
    return {
        "messages": [*messages, {"role": "assistant", "content": content}],
        "prompt_id": pid,
        "response_a": a,
        "response_b": b,
        "label": label,
        "source": source,
        **({"critique": True} if critique is not None else {}),
    }


def _checked(
    lines: Iterator[str], teacher: dict[CritiqueKey, Critique], used: set[CritiqueKey], path: str | Path | None
) -> Iterator[str]:
    """The lines, then (before the file is put in place) the check that every critique named a row's pair."""
    yield from lines
    unknown = [c for key, c in teacher.items() if key not in used]
    if unknown:
        first = min(unknown, key=lambda c: c.line)
        raise InputError(
            f"the critique names a pair and order no ranked record gives ({len(unknown)} such critiques)",
            path=str(path),
            line=first.line,
            hint="prompt_id, response_a and response_b must be a ranked pair of the RANKED files, in the order shown",
        )
