"""Details files: every judged pair of an evaluation, one prompt per JSONL row.

``cheems eval --details D.jsonl`` writes them; ``cheems compare`` pairs two of them and
``cheems analyze bias`` reads a judge's. A row::

    {"bench": SHA256, "scorer": NAME, "subset": "open", "prompt_id": "p1", "category": "代码",
     "pairs": [{"chosen": "r1", "rejected": "r2", "correct": true,
                "chosen_chars": 12, "rejected_chars": 40,
                "chosen_score": 1.5, "rejected_score": 0.2,                      # a scorer's
                "verdicts": [{"first": "r2", "verdict": "B", "winner": "r1"}]}]}  # a judge's

A run under ``--compat upstream`` marks each row ``"compat": "upstream"`` (strict rows have no such key) and writes
every prompt, those without a ranked pair too (``"pairs": []``): upstream's exact match counts them, so ``cheems
compare`` recomputes the evaluation's own numbers from the file.

``bench`` fingerprints the bench (prompt ids, ranks, response texts), so two details files can be
compared only when they were made on the same bench. A verdict's ``winner`` is a response id,
``"tie"``, or null when no verdict could be parsed (``failure`` then names why).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

from cheems.data.io import load_rows, validation_error, write_jsonl
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.metrics.compat import Compat
from cheems.metrics.outcomes import PairOutcome, PromptOutcome, ShownVerdict
from cheems.outputs import out_of_room


def bench_fingerprint(bench: dict[str, list[Record]]) -> str:
    """sha256 of what decides a bench's outcomes: subsets, prompts, categories, ranked pairs and texts."""
    spool = FingerprintSpool()
    for name, records in bench.items():
        for r in records:
            spool.add(name, fingerprint_entry(r))
    return spool.hexdigest()


def fingerprint_entry(r: Record) -> str:
    """A record's part of :func:`bench_fingerprint` (JSON, without its subset's name)."""
    return json.dumps(
        [r.id, r.main_category, r.ranked_pairs(), [[x.id, x.content] for x in r.responses]],
        ensure_ascii=False,
        separators=(",", ":"),
    )


class FingerprintSpool:
    """:func:`bench_fingerprint` of records that stream by: each subset's entries wait in a temporary file and
    are hashed in name order at the end. The hash is ``content_hash`` of the list of ``[subset, *entry]``, whose
    compact JSON is ``[`` + the entries joined by ``,`` + ``]``."""

    def __init__(self) -> None:
        self.files: dict[str, IO[bytes]] = {}

    def add(self, name: str, entry: str) -> None:
        """One record's :func:`fingerprint_entry` in subset ``name``."""
        try:
            f = self.files.get(name) or self.files.setdefault(name, tempfile.TemporaryFile())
            f.write(("," + "[" + json.dumps(name, ensure_ascii=False) + "," + entry[1:]).encode("utf-8"))
        except OSError as e:  # a full temporary folder or `ulimit -f`: one line, not a bare "File too large"
            what, hint = "cannot write the bench's fingerprint to a temporary file", "free space, or set TMPDIR"
            if line := out_of_room(e, tempfile.gettempdir(), what, hint):
                raise line from None
            raise

    def hexdigest(self) -> str:
        digest = hashlib.sha256(b"[")
        for i, name in enumerate(sorted(self.files)):
            f = self.files[name]
            f.seek(1 if i == 0 else 0)  # the first entry has no comma before it
            while block := f.read(1 << 20):
                digest.update(block)
            f.close()
        digest.update(b"]")
        return digest.hexdigest()


class _Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    first: StrictStr
    verdict: Literal["A", "B", "C"] | None
    winner: StrictStr | None
    failure: StrictStr | None = None


