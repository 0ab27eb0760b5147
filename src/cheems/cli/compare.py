"""``cheems compare D1 D2``: is one scorer better than another on one bench (:func:`cheems.compare`)?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console
from cheems.cli.options import settings_options
from cheems.evaluate.run_settings import CompareSettings
from cheems.settings import settings_of


@settings_options(CompareSettings, "resamples", "seed", "level", "output_json", show_defaults=True)
def compare(
    *,
    first: Annotated[Path, typer.Argument(metavar="D1", help="Details file of scorer A (cheems eval --details).")],
    second: Annotated[Path, typer.Argument(metavar="D2", help="Details file of scorer B, on the same bench.")],
    output_json: Annotated[Optional[Path], typer.Option("--output-json", help="Write the comparison as JSON.")] = None,
    settings: dict[str, Any],
) -> None:
    """Paired difference of two scorers on one bench: A - B with bootstrap CI and p-value, and McNemar's test."""
    from cheems.analysis.compare import compare as compare_runs
    from cheems.analysis.compare import print_comparison
    from cheems.data.io import write_json
    from cheems.outputs import claim_outputs

    test = settings_of(CompareSettings, settings)
    claim_outputs(inputs=[("D1", first), ("D2", second)], files=[("--output-json", output_json)])
    result = compare_runs(first, second, **dict(test))
    print_comparison(result, console)
    if output_json:
        write_json(output_json, result.to_dict())
