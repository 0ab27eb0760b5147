"""Leaderboards: evaluations side by side, one row per ``cheems eval --output-json`` file.

The shape of the paper's Table 2 (reward models and generative judges on the subsets of one bench:
accuracy and exact match per subset, then overall) and, with rows named after datasets, of its
Table 3 (datasets compared through reward models trained on each). Rows are sorted by overall,
best first; intervals are shown where the JSON has them. Written as a rich table, markdown or a
self-contained HTML page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich import box
from rich.markup import escape
from rich.table import Table

from cheems.data.io import load_rows, validation_error
from cheems.errors import InputError
from cheems.evaluate.html import Figure, HtmlTable, Section, render_page
from cheems.evaluate.plots import new_figure, png_bytes
from cheems.evaluate.report_html import with_ci

Share = Annotated[float, Field(ge=0, le=1)]
Interval = Annotated[list[Share], Field(min_length=2, max_length=2)]


class _Group(BaseModel):
    """One subset of an eval JSON: only what a leaderboard shows is checked; other keys are kept out."""

    model_config = ConfigDict(strict=True, extra="ignore")
    accuracy: Share
    exact_match: Share
    n_prompts: Annotated[int, Field(ge=0)]
    n_pairs: Annotated[int, Field(ge=0)]
    accuracy_ci: Interval | None = None
    exact_match_ci: Interval | None = None


class _EvalJson(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    subsets: Annotated[dict[str, _Group], Field(min_length=1)]
    overall: Share
    overall_ci: Interval | None = None
    scorer: str | None = None
    judge: dict[str, Any] | None = None
    bootstrap: dict[str, Any] | None = None


@dataclass
class BoardRow:
    """One evaluation: its row name, kind (reward model or judge), file, and numbers as in its JSON."""

    name: str
    kind: str
    source: str
    data: dict[str, Any]  # overall, overall_ci?, subsets: {name: {accuracy, exact_match, ..._ci?}}

    @property
    def overall(self) -> float:
        return self.data["overall"]


@dataclass
class Leaderboard:
    """Rows sorted by overall (best first) over the same subsets, and what a reader should know."""

    subsets: list[str]
    rows: list[BoardRow]
    notes: list[str]

    def columns(self) -> list[tuple[str, str, str]]:
        """(heading, subset or "", key) of each number column: every subset's accuracy and exact match, overall."""
        cols = [
            (f"{s} {label}", s, key)
            for s in self.subsets
            for key, label in (("accuracy", "acc"), ("exact_match", "exact"))
        ]
        return [*cols, ("overall", "", "overall")]

    def cell(self, row: BoardRow, subset: str, key: str) -> str:
        """The number (with its interval when present) of one column of one row."""
        return with_ci(_group(row, subset), key)

    def is_best(self, row: BoardRow, subset: str, key: str) -> bool:
        """Whether the row holds the column's highest value (shown in bold, as in the paper's tables)."""
        return _group(row, subset)[key] == max(_group(r, subset)[key] for r in self.rows)


def _group(row: BoardRow, subset: str) -> dict[str, Any]:
    """A subset's numbers of a row, or the row's own for overall (``subset`` empty)."""
    return row.data["subsets"][subset] if subset else row.data


def read_eval_json(path: str | Path) -> dict[str, Any]:
    """The checked numbers of one eval JSON; a malformed one is an ``InputError`` naming the file and field."""
    rows = load_rows(path)
    line, value = rows[0]
    if len(rows) != 1 or not isinstance(value, dict):
        raise InputError(
            "expected one JSON object", path=str(path), line=line, hint="give the output of cheems eval --output-json"
        )
    try:
        return _EvalJson.model_validate(value).model_dump(exclude_none=True)
    except ValidationError as e:
        raise validation_error(e, str(path), line) from None


def load_leaderboard(paths: Sequence[str | Path], names: Sequence[str] = ()) -> Leaderboard:
    """One row per eval JSON, sorted by overall (stable for ties); ``names`` name the rows in file order.

    A row's name defaults to the JSON's ``scorer``, else the file stem. Every file must have the same
    subsets (a leaderboard compares on one bench); pair counts that differ are noted.
    """
    if names and len(names) != len(paths):
        raise InputError(
            f"{len(names)} --name for {len(paths)} files", hint="give one --name per file, in the files' order"
        )
    rows: list[BoardRow] = []
    for i, path in enumerate(paths):
        data = read_eval_json(path)
        if rows and set(data["subsets"]) != set(rows[0].data["subsets"]):
            raise InputError(
                f"subsets {', '.join(data['subsets'])} differ from {', '.join(rows[0].data['subsets'])} of "
                f"{rows[0].source}",
                path=str(path),
                field="subsets",
                hint="a leaderboard compares evaluations on the same bench files",
            )
        name = names[i] if names else data.get("scorer") or Path(path).stem
        rows.append(BoardRow(name, "judge" if "judge" in data else "reward model", str(path), data))
    subsets = list(rows[0].data["subsets"])
    return Leaderboard(subsets, sorted(rows, key=lambda r: -r.overall), _notes(rows, subsets))


