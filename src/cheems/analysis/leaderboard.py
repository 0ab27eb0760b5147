"""Leaderboards: evaluations side by side, one row per ``cheems eval --output-json`` file.

The shape of the paper's Table 2 (reward models and generative judges on the subsets of one bench:
accuracy and exact match per subset, then overall) and, with rows named after datasets, of its
Table 3 (datasets compared through reward models trained on each); or one row per ``cheems suite --output-json``
file, a column per bench. Rows are sorted by overall, best first; intervals are shown where the JSON has them.
Only evaluations made with one metric (``cheems eval --metric``) are ranked together: each metric makes overall
its own way. Written as a rich table, markdown or a self-contained HTML page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from rich import box
from rich.table import Table
from rich.text import Text

from cheems.data.io import load_rows, validation_error
from cheems.errors import InputError
from cheems.evaluate.html import Figure, HtmlTable, Section, render_page
from cheems.evaluate.plots import new_figure, png_bytes
from cheems.evaluate.report_html import with_ci
from cheems.metrics.compat import Compat
from cheems.metrics.metric_registry import METRICS

Share = Annotated[float, Field(ge=0, le=1)]
Interval = Annotated[list[Share], Field(min_length=2, max_length=2)]
_SHORT = {"accuracy": "acc", "exact_match": "exact", "score": "score"}  # a column's key, as headings show it
SUITE = "suite"
"""The ``metric`` of a ``cheems suite`` JSON: a row of its benches' scores, a column each."""


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
    # JSONs written before eval recorded its metric are CheemsBench's: other metrics always wrote theirs
    metric: str = "cheems"
    subsets: Annotated[dict[str, _Group], Field(min_length=1)]
    overall: Share
    overall_ci: Interval | None = None
    name: str | None = None
    scorer: str | None = None
    judge: dict[str, Any] | None = None
    bootstrap: dict[str, Any] | None = None
    compat: Compat = "strict"  # written only by --compat upstream

    @field_validator("metric")
    @classmethod
    def _registered(cls, metric: str) -> str:
        if metric not in METRICS:  # pydantic's error names the file and the field
            raise ValueError(f"unknown metric {metric!r}, {METRICS.hint()}")
        return metric


class _Bench(BaseModel):
    """One bench of a suite JSON (``cheems suite --output-json``): its headline score."""

    model_config = ConfigDict(strict=True, extra="ignore")
    metric: str
    score: Share
    score_ci: Interval | None = None
    n_prompts: Annotated[int, Field(ge=0)]
    n_pairs: Annotated[int, Field(ge=0)]


class _SuiteJson(BaseModel):
    """A suite JSON: its benches are a leaderboard's columns (``subsets``), its mean score ``overall``."""

    model_config = ConfigDict(strict=True, extra="ignore")
    metric: str
    benches: Annotated[dict[str, _Bench], Field(min_length=1)]
    overall: Share
    overall_ci: Interval | None = None
    name: str | None = None
    scorer: str | None = None
    bootstrap: dict[str, Any] | None = None
    reports: dict[str, dict[str, Any]] = {}

    def board_data(self) -> dict[str, Any]:
        """The numbers as a row holds them: a judge's suite is marked as its reports are; its rules (``compat``)
        are its benches', one word when they agree."""
        out = self.model_dump(exclude_none=True, exclude={"benches", "reports"})
        out["subsets"] = {name: b.model_dump(exclude_none=True) for name, b in self.benches.items()}
        rules = {name: report.get("compat", "strict") for name, report in self.reports.items()}
        agreed = set(rules.values())
        out["compat"] = agreed.pop() if len(agreed) == 1 else ", ".join(f"{n} {r}" for n, r in rules.items())
        if any("judge" in report for report in self.reports.values()):
            out["judge"] = True
        return out


@dataclass
class BoardRow:
    """One evaluation: its row name, kind (reward model or judge), file, and numbers as in its JSON."""

    name: str
    kind: str
    source: str
    data: dict[str, Any]  # overall, overall_ci?, subsets: {name: {accuracy, exact_match, ..._ci?}}

    @property
    def overall(self) -> float:
        return cast("float", self.data["overall"])


