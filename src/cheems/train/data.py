"""Training data: the records of the ``--data`` files (merged across files), turned into prompt groups
with every forwarded response encoded once, and a summary of what was kept, cut and dropped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from cheems.data.schema import Record
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.models.encoding import Features, RewardEncoder
from cheems.ranking import MergeStats, merge_same_prompts, training_pairs
from cheems.train.batching import Item, PromptGroup


@dataclass
class DataSummary:
    """What the training set turned into (logged and written to metrics.json)."""

    records: int = 0
    prompts_with_pairs: int = 0
    responses: int = 0
    pairs: int = 0
    truncated: int = 0
    """Responses whose (prompt, response) was cut to the length limit (policy ``left_prompt``)."""
    response_truncated: int = 0
    """Of those, responses too long even alone (they lose tokens of their own)."""
    dropped: int = 0
    """Responses left out for being too long (policy ``drop``)."""
    dropped_pairs: int = 0
    max_length: int = 0
    """The length limit applied: ``max_length`` capped by the model's position table."""

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    def describe(self) -> str:
        """The one line the trainer prints about its data."""
        return (
            f"training data: {self.records} records, {self.prompts_with_pairs} prompts with pairs, "
            f"{self.responses} responses, {self.pairs} pairs; truncated {self.truncated} (response end cut in "
            f"{self.response_truncated}), dropped {self.dropped} over {self.max_length} tokens "
            f"({self.dropped_pairs} pairs lost)"
        )


@dataclass
class TrainingSet:
    """The prompt groups to batch, the encoded input of each forwarded response, and the summary."""

    groups: list[PromptGroup]
    features: dict[Item, Features]
    summary: DataSummary


def read_training_records(paths: list[str]) -> tuple[list[Record], MergeStats]:
    """The records of every training file, a prompt found in several files merged into one record.

    Within one file a prompt id given twice is still an error (:func:`read_records`).
    """
    return merge_same_prompts([(path, read_records(path).records) for path in paths])


def training_digest(records: list[Record]) -> str:
    """sha256 (hex) of the training records as read: a resumed run checks it trained on the same data."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(record.model_dump_json().encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def describe_merge(merged: MergeStats) -> str | None:
    """The line to print about prompts merged across files; None when none were."""
    if not merged.prompts_merged:
        return None
    return (
        f"merged {merged.prompts_merged} prompts found in several --data files ({merged.records_in} records -> "
        f"{merged.records_out}; {merged.same_responses} responses with the same text and {merged.same_comparisons} "
        f"repeated comparisons kept once; ranks of {merged.ranks_resolved} prompts resolved again)"
    )


def build_training_set(records: list[Record], encoder: RewardEncoder, truncation: str) -> TrainingSet:
    """Prompt groups from :func:`training_pairs`, every forwarded response tokenized once.

    ``truncation="drop"`` leaves out responses whose (prompt, response) exceeds the limit,
    together with their pairs; ``left_prompt`` keeps them as the scorer cuts them (the prompt
    first). Both are counted in the summary.
    """
    summary = DataSummary(records=len(records), max_length=encoder.limit)
    wanted: list[tuple[int, list[tuple[str, str]], list[str]]] = []
    items: list[tuple[Any, str]] = []
    for index, record in enumerate(records):
        pairs = training_pairs(record)
        if not pairs:
            continue
        needed = list(dict.fromkeys(rid for pair in pairs for rid in pair))
        wanted.append((index, pairs, needed))
        items.extend((record.prompt, record.response(rid).content) for rid in needed)
    encoded = iter(encoder.encode(items))
    groups: list[PromptGroup] = []
    features: dict[Item, Features] = {}
    for index, pairs, needed in wanted:
        kept_ids: dict[str, Features] = {}
        for rid in needed:
            enc = next(encoded)
            if enc.full_length > encoder.limit:
                if truncation == "drop":
                    summary.dropped += 1
                    continue
                summary.truncated += 1
                summary.response_truncated += enc.response_too_long
            kept_ids[rid] = enc.features
        kept = [(w, l) for w, l in pairs if w in kept_ids and l in kept_ids]
        summary.dropped_pairs += len(pairs) - len(kept)
        if not kept:
            continue
        group = PromptGroup.from_pairs(index, kept, [r.id for r in records[index].responses])
        groups.append(group)
        for rid in group.responses:
            features[index, rid] = kept_ids[rid]
        summary.prompts_with_pairs += 1
        summary.responses += len(group.responses)
        summary.pairs += len(kept)
    return TrainingSet(groups, features, summary)


def check_training_set(data: TrainingSet, paths: list[str]) -> None:
    """Raise InputError when nothing is left to train on (saying whether truncation dropped it all)."""
    s = data.summary
    if not data.groups and s.dropped:
        raise InputError(
            f"truncation 'drop' left out {s.dropped} responses over {s.max_length} tokens and with them every pair",
            path=", ".join(paths),
            field="max_length",
            hint="raise max_length or use truncation: left_prompt",
        )
    if not data.groups:
        raise InputError(
            "the training files give no (chosen, rejected) pair",
            path=", ".join(paths),
            hint="records need 'rank' or non-tie 'comparisons'",
        )