def _notes(rows: list[BoardRow], subsets: list[str]) -> list[str]:
    notes = ["sorted by overall: mean over subsets of (accuracy + exact match) / 2"]
    for s in subsets:
        pairs = {r.data["subsets"][s]["n_pairs"] for r in rows}
        if len(pairs) > 1:
            notes.append(f"subset {s}: pair counts differ ({', '.join(map(str, sorted(pairs)))}): not the same bench?")
    boots = {(b["level"], b["resamples"]) for r in rows if (b := r.data.get("bootstrap"))}
    if len(boots) == 1:
        level, resamples = boots.pop()
        notes.append(f"[low, high]: {level:.0%} bootstrap intervals from {resamples:,} resamples of prompts")
    elif boots:
        notes.append("[low, high]: bootstrap intervals; their level or resamples differ between files")
    return notes


def board_table(board: Leaderboard, title: str = "") -> Table:
    """The leaderboard as a rich table, the best value of each column in bold."""
    table = Table(title=title or None, box=box.SIMPLE_HEAVY)  # no vertical rules: room for one more column
    table.add_column("#", justify="right")
    # in a narrow terminal every cell wraps (never cut): a cut name or number would say nothing
    table.add_column("name", overflow="fold", min_width=8)
    table.add_column("kind", overflow="fold", min_width=5)
    for heading, _, _ in board.columns():
        table.add_column(heading, justify="right", overflow="fold", min_width=7)
    for i, row in enumerate(board.rows, 1):
        cells = [_marked(board, row, s, k, "[bold]{}[/]") for _, s, k in board.columns()]
        table.add_row(str(i), escape(row.name), row.kind, *cells)
    return table


def _marked(board: Leaderboard, row: BoardRow, subset: str, key: str, mark: str) -> str:
    """A cell, wrapped in ``mark`` when it is the column's best."""
    text = board.cell(row, subset, key)
    return mark.format(text) if board.is_best(row, subset, key) else text


def board_markdown(board: Leaderboard, title: str = "") -> str:
    """The leaderboard as a markdown table (for BENCHMARKS.md, papers, issue threads)."""
    headings = ["#", "name", "kind", *(h for h, _, _ in board.columns())]
    lines = [f"# {title or 'CheemsBench leaderboard'}", "", "| " + " | ".join(headings) + " |"]
    lines.append("|---:|---|---|" + "---:|" * len(board.columns()))
    for i, row in enumerate(board.rows, 1):
        cells = [_marked(board, row, s, k, "**{}**") for _, s, k in board.columns()]
        name = row.name.replace("|", "\\|")  # a bar in a name would split the cell
        lines.append(f"| {i} | {name} | {row.kind} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", *(f"- {note}" for note in board.notes), ""])


def board_html(board: Leaderboard, title: str = "") -> str:
    """The leaderboard as a self-contained HTML page: the table and a chart of overall with intervals."""
    numbers = [h for h, _, _ in board.columns()]
    rows, bold = [], set()
    for i, row in enumerate(board.rows):
        rows.append([str(i + 1), row.name, row.kind, *(board.cell(row, s, k) for _, s, k in board.columns())])
        bold |= {(i, 3 + j) for j, (_, s, k) in enumerate(board.columns()) if board.is_best(row, s, k)}
    table = HtmlTable(["#", "name", "kind", *numbers], rows, numeric={"#", *numbers}, bold_cells=bold)
    section = Section("Leaderboard", [table, overall_chart(board)], "The best value of each column is in bold.")
    return render_page(title or "CheemsBench leaderboard", [section], board.notes)


def overall_chart(board: Leaderboard) -> Figure:
    """Horizontal bars of overall, best on top, with each row's interval where its JSON has one."""
    fig, ax = new_figure(6.4, 0.9 + 0.38 * len(board.rows))
    ax.grid(False, axis="y")
    ax.grid(True, axis="x", alpha=0.3)
    ys = range(len(board.rows))
    colours = ["#7f7f7f" if r.kind == "judge" else "#1f77b4" for r in board.rows]
    ax.barh(list(ys), [r.overall for r in board.rows], color=colours, height=0.6)
    for y, r in zip(ys, board.rows):
        end = r.overall
        if "overall_ci" in r.data:
            low, end = r.data["overall_ci"]
            ax.errorbar(r.overall, y, xerr=[[r.overall - low], [end - r.overall]], color="black", capsize=3, lw=1)
        ax.text(end + 0.01, y, f"{r.overall:.3f}", va="center", fontsize=8)  # right of the interval, not on it
    ax.set_yticks(list(ys), [r.name for r in board.rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("overall")
    return Figure(png_bytes(fig), "overall score of every row", "blue: reward models; grey: generative judges")
