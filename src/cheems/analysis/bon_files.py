"""``cheems bon`` as one call: :func:`bon_files` reads a pool, picks its best responses (:func:`cheems.bon`) and
writes the picks, the counts and the curve together; :func:`print_bon` shows them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cheems.analysis.bon import BonResult, bon
from cheems.errors import InputError, Notify, unlisted
from cheems.evaluate.evaluation import ScoredBy
from cheems.evaluate.run_settings import BonSettings
from cheems.runtime import is_main_process

if TYPE_CHECKING:
    from rich.console import Console


def bon_files(
    pool: Path,
    output: Path,
    by: ScoredBy,
    settings: BonSettings | None = None,
    *,
    output_json: Path | None = None,
    plot: Path | None = None,
    skip_invalid: bool = False,
    on_skipped: Notify = unlisted,
    on_warnings: Notify = unlisted,
) -> BonResult | None:
    """Best-of-N over the records of ``pool``, scored ``by`` a scores file or a reward model, drawn as ``settings``
    say; the picks go to ``output`` (``{prompt_id, response_id, score}`` rows), the counts and the curve to
    ``output_json``, the curve's PNG to ``plot`` (which needs gold quality in the pool).

    Lines skipped with ``skip_invalid`` go to ``on_skipped``; the warnings of the pool and of the picks
    (:meth:`BonResult.warnings`) to ``on_warnings``, before any file is written. Under a launcher the ranks other
    than 0 score their share and return None; rank 0 writes.
    """
    from cheems.data.stream import read_records
    from cheems.outputs import claim_outputs

    drawn = settings or BonSettings()
    outputs = [("--output", output), ("--output-json", output_json), ("--plot", plot)]
    claim_outputs(inputs=[("POOL", pool), *by.inputs([])], files=outputs)
    read = read_records(pool, skip_invalid=skip_invalid)
    on_skipped(read.skipped)
    on_warnings(read.warnings)
    result = bon(read.records, by.scores_or_scorer(), **dict(drawn), source=by.source, cache=by.cache())
    if not is_main_process():  # under a launcher rank 0 writes the picks
        return None
    on_warnings(result.warnings(by.source))
    if plot is not None and not result.curve:
        raise InputError(
            "--plot needs gold quality in the pool", path=str(pool), hint="give records a rank or responses a score"
        )
    result.write(output, output_json, plot)
    return result


def print_bon(result: BonResult, output: Path, console: Console) -> None:
    """The picks written, the gold counts, and the curve as a table."""
    from rich.table import Table

    console.print(f"best-of-{result.n} ({result.sample}): {len(result.picks)} picks -> {output}")
    if not result.curve:
        console.print(f"no curve: no prompt has gold quality ({result.without_gold} without gold)")
        return
    gold = result.to_dict()["gold"]
    console.print(
        f"gold ({gold['kind']}) for {gold['prompts']} prompts; left out: {gold['without_gold']} without gold, "
        f"{gold['single_candidate']} with one candidate"
    )
    table = Table(title=f"best-of-n by {result.scorer}: mean quality and top-tier share")
    for col in ("n", "quality: pick", "oracle", "random", "top tier: pick", "oracle", "random"):
        table.add_column(col, justify="right")
    for point in result.curve:
        q, t = point["quality"], point["top_tier"]
        table.add_row(
            str(point["n"]),
            *(f"{q[k]:.3f}" for k in ("pick", "oracle", "random")),
            *(f"{t[k]:.3f}" for k in ("pick", "oracle", "random")),
        )
    console.print(table)
