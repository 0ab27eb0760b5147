"""Importers for other reward-model benchmarks, each in its public layout -> canonical ``Record``s.

One convention for all: the better response(s) get rank 1, the worse ones rank 2, so
``Record.ranked_pairs`` yields exactly the comparisons the benchmark makes; what a benchmark adds
is kept in extra keys. ``cheems eval --metric`` (:mod:`cheems.metrics`) scores them.

A layout is one row function (its docstring: the upstream rows, the response ids and the category) and
one :func:`register_benchmark` line; the upstream files, with an example of each, are in docs/formats.md.
``rmbench`` and ``rmb`` also read a folder (every ``*.json`` below it, in path order), as the
benchmarks ship one file per domain or scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cheems.data.bench_layouts import REWARDBENCH_SECTIONS, RMBENCH_STYLES
from cheems.data.formats import (
    ImportJob,
    _as_input,
    _check_row,
    _guard,
    _messages,
    _string,
    _validate,
    _Where,
    register_format,
    same_text_pairs,
    same_text_warning,
)
from cheems.data.io import ReadResult, load_rows
from cheems.data.schema import Record
from cheems.errors import InputError

# JudgeBench reports these source groups (run_judge.py: ``source.startswith(group)``).
JUDGEBENCH_GROUPS = ("mmlu-pro", "livebench-reasoning", "livebench-math", "livecodebench")
_RMBENCH_DOMAINS = ("chat", "math", "code", "safety")  # scripts/utils.py split_dataset_by_domain


def _text_list(row: dict[str, Any], key: str, where: _Where, size: int | None = None) -> list[str]:
    value = row.get(key)
    if not isinstance(value, list) or not value or (size is not None and len(value) != size):
        want = f"a list of {size} strings" if size else "a non-empty list of strings"
        raise where.error(f"must be {want}", key)
    return [_string(v, f"{key}[{i}]", where) for i, v in enumerate(value)]


def _text(row: dict[str, Any], key: str, where: _Where) -> str:
    if row.get(key) is None:
        raise where.error("is missing", key)
    return _string(row[key], key, where)


def _uid(row: dict[str, Any], key: str, where: _Where) -> str:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise where.error("is missing" if value is None else f"must be a string or an integer, got {value!r}", key)
    return str(value)


def _record(
    prompt: Any, pid: str, category: list[str], responses: list[dict[str, Any]], where: _Where, **extra: Any
) -> Record:
    """The record of one benchmark row; rank 1 for the responses marked ``better``, rank 2 for the others;
    ``extra`` keys as they are."""
    rank = {r["id"]: 1 if r.pop("better") else 2 for r in responses}
    record = {"id": pid, "input": prompt, "category": category, "responses": responses, "rank": rank}
    return _validate(record | extra, where, same_text="keep")  # scored as upstream scores it: see _import_benchmark


def _grouped(name: str, groups: tuple[str, ...]) -> list[str]:
    """Category path ``[group, name]`` for the group ``name`` starts with, ``[name]`` when it is a group itself."""
    group = next((g for g in groups if name.startswith(g)), name)
    return [group] if group == name else [group, name]


# ---------------------------------------------------------------- one row of each benchmark


RowConverter = Callable[[dict[str, Any], _Where], Record]
"""One row of a benchmark's file (``where``: its file and line) -> its record."""


def register_benchmark(
    name: str, *, help: str, folder: bool = False, union: str | None = None
) -> Callable[[RowConverter], RowConverter]:
    """Decorator: make a row converter the format ``cheems import NAME`` (``folder``: it also reads every
    ``*.json`` below a folder, or only the file named ``union`` where the folder holds one: the benchmark's own
    union of its other files); a prompt id seen twice is an error (or skipped with ``--skip-invalid``)."""

    def add(convert: RowConverter) -> RowConverter:
        register_format(name, help=help)(lambda job: _import_benchmark(job, convert, folder, union))
        return convert

    return add


