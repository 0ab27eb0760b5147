"""Self-contained HTML pages (a report, a leaderboard, a bias analysis): Jinja2, inline CSS and PNGs.

A page is a title, a few lines about where the numbers come from, and sections; a section holds
tables and figures in order. Nothing is fetched from the network when the page is opened: the
charts are PNG ``data:`` URIs and the style sheet is inline, so the file can be mailed or attached
to a paper's supplement as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast

from cheems.evaluate.plots import png_data_uri


@dataclass
class HtmlTable:
    """A table: column names, rows of cells (already formatted text), optional caption.

    ``numeric`` names columns aligned right; ``bold_rows`` are row indexes shown in bold (means, totals),
    ``bold_cells`` (row, column) indexes of single cells (the best value of a column).
    """

    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    numeric: set[str] = field(default_factory=set)
    bold_rows: set[int] = field(default_factory=set)
    bold_cells: set[tuple[int, int]] = field(default_factory=set)


@dataclass
class Figure:
    """A chart as PNG bytes, with alternative text and a caption."""

    png: bytes
    alt: str
    caption: str = ""

    @property
    def src(self) -> str:
        return png_data_uri(self.png)


@dataclass
class Section:
    """A heading, an optional paragraph, then tables and figures in order."""

    heading: str
    items: Sequence[HtmlTable | Figure]
    text: str = ""


@cache
def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, select_autoescape

    return Environment(loader=PackageLoader("cheems.evaluate", "templates"), autoescape=select_autoescape())


def render_page(title: str, sections: list[Section], notes: Sequence[str] = ()) -> str:
    """The whole page as one HTML string (every text is escaped; charts are inline PNGs)."""
    template = _environment().get_template("page.html")
    return cast("str", template.render(title=title, notes=list(notes), sections=sections))
