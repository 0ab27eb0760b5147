"""``cheems judge`` as one call: :func:`judge_files` reads a records file, judges it and writes the judged records, the
failures list and the statistics together; :func:`print_judge_run` shows the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cheems.errors import Notify, unlisted
from cheems.judge.judge_settings import JudgeSettings
from cheems.judge.judging import JudgeResult
from cheems.llm.runs import ChatRun, print_budget_reached, request_rows, run_to_files, summary_table

if TYPE_CHECKING:
    from rich.console import Console


def judge_files(
    source: Path,
    output: Path,
    settings: JudgeSettings,
    *,
    stats_json: Path | None = None,
    skip_invalid: bool = False,
    progress: bool = True,
    on_skipped: Notify = unlisted,
) -> ChatRun[JudgeResult]:
    """Judge every response pair of the records in ``source`` (:func:`cheems.judge`) into ``output``; the questions
    without a verdict go to ``OUT.failures.jsonl``, the statistics to ``stats_json``.

    The API key is checked before any file is read; no output may replace an input or the cache. Lines skipped
    with ``skip_invalid`` are handed to ``on_skipped`` (the CLI lists them) before the judge is asked. An
    interrupted run leaves the outputs unchanged and its finished judgements in the cache: a rerun resumes.
    """
    from cheems.data.stream import read_records
    from cheems.judge.judgements import JudgeCache
    from cheems.judge.judging import judge_records

    settings.check_api_key()

    def run() -> JudgeResult:
        read = read_records(source, skip_invalid=skip_invalid)
        on_skipped(read.skipped)
        return judge_records(read.records, settings, progress=progress)

    inputs = [("IN", source), *settings.inputs()]
    return run_to_files(output, stats_json, inputs, JudgeCache(settings.cache).path, "judgements", run)


def print_judge_run(run: ChatRun[JudgeResult], console: Console) -> None:
    """The run as a table, then what to do about failures or a spent budget."""
    from cheems.judge.verdict import reason_text

    stats = run.result.stats
    rows = [
        ("questions (pair × shown order)", str(stats.pairs)),
        ("judged now", str(stats.judged)),
        ("from cache", str(stats.cached)),
        *request_rows(stats, reason_text),
        ("cost", f"{stats.cost:.4f}"),
    ]
    if sum(stats.shown_labels.values()):
        rows.append(("verdicts A / B / C (shown order)", " / ".join(str(stats.shown_labels[k]) for k in "ABC")))
        share = "-" if stats.a_share is None else f"{stats.a_share:.3f}"
        rows.append(("position bias: share of A among A/B", share))
    if stats.consistency is not None:
        c = stats.consistency
        rate = "-" if c["rate"] is None else f"{c['rate']:.3f}"
        rows.append(("both orders: consistent pairs", f"{c['consistent']} / {c['pairs']} ({rate})"))
    console.print(summary_table(f"judge: {stats.judge_model}", rows))
    if stats.pairs == 0:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(("nothing to ask", "yellow"), ": no record has two responses this judge has not compared yet")
        )
    console.print(f"wrote {run.output}")
    if run.failures is not None:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(
                (f"{stats.failed_total} question(s) without a verdict", "yellow"),
                f", listed in {run.failures} (rerun to retry connection failures; --retry-failed re-asks unparseable"
                " verdicts)",
            )
        )
    print_budget_reached(console, stats, "question(s)", "judgements")