# upstream's data/ holds total_dataset.json beside the per-domain files it joins: read from a folder, it alone
@register_benchmark(
    "rmbench", help="RM-Bench's data files, a file or a folder", folder=True, union="total_dataset.json"
)
def rmbench_row(row: dict[str, Any], where: _Where) -> Record:
    """One RM-Bench prompt (``data/*_filtered.json`` or ``data/total_dataset.json`` rows ``{id, prompt,
    chosen: [3], rejected: [3], domain?}``): responses ``chosen-STYLE`` / ``rejected-STYLE`` with a ``style``
    key (:data:`RMBENCH_STYLES`); record id ``DOMAIN-ID``; category ``[chat|math|code|safety]``, plus the
    domain when it differs (``["safety", "safety-refuse"]``). The domain is the row's ``domain``, else the
    file's name (``safety-refuse_filtered.json`` -> ``safety-refuse``), and must be one of those four (or one
    with a suffix): any other file name is refused, not made a domain."""
    prompt = _text(row, "prompt", where)
    given = row.get("domain")
    domain = _rmbench_domain(Path(where.path)) if given is None else _string(given, "domain", where)
    if not any(domain == d or domain.startswith(f"{d}-") for d in _RMBENCH_DOMAINS):
        whence = "" if given is not None else f" (from the file name {Path(where.path).name})"
        raise where.error(
            f"{domain!r}{whence} is not an RM-Bench domain",
            "domain",
            f"use {', '.join(_RMBENCH_DOMAINS)} or one of them with a suffix (safety-refuse), in each row's "
            "'domain' or as the file's name (chat_filtered.json)",
        )
    responses = [
        {"id": f"{side}-{style}", "content": text, "style": style, "better": side == "chosen"}
        for side in ("chosen", "rejected")
        for style, text in zip(RMBENCH_STYLES, _text_list(row, side, where, len(RMBENCH_STYLES)))
    ]
    return _record(prompt, f"{domain}-{_uid(row, 'id', where)}", _grouped(domain, _RMBENCH_DOMAINS), responses, where)


def _rmb_answer(value: Any, field: str, where: _Where) -> tuple[str, str | None]:
    if not isinstance(value, dict) or value.get("answer") is None:
        raise where.error("must be an {llm_name, answer} object", field)
    model = value.get("llm_name")
    return _string(value["answer"], f"{field}.answer", where), model if isinstance(model, str) else None


@register_benchmark("rmb", help="RMB's Pairwise_set or BoN_set, a file or a folder", folder=True)
def rmb_row(row: dict[str, Any], where: _Where) -> Record:
    """One RMB row: a pairwise row ``{pair_uid, conversation_input, chosen, reject, category_path}`` or a
    best-of-N row ``{bon_uid, conversation_input, bon_best, loser_list, category_path}``, answers being
    ``{llm_name, answer}``: responses ``chosen``/``rejected`` or ``best``/``loser-1``… with ``model``; category
    = ``category_path`` without the set folder (``["Helpfulness", "Chat", "Discussion"]``)."""
    prompt = _as_input(_messages(row.get("conversation_input"), "conversation_input", where))
    if not prompt or (isinstance(prompt, str) and not prompt.strip()):
        raise where.error("is empty", "conversation_input", "give the conversation up to the answers")
    path = row.get("category_path")
    category = _string(path, "category_path", where).split("/")[1:] if path is not None else []
    if "bon_best" in row:
        losers = row.get("loser_list")
        if not isinstance(losers, list) or not losers:
            raise where.error("must be a non-empty list", "loser_list")
        answers = [("best", "bon_best", row["bon_best"], True)] + [
            (f"loser-{i}", f"loser_list[{i - 1}]", x, False) for i, x in enumerate(losers, start=1)
        ]
        pid = f"bon-{_uid(row, 'bon_uid', where)}"
    else:
        answers = [("chosen", "chosen", row.get("chosen"), True), ("rejected", "reject", row.get("reject"), False)]
        pid = f"pair-{_uid(row, 'pair_uid', where)}"
    responses = []
    for rid, field, value, better in answers:
        text, model = _rmb_answer(value, field, where)
        responses.append({"id": rid, "content": text, "model": model, "better": better})
    return _record(prompt, pid, category, responses, where)


@register_benchmark("rewardbench2", help="RewardBench 2 as JSON Lines")
def rewardbench2_row(row: dict[str, Any], where: _Where) -> Record:
    """One RewardBench 2 prompt (JSON Lines rows ``{id, prompt, chosen: [..], rejected: [..], subset, models?}``):
    the correct completion(s) ``chosen-1``… rank 1, then the incorrect ones ``rejected-1``… rank 2 (``models``
    in that order); category ``[subset]``."""
    chosen, rejected = _text_list(row, "chosen", where), _text_list(row, "rejected", where)
    texts = [(f"chosen-{i}", t, True) for i, t in enumerate(chosen, 1)]
    texts += [(f"rejected-{i}", t, False) for i, t in enumerate(rejected, 1)]
    models = row.get("models")
    if not (isinstance(models, list) and len(models) == len(texts) and all(isinstance(m, str) for m in models)):
        models = [None] * len(texts)
    responses = [{"id": rid, "content": t, "model": m, "better": b} for (rid, t, b), m in zip(texts, models)]
    subset = row.get("subset")
    category = [_string(subset, "subset", where)] if subset is not None else []
    return _record(_text(row, "prompt", where), _uid(row, "id", where), category, responses, where)