@dataclass
class Leaderboard:
    """Rows sorted by overall (best first) over the same subsets, and what a reader should know."""

    subsets: list[str]
    rows: list[BoardRow]
    notes: list[str]
    keys: tuple[str, ...] = ("accuracy", "exact_match")  # a suite's benches have one: their score

    def columns(self) -> list[tuple[str, str, str]]:
        """(heading, subset or "", key) of each number column: every subset's accuracy and exact match (a suite's
        every bench's score), overall."""
        cols = [(f"{s} {_SHORT[key]}", s, key) for s in self.subsets for key in self.keys]
        return [*cols, ("overall", "", "overall")]

    def cell(self, row: BoardRow, subset: str, key: str, compact: bool = False) -> str:
        """The number (with its interval when present; ``compact`` for a terminal) of one column of one row."""
        return with_ci(_group(row, subset), key, compact)

    def is_best(self, row: BoardRow, subset: str, key: str) -> bool:
        """Whether the row holds the column's highest value (shown in bold, as in the paper's tables)."""
        return cast("bool", _group(row, subset)[key] == max(_group(r, subset)[key] for r in self.rows))


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
        if value.get("metric") == SUITE:
            return _SuiteJson.model_validate(value).board_data()
        return _EvalJson.model_validate(value).model_dump(exclude_none=True)
    except ValidationError as e:
        raise validation_error(e, str(path), line) from None


def load_leaderboard(paths: Sequence[str | Path], names: Sequence[str] = ()) -> Leaderboard:
    """One row per eval JSON, sorted by overall (stable for ties); ``names`` (``--name``) name the rows in file order.

    A row's name defaults to the JSON's ``name``, else the last part of its ``scorer`` (a model's folder
    name, not its whole path), else the file stem; see :func:`default_names`. Every file must be another
    file, have the same metric (``cheems eval --metric``: their overalls are not comparable otherwise), the same
    rules (``--compat``) and the same subsets (a leaderboard compares on one bench); pair counts that differ are noted.
    """
    if not paths:
        raise InputError(
            "no evaluation to rank", field="paths", hint="give at least one eval JSON (cheems eval --output-json)"
        )
    if names and len(names) != len(paths):
        raise InputError(
            f"{len(names)} --name for {len(paths)} files",
            path="--name",
            hint="give one --name per file, in the files' order",
        )
    _refuse_repeats(paths, names)
    datas = [read_eval_json(path) for path in paths]
    first, base = paths[0], datas[0]
    for path, data in zip(paths, datas):
        for key in ("metric", "compat"):  # each makes the numbers its own way
            if data[key] != base[key]:
                raise InputError(
                    f"{key} {data[key]} differs from {key} {base[key]} of {first}: their overall scores are not "
                    "comparable",
                    path=str(path),
                    field=key,
                    hint=f"rank evaluations made with the same cheems eval --{key}",
                )
        if set(data["subsets"]) != set(base["subsets"]):
            raise InputError(
                f"subsets {', '.join(data['subsets'])} differ from {', '.join(base['subsets'])} of {first}",
                path=str(path),
                field="subsets",
                hint="a leaderboard compares evaluations on the same bench files",
            )
    names = list(names) or default_names(paths, datas)
    rows = [
        BoardRow(name, "judge" if "judge" in data else "reward model", str(path), data)
        for name, path, data in zip(names, paths, datas)
    ]
    subsets = list(base["subsets"])
    keys = ("score",) if base["metric"] == SUITE else ("accuracy", "exact_match")
    return Leaderboard(subsets, sorted(rows, key=lambda r: -r.overall), _notes(rows, subsets, base["metric"]), keys)


def _refuse_repeats(paths: Sequence[str | Path], names: Sequence[str]) -> None:
    """A file given twice would be ranked against itself; a name given twice would make two rows look alike."""
    seen: dict[Path, str | Path] = {}
    for path in paths:
        key = Path(path).resolve()
        if key in seen:
            raise InputError(
                f"is given twice (also as {seen[key]})" if str(seen[key]) != str(path) else "is given twice",
                path=str(path),
                hint="give each eval JSON once",
            )
        seen[key] = path
    repeated = [n for i, n in enumerate(names) if n in names[:i]]
    if repeated:
        raise InputError(f"'{repeated[0]}' is given twice", path="--name", hint="give every row its own name")