class _Pair(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chosen: StrictStr
    rejected: StrictStr
    correct: StrictBool
    chosen_chars: int
    rejected_chars: int
    chosen_score: float | None = None
    rejected_score: float | None = None
    verdicts: list[_Verdict] | None = None


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bench: StrictStr
    scorer: StrictStr
    subset: StrictStr
    prompt_id: StrictStr
    category: StrictStr
    pairs: list[_Pair]
    compat: Literal["strict", "upstream"] = "strict"


@dataclass
class Details:
    """A details file read back: who scored, which bench, every subset's judged pairs, and the rules the run's
    numbers follow (``compat``: its prompts without a ranked pair are there too under upstream)."""

    path: str
    scorer: str
    bench: str
    outcomes: dict[str, list[PromptOutcome]]
    compat: Compat = "strict"


def _pair_row(p: PairOutcome) -> dict[str, Any]:
    row: dict[str, Any] = {
        "chosen": p.chosen,
        "rejected": p.rejected,
        "correct": p.correct,
        "chosen_chars": p.chosen_chars,
        "rejected_chars": p.rejected_chars,
    }
    if p.chosen_score is not None:
        row["chosen_score"], row["rejected_score"] = p.chosen_score, p.rejected_score
    if p.verdicts is not None:
        row["verdicts"] = [
            {
                "first": v.first,
                "verdict": v.label,
                "winner": p.picked(v),
                **({"failure": v.failure} if v.failure else {}),
            }
            for v in p.verdicts
        ]
    return row


def write_details(
    path: str | Path,
    outcomes: Mapping[str, Sequence[PromptOutcome]],
    scorer: str,
    bench: str,
    compat: Compat = "strict",
) -> int:
    """Write every prompt with at least one judged pair (under ``compat="upstream"`` every prompt, each row
    marked with its rules); returns the number of rows."""
    marked = {"compat": compat} if compat != "strict" else {}
    rows = (
        {
            "bench": bench,
            "scorer": scorer,
            "subset": subset,
            "prompt_id": o.prompt_id,
            "category": o.category,
            "pairs": [_pair_row(p) for p in o.pairs],
        }
        | marked
        for subset, prompts in outcomes.items()
        for o in prompts
        if o.pairs or marked
    )
    return write_jsonl(path, rows)


def _outcome(row: _Row) -> PromptOutcome:
    pairs = [
        PairOutcome(
            p.chosen,
            p.rejected,
            p.correct,
            p.chosen_chars,
            p.rejected_chars,
            chosen_score=p.chosen_score,
            rejected_score=p.rejected_score,
            verdicts=None if p.verdicts is None else [ShownVerdict(v.first, v.verdict, v.failure) for v in p.verdicts],
        )
        for p in row.pairs
    ]
    return PromptOutcome(row.prompt_id, row.category, pairs)


def read_details(path: str | Path) -> Details:
    """Read a details file; every row must come from one scorer on one bench (errors name file and line)."""
    source = str(path)
    first: _Row | None = None
    outcomes: dict[str, list[PromptOutcome]] = {}
    seen: set[tuple[str, str]] = set()
    for line, obj in load_rows(path):
        try:
            row = _Row.model_validate(obj)
        except ValidationError as e:
            raise validation_error(e, source, line).located(source, line) from None
        first = first or row
        for key, mine, theirs in (
            ("bench", row.bench, first.bench),
            ("scorer", row.scorer, first.scorer),
            ("compat", row.compat, first.compat),
        ):
            if mine != theirs:
                raise InputError(
                    f"this row's {key} is '{mine}', the first row's '{theirs}'",
                    path=source,
                    line=line,
                    field=key,
                    hint="a details file holds one run of one scorer on one bench; write it again with --details",
                )
        if (row.subset, row.prompt_id) in seen:
            raise InputError(
                f"prompt '{row.prompt_id}' of subset '{row.subset}' appears twice",
                path=source,
                line=line,
                field="prompt_id",
                hint="keep one row per prompt",
            )
        seen.add((row.subset, row.prompt_id))
        outcomes.setdefault(row.subset, []).append(_outcome(row))
    assert first is not None  # load_rows refuses an empty file
    return Details(source, first.scorer, first.bench, outcomes, first.compat)
