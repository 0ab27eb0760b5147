"""The one rule for text that reaches a terminal: data is shown, never obeyed.

Names printed by commands (categories, classes, subsets, files, models, ids) come from the user's files.
A name holding an escape sequence ("\\x1b]0;title\\x07", "\\x1b[2J") would retitle the window or clear the
screen; a bidi override (U+202E) would reorder what is shown; a name like "[bold]x[/]" or "[/]" would be
read as rich markup (or stop the command with a MarkupError). :class:`SafeConsole` is the console every
command prints through (:mod:`cheems.cli.console`) and the library's default: it shows control characters
as escapes (:func:`printable`) and reads no markup, so styling is given explicitly (``style=``, ``Text``).
Below every package in the flow; rich is imported here, which every console user imports anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

# C0 controls but newline and tab, DEL, C1 controls, and the invisible marks that reorder text (bidi
# embeddings, overrides and isolates, LRM/RLM/ALM): each is shown as an escape, never sent to the terminal.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character and bidi mark written as an escape (ESC as ``\\x1b``, U+202E as
    ``\\u202e``); newlines and tabs are kept. Safe to print to any terminal."""
    return UNSAFE.sub(_escape, text)


class SafeConsole(Console):
    """A rich Console that prints data literally: control characters escaped, no markup read.

    Strings are escaped before rich turns them into text (so widths are measured on what is shown), and
    every segment rendered is checked again, which covers ``Text`` objects built elsewhere (error lines,
    table cells) — only rich's own control segments (cursor moves of a progress bar) pass as they are.
    """

    def __init__(self, *args: Any, markup: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, markup=markup, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """As rich's, on :func:`printable` of the text."""
        return super().render_str(printable(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """As rich's, with control characters in any text segment escaped."""
        for segment in super().render(renderable, options):
            if segment.control is None and UNSAFE.search(segment.text):
                segment = Segment(printable(segment.text), segment.style)
            yield segment