@register_benchmark("judgebench", help="JudgeBench's JSON Lines")
def judgebench_row(row: dict[str, Any], where: _Where) -> Record:
    """One JudgeBench pair (``{pair_id, question, response_model, response_A, response_B, label, source}``):
    responses ``A`` and ``B``, ``label`` ``A>B`` or ``B>A`` names the correct one; category the source group
    (:data:`JUDGEBENCH_GROUPS`), plus the source when it differs (``["mmlu-pro", "mmlu-pro-law"]``)."""
    label = row.get("label")
    if label not in ("A>B", "B>A"):
        raise where.error(f"must be 'A>B' or 'B>A', got {label!r}", "label")
    model = row.get("response_model")
    responses = [
        {"id": side, "content": _text(row, f"response_{side}", where), "better": label[0] == side}
        | ({"model": model} if isinstance(model, str) else {})
        for side in ("A", "B")
    ]
    source = row.get("source")
    category = []
    if source is not None:
        source = _string(source, "source", where)
        category = _grouped(source, JUDGEBENCH_GROUPS)
    return _record(_text(row, "question", where), _uid(row, "pair_id", where), category, responses, where)


_REWARDBENCH_SECTION = {subset: section for section, subsets in REWARDBENCH_SECTIONS.items() for subset in subsets}


@register_benchmark("rewardbench", help="RewardBench (v1) as JSON Lines")
def rewardbench_row(row: dict[str, Any], where: _Where) -> Record:
    """One RewardBench prompt (its ``filtered`` split as JSON Lines, rows ``{prompt, chosen, rejected,
    chosen_model, rejected_model, subset, id}``): responses ``chosen`` rank 1 and ``rejected`` rank 2, with
    their ``model``; category ``[SECTION, subset]`` (:data:`REWARDBENCH_SECTIONS`), ``[subset]`` for a subset
    of no section."""
    subset = _text(row, "subset", where)
    responses = []
    for side in ("chosen", "rejected"):
        model = row.get(f"{side}_model")
        responses.append(
            {"id": side, "content": _text(row, side, where), "better": side == "chosen"}
            | ({"model": model} if isinstance(model, str) else {})
        )
    section = _REWARDBENCH_SECTION.get(subset)
    category = [section, subset] if section else [subset]
    return _record(_text(row, "prompt", where), _uid(row, "id", where), category, responses, where)


PPE_WINNERS = ("model_a", "model_b", "tie", "tie (bothbad)")
"""The ``winner`` values of PPE's human-preference rows (Chatbot Arena's vote labels)."""


@register_benchmark("ppe-preference", help="PPE's human-preference set as JSON Lines")
def ppe_preference_row(row: dict[str, Any], where: _Where) -> Record:
    """One PPE human-preference pair (lmarena-ai/PPE-Human-Preference-V1 saved as JSON Lines, rows
    ``{question_id, prompt, response_1, response_2, winner, model_a?, model_b?, language?}``): responses
    ``1`` and ``2`` (with ``model_a`` / ``model_b``); ``winner`` (:data:`PPE_WINNERS`) ``model_a`` ranks ``1``
    first, ``model_b`` ranks ``2`` first, a tie ranks both 1 (no ranked pair: the accuracy leaves it out);
    category ``[language]`` when the row has one."""
    winner = row.get("winner")
    if winner not in PPE_WINNERS:
        raise where.error(f"must be one of {', '.join(map(repr, PPE_WINNERS))}, got {winner!r}", "winner")
    better = {"model_a": "1", "model_b": "2"}.get(winner, "12")  # a tie: both rank 1, no ranked pair
    responses = [
        {"id": side, "content": _text(row, f"response_{side}", where), "better": side in better}
        | ({"model": row[key]} if isinstance(row.get(key), str) else {})
        for side, key in (("1", "model_a"), ("2", "model_b"))
    ]
    language = row.get("language")
    category = [_string(language, "language", where)] if language is not None else []
    return _record(_text(row, "prompt", where), _uid(row, "question_id", where), category, responses, where)


