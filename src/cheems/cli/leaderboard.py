"""``cheems leaderboard``: eval JSONs side by side, best overall first (Tables 2 and 3; :func:`cheems.leaderboard`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cheems.cli.console import console
from cheems.cli.options import settings_options
from cheems.evaluate.run_settings import LeaderboardSettings
from cheems.settings import settings_of


@settings_options(LeaderboardSettings, "name", "output", "title", show_defaults=True)
def leaderboard(
    *,
    files: Annotated[
        list[Path], typer.Argument(metavar="J.json...", help="Outputs of cheems eval --output-json, one per row.")
    ],
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Also write the leaderboard: board.md or board.html.")
    ] = None,
    settings: dict[str, Any],
) -> None:
    """Rank evaluations (reward models, judges, or RMs trained on different datasets) on one bench."""
    from cheems.analysis.leaderboard import board_format, board_table, load_leaderboard, write_board
    from cheems.outputs import claim_outputs

    board_format(output)  # a bad suffix fails before anything is read
    cfg = settings_of(LeaderboardSettings, settings)
    claim_outputs(inputs=[("J.json", f) for f in files], files=[("--output", output)])
    board = load_leaderboard(files, cfg.name)
    console.print(board_table(board, cfg.title))
    for note in board.notes:
        console.print(f"note: {note}", soft_wrap=True, markup=False)  # "[low, high]" is text, not a style
    if output is not None:
        write_board(board, output, cfg.title)
        console.print(f"wrote {output}")
