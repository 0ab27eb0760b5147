"""One record per prompt: records of the same prompt id from several files merged into one.

As the official loader does for the CheemsPreference files: the same prompt annotated in two
files is one prompt with the union of the responses (the same text is one response, whatever its
id) and the union of the comparisons. Ranks that disagree are resolved again from everything
known (Algorithm 1), so no file's judgements are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cheems.data.schema import Comparison, Record, Response
from cheems.errors import InputError
from cheems.ranking.resolve import resolve_record


@dataclass
class MergeStats:
    """What merging did; ``records_in == records_out + records_merged`` (nothing is lost)."""

    records_in: int = 0
    records_out: int = 0
    prompts_merged: int = 0
    """Prompts that came from more than one record."""
    records_merged: int = 0
    """Records folded into an earlier record of the same prompt."""
    same_responses: int = 0
    """Responses whose text an earlier record of the prompt already had (kept once)."""
    renamed_responses: int = 0
    """Responses given a new id because another text used theirs."""
    same_comparisons: int = 0
    """Comparisons given twice (after the ids were mapped), kept once."""
    ranks_resolved: int = 0
    """Merged prompts whose ranks disagreed (or did not cover every response) and were resolved again."""

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def merge_same_prompts(files: Sequence[tuple[str, Sequence[Record]]]) -> tuple[list[Record], MergeStats]:
    """Records of several files (``(path, records)`` each) with the records of one prompt id merged.

    A prompt keeps the place of its first record; input and ``sys_prompt`` must be the same in
    every file (else an InputError naming both files), category and reference come from the first.
    """
    stats = MergeStats()
    groups: dict[str, list[tuple[str, Record]]] = {}
    for path, records in files:
        for record in records:
            stats.records_in += 1
            groups.setdefault(record.id, []).append((path, record))
    merged = []
    for group in groups.values():
        if len(group) == 1:
            merged.append(group[0][1])
            continue
        stats.prompts_merged += 1
        stats.records_merged += len(group) - 1
        merged.append(_merge_group(group, stats))
    stats.records_out = len(merged)
    return merged, stats


def _check_same_prompt(group: list[tuple[str, Record]]) -> None:
    first_path, first = group[0]
    for path, record in group[1:]:
        for name in ("input", "sys_prompt"):
            if _dump(getattr(record, name)) != _dump(getattr(first, name)):
                raise InputError(
                    f"prompt id '{record.id}' has another {name} here than in {first_path}",
                    path=path,
                    field=name,
                    hint="the same id must name the same prompt; give one of them another id",
                )


def _dump(value: object) -> str:
    if isinstance(value, list):
        value = [m.model_dump() for m in value]
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _merge_group(group: list[tuple[str, Record]], stats: MergeStats) -> Record:
    """One record from the records of one prompt (see :func:`merge_same_prompts`)."""
    _check_same_prompt(group)
    responses: list[Response] = []
    by_text: dict[str, str] = {}  # response text -> merged id
    comparisons: dict[str, Comparison] = {}  # JSON -> comparison: an ordered set
    ranks: list[dict[str, int] | None] = []  # per record that says anything about order
    implied: list[Comparison] = []  # the pairs of a rank given without comparisons
    for number, (_, record) in enumerate(group, start=1):
        ids = _map_responses(record, number, responses, by_text, stats)
        for c in record.comparisons:
            mapped = c.model_copy(update={"a": ids[c.a], "b": ids[c.b]})
            key = json.dumps(mapped.model_dump(), ensure_ascii=False, sort_keys=True)
            stats.same_comparisons += key in comparisons
            comparisons.setdefault(key, mapped)
        rank = {ids[rid]: r for rid, r in record.rank.items()} if record.rank else None
        if rank or record.comparisons:
            ranks.append(rank)
        if rank and not record.comparisons:
            implied += rank_comparisons(rank)
    out = group[0][1].model_copy(
        update={"responses": responses, "comparisons": list(comparisons.values()), "rank": None}
    )
    if ranks and all(rank is not None and rank == ranks[0] for rank in ranks):
        return out.model_copy(update={"rank": ranks[0]})  # every record ranks alike: nothing to resolve
    if all(rank is None for rank in ranks):
        return out  # comparisons only: resolved where they are used, as for any record
    stats.ranks_resolved += 1
    out = out.model_copy(update={"comparisons": [*out.comparisons, *implied]})
    return out.model_copy(update={"rank": resolve_record(out).rank})


def _map_responses(
    record: Record, number: int, responses: list[Response], by_text: dict[str, str], stats: MergeStats
) -> dict[str, str]:
    """Add ``record``'s responses to ``responses`` (the same text once); its id -> merged id."""
    known = dict(by_text)  # texts of earlier records only: two responses of one record stay two
    taken = {r.id for r in responses}
    ids: dict[str, str] = {}
    for response in record.responses:
        if response.content in known:
            ids[response.id] = known[response.content]
            stats.same_responses += 1
            continue
        new_id = response.id
        if new_id in taken:
            stats.renamed_responses += 1
            suffix = number
            while f"{response.id}-{suffix}" in taken:
                suffix += 1
            new_id = f"{response.id}-{suffix}"
        taken.add(new_id)
        ids[response.id] = new_id
        by_text.setdefault(response.content, new_id)
        responses.append(response if new_id == response.id else response.model_copy(update={"id": new_id}))
    return ids


def rank_comparisons(rank: dict[str, int]) -> list[Comparison]:
    """Every pair a rank orders (``a`` the better) and every pair it ties, as comparisons."""
    ranked = sorted(rank, key=rank.__getitem__)
    out = []
    for i, x in enumerate(ranked):
        for y in ranked[i + 1 :]:
            out.append(Comparison(a=x, b=y, label="tie" if rank[x] == rank[y] else "a", source="rank"))
    return out