@register_benchmark("ppe-correctness", help="PPE's best-of-K correctness sets as JSON Lines")
def ppe_correctness_row(row: dict[str, Any], where: _Where) -> Record:
    """One PPE best-of-K row: a prompt and one model's K samples (lmarena-ai/PPE-{MMLU-Pro,MATH,GPQA,IFEval,
    MBPP-Plus}-Best-of-K saved as JSON Lines, rows ``{question_id, model_name, prompt, response_1 …
    response_K, scores: [K booleans], sampled_conflict_pairs?: [[i, j], …], category?}``, ``i``/``j``
    0-based): record id ``QUESTION_ID@MODEL_NAME`` (a question is asked of several models); responses ``1``
    … ``K`` with ``correct`` (their entry of ``scores``) and ``model``; the correct ones rank 1, the others 2,
    so a row all correct or all wrong has no ranked pair (best-of-K still counts it); ``conflict_pairs``:
    the sampled pairs as ``[correct id, incorrect id]``; category ``[category]`` when the row has one."""
    count = sum(1 for key in row if key.startswith("response_") and key.removeprefix("response_").isdigit())
    if not count:
        raise where.error("is missing", "response_1", "give the K responses as response_1 … response_K")
    flags = row.get("scores")
    if not isinstance(flags, list) or len(flags) != count or not all(f in (True, False) for f in flags):
        raise where.error(f"must be a list of {count} booleans, one per response_N", "scores")
    model = _text(row, "model_name", where)
    responses = [
        {"id": str(i), "content": _text(row, f"response_{i}", where), "correct": bool(f), "better": bool(f)}
        | {"model": model}
        for i, f in enumerate(flags, start=1)
    ]
    extra = {}
    if row.get("sampled_conflict_pairs") is not None:
        extra["conflict_pairs"] = _conflict_pairs(row["sampled_conflict_pairs"], [bool(f) for f in flags], where)
    category = row.get("category")
    path = [_string(category, "category", where)] if category is not None else []
    pid = f"{_uid(row, 'question_id', where)}@{model}"
    return _record(_text(row, "prompt", where), pid, path, responses, where, **extra)


def _conflict_pairs(value: Any, correct: list[bool], where: _Where) -> list[list[str]]:
    """PPE's ``sampled_conflict_pairs`` (0-based index pairs of a correct and an incorrect response) as
    ``[correct id, incorrect id]`` response-id pairs."""
    if not isinstance(value, list):
        raise where.error(f"must be a list of [i, j] index pairs, got {type(value).__name__}", "sampled_conflict_pairs")
    pairs = []
    for n, pair in enumerate(value):
        field = f"sampled_conflict_pairs[{n}]"
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(correct) for i in pair)
        ):
            raise where.error(f"must be a pair [i, j] of response indices 0 … {len(correct) - 1}", field)
        i, j = pair
        if correct[i] == correct[j]:
            raise where.error(
                f"pairs responses {i + 1} and {j + 1}, both {'correct' if correct[i] else 'wrong'}", field
            )
        pairs.append([str(i + 1), str(j + 1)] if correct[i] else [str(j + 1), str(i + 1)])
    return pairs


# ---------------------------------------------------------------- files


def _rmbench_domain(path: Path) -> str:
    """The domain a per-domain RM-Bench file is named after (``code_filtered.json`` -> ``code``)."""
    return path.stem.removesuffix("_filtered")


def _files(path: Path, union: str | None) -> list[Path]:
    if not path.is_dir():
        return [path]
    files = sorted(path.rglob("*.json"))
    if not files:
        raise InputError("the folder holds no .json file", path=str(path), hint="point at the benchmark's data folder")
    return [f for f in files if f.name == union] or files


def _import_benchmark(job: ImportJob, convert: RowConverter, folder: bool, union: str | None) -> Iterator[Any]:
    """``job.fn`` of the records of a benchmark's file (or, with ``folder``, folder), all read first."""
    result = ReadResult()
    seen: dict[str, str] = {}
    for file in _files(Path(job.path), union) if folder else [Path(job.path)]:
        for line, row in load_rows(file, job.skip_invalid, result.skipped):
            where = _Where(str(file), line)
            record = _guard(
                lambda: _unique(convert(_check_row(row, where), where), seen, where), result, job.skip_invalid
            )
            if record is not None:
                result.records.append(record)
    job.issues.skipped.extend(result.skipped)
    # Two models giving one refusal is a real row of the benchmark: upstream scores it (a scorer's tie is not
    # a win, so it stays in the denominator as wrong), and dropping it would report a higher number.
    same = sum(1 for r in result.records if same_text_pairs(r))
    if same:
        what = "kept, as upstream scores them (a tie is not a win); the eval's 'degenerate' check counts them"
        job.issues.warnings.append(same_text_warning(job.path, same, what))
    return map(job.fn, result.records)


def _unique(record: Record, seen: dict[str, str], where: _Where) -> Record:
    if record.id in seen:
        raise where.error(f"duplicate prompt id '{record.id}' (first at {seen[record.id]})", "id")
    seen[record.id] = f"{where.path}:{where.line}"
    return record
