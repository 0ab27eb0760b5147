"""``cheems dedup``: one prompt of each group of duplicates, exact or near, within and across files.

Records are read twice and never held: the first pass keeps, per prompt kept, the hash of its normalised text and
its MinHash signature (a few hundred bytes), and decides; the second writes the records kept, in input order.
Of each cluster the first record is kept; every other one is in the report with its similarity to it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cheems.data.io import ReadResult, id_places, record_line, write_lines_and_report
from cheems.data.stream import stream_records
from cheems.errors import InputError
from cheems.outputs import claim_outputs
from cheems.prompts.minhash import NearIndex, NearSettings, prompt_key


@dataclass
class DedupResult:
    """What :func:`dedup_files` did: the counts, and the clusters as the report lists them."""

    records: int = 0
    exact: int = 0
    near: int = 0
    clusters: dict[int, dict[str, Any]] = field(default_factory=dict)  # by the kept record's number in the index
    issues: ReadResult = field(default_factory=ReadResult)

    @property
    def dropped(self) -> int:
        """Records dropped as duplicates."""
        return self.exact + self.near

    @property
    def kept(self) -> int:
        """Records written."""
        return self.records - self.dropped

    def report(self, settings: NearSettings) -> dict[str, Any]:
        """The JSON report (docs/formats.md): counts, settings, and every cluster in the kept records' order."""
        return {
            "records": self.records,
            "kept": self.kept,
            "dropped": self.dropped,
            "exact_duplicates": self.exact,
            "near_duplicates": self.near,
            "skipped_lines": len(self.issues.skipped),
            "settings": settings.model_dump(),
            "clusters": [self.clusters[k] for k in sorted(self.clusters)],
        }


def _id_clash(rid: str, sources: list[str | Path]) -> InputError:
    """Two different prompts with one id: the error is at the second one and names the first (file:line, the
    files read again for them)."""
    places = id_places(sources, rid)
    first, (path, line) = (places[0], places[1].rsplit(":", 1)) if len(places) == 2 else ("", ("IN", None))
    return InputError(
        f"two different prompts have the id '{rid}'" + (f" (first at {first})" if first else ""),
        path=path,
        line=None if line is None else int(line),
        field="id",
        hint="give every prompt its own id (a repeated prompt may repeat its id: it is dropped)",
    )


def find_duplicates(
    sources: Iterable[str | Path],
    settings: NearSettings,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> tuple[DedupResult, bytearray]:
    """The first pass: the clusters, and a flag per record read (1: dropped)."""
    sources = list(sources)
    result = DedupResult()
    dropped = bytearray()
    first: dict[bytes, int] = {}  # normalised-text hash -> the kept record's number in the index
    index = NearIndex(settings.threshold)
    kept_ids: list[str] = []
    kept_set: set[str] = set()  # a dropped prompt may repeat a kept one's id (without ids, the same text is one id)
    keys = stream_records(
        list(sources),
        functools.partial(prompt_key, settings.shingle),
        skip_invalid=skip_invalid,
        workers=workers,
        progress="dedup",
        unique_ids=False,
        prompts=True,
        log_progress=True,
    )
    for key in keys:
        result.records += 1
        if key.exact in first:
            kept, sim, kind = first[key.exact], 1.0, "exact"
            result.exact += 1
        elif (near := index.match(key)) is not None:
            (kept, sim), kind = near, "near"
            result.near += 1
        else:
            if key.id in kept_set:
                raise _id_clash(key.id, sources)
            first[key.exact] = index.add(key)
            kept_ids.append(key.id)
            kept_set.add(key.id)
            dropped.append(0)
            continue
        dropped.append(1)
        cluster = result.clusters.setdefault(kept, {"kept": kept_ids[kept], "dropped": []})
        cluster["dropped"].append({"id": key.id, "similarity": sim, "kind": kind})
    return result, dropped


def write_kept(
    sources: str | Path | list[str | Path],
    dropped: bytearray,
    output: str | Path,
    report_path: str | Path | None,
    report: Callable[[], Any],
    issues: ReadResult,
    skip_invalid: bool,
    workers: int | None,
    unique_ids: bool,
) -> None:
    """The second pass of ``dedup`` and ``decontaminate``: the records of ``sources`` not flagged in ``dropped`` (one
    flag per record, in input order) to ``output``, and the ``report()`` to ``report_path``: both files or neither.
    ``skip_invalid`` and ``unique_ids`` are the first pass's, so that the same lines are skipped."""
    lines = stream_records(
        sources,
        record_line,
        skip_invalid=skip_invalid,
        issues=issues,
        workers=workers,
        progress="writing",
        unique_ids=unique_ids,
        prompts=True,
    )
    kept = (line for line, out in zip(lines, dropped) if not out)
    write_lines_and_report(output, kept, report_path, report)


def dedup_files(
    sources: Iterable[str | Path],
    output: str | Path,
    report: str | Path | None = None,
    settings: NearSettings | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> DedupResult:
    """Write the records of ``sources`` without duplicates to ``output`` (and the report to ``report``; both files or
    neither), as ``cheems dedup``. Records in = kept + dropped (+ lines skipped with ``skip_invalid``). The outputs are
    claimed first (:func:`cheems.outputs.claim_outputs`): never one of ``sources``."""
    sources = list(sources)
    claim_outputs(inputs=[("IN", s) for s in sources], files=[("--output", output), ("--report", report)])
    settings = settings or NearSettings()
    result, dropped = find_duplicates(sources, settings, skip_invalid=skip_invalid, workers=workers)
    report_of = functools.partial(result.report, settings)
    write_kept(sources, dropped, output, report, report_of, result.issues, skip_invalid, workers, unique_ids=False)
    return result
