"""``cheems decontaminate``: training records whose prompt overlaps a bench prompt, dropped and listed.

Three kinds of overlap, checked in this order (the report names the first that holds):

- ``exact``: the same normalised prompt, system prompt and earlier turns included (one question under another
  system prompt is another prompt, as in ``dedup``);
- ``ngram``: a run of ``ngram`` normalised characters in common, such as a bench prompt quoted in a longer one
  (every bench prompt holding the run is checked, not only the first).
  GPT-3's contamination rule is 13 shared words; a Chinese word is about 1.5 characters, so 13 words are about
  20 characters. A bench prompt shorter than that overlaps only exactly or as a near duplicate, so a short prompt
  (写一首诗) inside many long ones drops none of them. The training prompt must also hold every number of the bench
  prompt: a template filled with other numbers shares its long wording, but is another question;
- ``near``: a MinHash near duplicate with the same numbers and system prompt (:mod:`cheems.prompts.minhash`);
- ``response`` (with ``--responses``): a response that copies a bench response, the same normalised text or
  ``ngram`` characters in common (no numbers rule: an answer's numbers are its own). Only responses of at least
  ``ngram`` normalised characters are compared, on either side: "？？？", "……" (nothing once normalised) or a
  one-letter answer is given by many and copies nothing.

The bench prompts are held (their n-grams as hashes, their signatures); the training records are read twice and
never held: once to decide, once to write those kept.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from cheems.data.io import ReadResult
from cheems.data.schema import Record
from cheems.data.stream import stream_records
from cheems.errors import InputError
from cheems.outputs import claim_outputs
from cheems.prompts.dedup import write_kept
from cheems.prompts.minhash import NearIndex, NearSettings, PromptKey, prompt_key
from cheems.prompts.textnorm import normalize
from cheems.settings import Cli

KINDS = ("exact", "ngram", "near", "response")
Answers = tuple[tuple[str, str], ...]
"""(response id, normalised text) of a record's responses: what ``--responses`` compares."""


class DecontaminateSettings(NearSettings):
    """What overlaps a bench prompt (``cheems decontaminate``)."""

    ngram: int = Field(
        20, ge=5, le=1000, description="Characters in common (normalised) that make a training prompt overlap."
    )
    responses: Annotated[bool, Cli(flag=True)] = Field(
        False,
        description="Also drop a record with a response that copies a bench response (the same normalised text, or "
        "--ngram characters in common).",
    )


def record_key(shingle: int, responses: int, record: Record) -> tuple[PromptKey, Answers]:
    """A record's prompt key and its normalised responses of at least ``responses`` characters (none when 0; runs in
    the data workers)."""
    answers = tuple((r.id, normalize(r.content)) for r in record.responses) if responses else ()
    return prompt_key(shingle, record), tuple((rid, text) for rid, text in answers if len(text) >= responses)


def _answer_length(settings: DecontaminateSettings) -> int:
    """The shortest normalised response compared with ``--responses`` (0: responses are not compared)."""
    return settings.ngram if settings.responses else 0


def _grams(text: str, n: int) -> Iterator[str]:
    return (text[i : i + n] for i in range(len(text) - n + 1))


@dataclass
class BenchIndex:
    """The bench prompts, as :func:`overlap` looks them up."""

    settings: DecontaminateSettings
    ids: list[str] = field(default_factory=list)
    numbers: list[frozenset[str]] = field(default_factory=list)
    exact: dict[bytes, int] = field(default_factory=dict)
    # hash of (an n-gram, an anchor) -> the bench number holding it, or the numbers of every one that does (this
    # process's hash). The anchor is the bench prompt's smallest number ("" without one): a training prompt must
    # hold every number of the bench prompt, so it looks up only its own numbers' anchors, and a template filled
    # with many numbers is not compared with every bench prompt of that template.
    grams: dict[int, int | list[int]] = field(default_factory=dict)
    near: NearIndex | None = None
    # with --responses: a bench response's text, and its n-grams -> (bench number, response id)
    answer_texts: dict[str, tuple[int, str]] = field(default_factory=dict)
    answer_grams: dict[int, tuple[int, str]] = field(default_factory=dict)

    def add(self, key: PromptKey, answers: Answers = ()) -> None:
        """Add a bench prompt and its responses (a repeated one keeps its first record)."""
        if self.near is None:
            self.near = NearIndex(self.settings.threshold)
        number = self.near.add(key)
        self.ids.append(key.id)
        self.numbers.append(frozenset(key.numbers))
        self.exact.setdefault(key.exact, number)
        anchor = min(key.numbers, default="")
        for h in {hash((gram, anchor)) for gram in _grams(key.text, self.settings.ngram)}:
            there = self.grams.get(h)
            if there is None:
                self.grams[h] = number
            elif isinstance(there, list):
                there.append(number)
            else:
                self.grams[h] = [there, number]
        for rid, text in answers:
            self.answer_texts.setdefault(text, (number, rid))
            for gram in _grams(text, self.settings.ngram):
                self.answer_grams.setdefault(hash(gram), (number, rid))

    def overlap(self, key: PromptKey, answers: Answers = ()) -> dict[str, Any] | None:
        """How a training record overlaps the bench (the report's entry without the training id), or None."""
        if key.exact in self.exact:
            return {"bench_id": self.ids[self.exact[key.exact]], "overlap": "exact"}
        numbers = set(key.numbers)
        anchors = ["", *sorted(numbers)]
        for gram in _grams(key.text, self.settings.ngram):
            held = [self.grams.get(hash((gram, anchor))) for anchor in anchors]
            found = [n for there in held if there is not None for n in (there if isinstance(there, list) else (there,))]
            if hits := [n for n in found if self.numbers[n] <= numbers]:
                return {"bench_id": self.ids[min(hits)], "overlap": "ngram", "shared": gram}
        match = self.near.match(key) if self.near is not None else None
        if match is not None:
            return {"bench_id": self.ids[match[0]], "overlap": "near", "similarity": match[1]}
        return self._copied(answers)

    def _copied(self, answers: Answers) -> dict[str, Any] | None:
        """The first response that copies a bench response, as a report entry, or None."""
        for rid, text in answers:
            found, shared = self.answer_texts.get(text), None
            for gram in () if found else _grams(text, self.settings.ngram):
                if (found := self.answer_grams.get(hash(gram))) is not None:
                    shared = gram
                    break
            if found is not None:
                number, bench_rid = found
                entry = {"bench_id": self.ids[number], "overlap": "response", "response_id": rid}
                return {**entry, "bench_response_id": bench_rid, **({"shared": shared} if shared else {})}
        return None


