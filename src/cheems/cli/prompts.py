"""``cheems dedup`` and ``cheems decontaminate``: the prompt pool without duplicates and without bench prompts.

Registered in :mod:`cheems.cli.main`; the runs are :func:`cheems.prompts.dedup.dedup_files` and
:func:`cheems.prompts.decontaminate.decontaminate_files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console, report_skipped
from cheems.cli.options import SkipInvalid, Workers, settings_options
from cheems.prompts.decontaminate import DecontaminateSettings
from cheems.prompts.minhash import NearSettings
from cheems.settings import settings_of

Output = Annotated[Path, typer.Option("--output", "-o", help="Output JSONL file (the records kept).")]
Report = Annotated[
    Optional[Path], typer.Option("--report", help="Write the JSON report here (every record dropped, and why).")
]


@settings_options(
    NearSettings, "output", "report", "threshold", "shingle", "skip_invalid", "workers", show_defaults=True
)
def dedup(
    *,
    sources: Annotated[
        list[Path], typer.Argument(metavar="IN...", help="Record files; of duplicates the first read is kept.")
    ],
    output: Output,
    report: Report = None,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Drop duplicate prompts, exact (after normalisation) or near (MinHash), within and across files."""
    from cheems.prompts.dedup import dedup_files

    cfg = settings_of(NearSettings, settings)
    result = dedup_files(sources, output, report, cfg, skip_invalid=skip_invalid, workers=workers)
    report_skipped(result.issues.skipped)
    console.print(
        f"{result.records} records: kept {result.kept}, dropped {result.exact} exact and {result.near} near "
        f"duplicates in {len(result.clusters)} clusters -> {output}"
    )


@settings_options(
    DecontaminateSettings,
    *("bench", "output", "report", "ngram", "responses", "threshold", "shingle", "skip_invalid", "workers"),
    show_defaults=True,
)
def decontaminate(
    *,
    source: Annotated[Path, typer.Argument(metavar="IN", help="Training records.")],
    bench: Annotated[list[Path], typer.Option("--bench", help="Bench file(s) the training prompts must stay out of.")],
    output: Output,
    report: Report = None,
    skip_invalid: SkipInvalid = False,
    workers: Workers = None,
    settings: dict[str, Any],
) -> None:
    """Drop training records whose prompt overlaps a bench prompt (exact, a long shared n-gram, or near), and with
    --responses those whose response copies a bench response."""
    from cheems.prompts.decontaminate import decontaminate_files

    cfg = settings_of(DecontaminateSettings, settings)
    result = decontaminate_files(source, bench, output, report, cfg, skip_invalid=skip_invalid, workers=workers)
    report_skipped(result.issues.skipped)
    kinds = ", ".join(f"{n} {kind}" for kind, n in result.by_overlap.items() if kind != "response" or cfg.responses)
    console.print(
        f"{result.records} records: kept {result.kept}, dropped {len(result.dropped)} overlapping "
        f"{result.bench_records} bench prompts ({kinds}) -> {output}"
    )
