"""``cheems compare D1.jsonl D2.jsonl``: is one scorer better than another on the same bench, and is it significant?

Registered in :mod:`cheems.cli.main` as ``app.command()(compare)``. The statistics live in
:func:`cheems.compare` (:func:`cheems.evaluate.significance.compare_details`); this module parses and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from cheems.cli.console import console
from cheems.cli.options import settings_of, settings_options
from cheems.evaluate.run_settings import CompareSettings

if TYPE_CHECKING:  # imported when run: numpy and scipy load only for this command
    from rich.console import Console

    from cheems.evaluate.significance import Comparison, Difference


@settings_options(CompareSettings, "resamples", "seed", "level", "output_json", show_defaults=True)
def compare(
    *,
    first: Annotated[Path, typer.Argument(metavar="D1", help="Details file of scorer A (cheems eval --details).")],
    second: Annotated[Path, typer.Argument(metavar="D2", help="Details file of scorer B, on the same bench.")],
    output_json: Annotated[Optional[Path], typer.Option("--output-json", help="Write the comparison as JSON.")] = None,
    settings: dict,
) -> None:
    """Paired difference of two scorers on one bench: A - B with bootstrap CI and p-value, and McNemar's test."""
    from cheems.data.io import write_json
    from cheems.evaluate.evaluation import compare as compare_runs
    from cheems.outputs import claim_outputs

    test = settings_of(CompareSettings, settings)
    claim_outputs(inputs=[("D1", first), ("D2", second)], files=[("--output-json", output_json)])
    result = compare_runs(first, second, **dict(test))
    print_comparison(result, console)
    if output_json:
        write_json(output_json, result.to_dict())


def _names(result: Comparison) -> tuple[str, str]:
    """The scorers' names, or the files' when both runs name the same scorer, a path by its last parts
    (escaped for rich markup)."""
    from rich.markup import escape

    from cheems.evaluate.leaderboard import short_names

    a, b = result.a, result.b
    names = short_names((a.scorer, b.scorer) if a.scorer != b.scorer else (a.path, b.path))
    return escape(names[0]), escape(names[1])


_METRICS = {"accuracy": "acc", "exact_match": "exact"}


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def print_comparison(result: Comparison, console: Console) -> None:
    """The table of differences, McNemar's test, and one sentence on the overall score."""
    from rich import box
    from rich.table import Table

    from cheems.evaluate.report import OVERALL
    from cheems.evaluate.report_html import compact_interval

    name_a, name_b = _names(result)
    alpha = 1 - result.level
    # fits an 80-column terminal: no vertical rules, short labels, the interval to two places; a cell
    # wraps at its spaces (a long name folds), nothing is cut
    table = Table(
        title=f"A = {name_a}   vs   B = {name_b}", caption=OVERALL, box=box.SIMPLE_HEAVY, collapse_padding=True
    )
    for col in ("subset", "metric", "A", "B", "A - B", f"{result.level * 100:g}% CI", "p", "verdict"):
        left = col in ("subset", "metric", "verdict")
        table.add_column(col, justify="left" if left else "right", overflow="fold")
    rows = [(name, metric, d) for name, diffs in result.subsets.items() for metric, d in diffs.items()]
    for i, (subset, metric, d) in enumerate([*rows, ("overall", "", result.overall)]):
        verdict = _verdict(d, alpha, name_a, name_b)
        table.add_row(
            f"[bold]{subset}[/]" if subset == "overall" else subset,
            _METRICS.get(metric, metric),
            f"{d.a:.3f}",
            f"{d.b:.3f}",
            f"{d.delta:+.3f}",
            compact_interval(*d.ci, signed=True),
            _p(d.p_value),
            verdict,
            end_section=i == len(rows) - 1,
        )
    console.print(table)
    m = result.mcnemar
    console.print(
        f"McNemar on {m.pairs} pooled pairs: A right and B wrong {m.b}, B right and A wrong {m.c}; "
        f"exact p = {_p(m.exact_p)}, chi-square (continuity corrected) = {m.chi2:.2f}, p = {_p(m.chi2_p)}",
        soft_wrap=True,
        highlight=False,
    )
    d, at = result.overall, f"at the {alpha * 100:g}% level"
    if d.delta == 0 or d.p_value >= alpha:
        sentence = f"overall: no significant difference {at}: A - B = {d.delta:+.3f}"
    else:
        better, worse = (name_a, name_b) if d.delta > 0 else (name_b, name_a)
        sentence = f"overall: {better} is better than {worse} by {abs(d.delta):.3f}, significant {at}"
    console.print(
        f"{sentence} (paired bootstrap over prompts, {result.resamples} resamples, seed {result.seed}, "
        f"p = {_p(d.p_value)})",
        soft_wrap=True,
        highlight=False,
    )


def _verdict(d: Difference, alpha: float, name_a: str, name_b: str) -> str:
    if d.delta == 0 or d.p_value >= alpha:
        return "not significant"
    return f"[green]{name_a if d.delta > 0 else name_b} better[/]"