def default_names(paths: Sequence[str | Path], datas: Sequence[dict[str, Any]]) -> list[str]:
    """Row names when no ``--name`` is given: the JSON's ``name``, else its ``scorer`` as :func:`short_names`
    shows it, else the file stem. Rows whose names are still the same (one scorer in two files) add their
    file's name."""
    unnamed = [d.get("scorer") or Path(p).stem for p, d in zip(paths, datas) if "name" not in d]
    shortened = iter(short_names(unnamed))
    out = [d["name"] if "name" in d else next(shortened) for d in datas]
    return [f"{n} ({Path(p).name})" if out.count(n) > 1 else n for n, p in zip(out, paths)]


def short_names(names: Sequence[str]) -> list[str]:
    """Names as a table shows them: a path (``/home/me/runs/rm-a``, ``runs/rm-a/``) by its last part
    (``rm-a``, a model's folder name), keeping as many trailing parts as tell it apart from the others'.
    A name with a scheme (``vllm:http://...``, ``similarity:m3e-small``) is kept whole."""
    parts = [[] if ":" in n else [x for x in n.split("/") if x] for n in names]
    out = []
    for name, own in zip(names, parts):
        others = [q for other, q in zip(names, parts) if other != name and q]
        k = 1
        while k < len(own) and any(q[-k:] == own[-k:] for q in others):
            k += 1
        out.append("/".join(own[-k:]) if len(own) > 1 else name)
    return out


def _notes(rows: list[BoardRow], subsets: list[str], metric: str) -> list[str]:
    overall = "(accuracy + exact match) / 2" if metric == "cheems" else f"accuracy (cheems eval --metric {metric})"
    notes = [f"sorted by overall: mean over subsets of {overall}"]
    if metric == SUITE:
        notes = ["sorted by overall: mean over benches of their scores (each bench's overall, by its metric)"]
        for bench in subsets:  # a bench's score means what its metric makes of it
            metrics = {r.data["subsets"][bench]["metric"] for r in rows}
            if len(metrics) > 1:
                notes.append(f"bench {bench}: measured by different metrics ({', '.join(sorted(metrics))})")
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
    """The leaderboard as a rich table, the best value of each column in bold.

    It fits an 80-column terminal for a bench of two subsets (the paper's Table 2): no vertical rules,
    headings on two lines, intervals in their compact form (a cell wraps between the number and its
    interval) and "RM" for a reward model. What cannot fit folds onto more lines; nothing is cut.
    """
    table = Table(title=title or None, box=box.SIMPLE_HEAVY, pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("name", overflow="fold")
    table.add_column("kind", no_wrap=True)
    for _, subset, key in board.columns():
        heading = f"{subset}\n{_SHORT[key]}" if subset else "overall"
        table.add_column(heading, justify="right", overflow="fold")
    for i, row in enumerate(board.rows, 1):
        cells = [
            Text(board.cell(row, s, k, compact=True), style="bold" if board.is_best(row, s, k) else "")
            for _, s, k in board.columns()
        ]
        table.add_row(str(i), row.name, "RM" if row.kind == "reward model" else row.kind, *cells)
    return table


def _marked(board: Leaderboard, row: BoardRow, subset: str, key: str, mark: str, compact: bool = False) -> str:
    """A cell, wrapped in ``mark`` when it is the column's best."""
    text = board.cell(row, subset, key, compact)
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


BOARD_SUFFIXES = (".md", ".html")


def board_format(output: str | Path | None) -> str | None:
    """``md`` or ``html``, from the suffix of the file the leaderboard is written to (None: no file); another
    suffix is an error naming the file."""
    if output is None:
        return None
    suffix = Path(output).suffix
    if suffix.lower() not in BOARD_SUFFIXES:
        raise InputError(
            f"unknown suffix '{suffix}'" if suffix else "no suffix",
            path=str(output),
            hint="write board.md (markdown) or board.html (page)",
        )
    return suffix.lower()[1:]


def write_board(board: Leaderboard, output: str | Path, title: str = "") -> None:
    """Write the leaderboard as markdown (``.md``) or a self-contained HTML page (``.html``)."""
    from cheems.data.io import write_text

    page = board_markdown(board, title) if board_format(output) == "md" else board_html(board, title)
    write_text(output, page)


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