@dataclass
class DecontaminateResult:
    """What :func:`decontaminate_files` did: the counts and every record dropped."""

    records: int = 0
    bench_records: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)
    issues: ReadResult = field(default_factory=ReadResult)

    @property
    def kept(self) -> int:
        """Records written."""
        return self.records - len(self.dropped)

    @property
    def by_overlap(self) -> dict[str, int]:
        """Records dropped, by the kind of overlap."""
        kinds = [d["overlap"] for d in self.dropped]
        return {kind: kinds.count(kind) for kind in KINDS}

    def report(self, settings: DecontaminateSettings, bench: list[str]) -> dict[str, Any]:
        """The JSON report (docs/formats.md)."""
        return {
            "records": self.records,
            "kept": self.kept,
            "dropped": len(self.dropped),
            "by_overlap": self.by_overlap,
            "bench_files": bench,
            "bench_records": self.bench_records,
            "skipped_lines": len(self.issues.skipped),
            "settings": settings.model_dump(),
            "dropped_records": self.dropped,
        }


def bench_index(
    bench: Iterable[str | Path], settings: DecontaminateSettings, *, workers: int | None = None
) -> BenchIndex:
    """The bench files' prompts, indexed for :meth:`BenchIndex.overlap` (bench ids are unique across the files)."""
    index = BenchIndex(settings)
    keys = functools.partial(record_key, settings.shingle, _answer_length(settings))
    bench_records = stream_records(list(bench), keys, workers=workers, progress="decontaminate: bench", prompts=True)
    for key, answers in bench_records:
        index.add(key, answers)
    return index


def bench_overlaps(
    records: Iterable[Record], bench: Iterable[str | Path], settings: DecontaminateSettings | None = None
) -> list[dict[str, Any]]:
    """The records whose prompt overlaps a prompt of the ``bench`` files, as ``decontaminate``'s report lists them
    (``cheems train --eval-bench`` refuses such training data)."""
    settings = settings or DecontaminateSettings()
    index = bench_index(bench, settings, workers=1)
    found = []
    for record in records:
        key = prompt_key(settings.shingle, record)
        if (overlap := index.overlap(key)) is not None:
            found.append({"id": key.id, **overlap})
    return found


def decontaminate_files(
    source: str | Path,
    bench: Iterable[str | Path],
    output: str | Path,
    report: str | Path | None = None,
    settings: DecontaminateSettings | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> DecontaminateResult:
    """Write the records of ``source`` whose prompt overlaps no prompt of the ``bench`` files to ``output`` (and the
    report to ``report``; both files or neither), as ``cheems decontaminate``. The outputs are claimed first
    (:func:`cheems.outputs.claim_outputs`): never ``source`` nor a bench file."""
    claim_outputs(
        inputs=[("IN", source), *(("--bench", b) for b in bench)], files=[("--output", output), ("--report", report)]
    )
    settings = settings or DecontaminateSettings()
    bench_files = [str(b) for b in bench]
    for b in bench_files:
        if os.path.exists(b) and os.path.exists(source) and os.path.samefile(b, source):
            raise InputError(
                f"{b} is the training file itself", path="--bench", hint="give the bench the training data must avoid"
            )
    index = bench_index(bench_files, settings, workers=workers)
    result = DecontaminateResult(bench_records=len(index.ids))
    dropped = bytearray()
    keys = functools.partial(record_key, settings.shingle, _answer_length(settings))
    options: dict[str, Any] = {"skip_invalid": skip_invalid, "workers": workers, "prompts": True}
    checking = stream_records(source, keys, progress="decontaminate", log_progress=True, **options)
    for key, answers in checking:
        result.records += 1
        found = index.overlap(key, answers)
        dropped.append(found is not None)
        if found is not None:
            result.dropped.append({"id": key.id, **found})
    report_of = functools.partial(result.report, settings, bench_files)
    write_kept(source, dropped, output, report, report_of, result.issues, skip_invalid, workers, unique_ids=True)
    return result
