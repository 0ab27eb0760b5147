"""Charts with matplotlib: one place that picks a font able to draw Chinese, draws every text literally
and turns figures into PNG.

Every chart of a report, a leaderboard or a bias analysis is made here or with :func:`new_figure`,
so the font rule, the text rule and the output format are the same everywhere. matplotlib is imported
on first use (it costs a second at start-up).
"""

from __future__ import annotations

import base64
import contextlib
import io
import warnings
from functools import cache
from pathlib import Path
from typing import Any

from cheems.errors import CheemsWarning

# Fonts with CJK glyphs, best first: Debian's fonts-noto-cjk, then common desktop fonts.
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Serif CJK SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Microsoft YaHei",
    "PingFang SC",
    "SimHei",
    "Arial Unicode MS",
)


@cache
def _pyplot() -> Any:
    """pyplot on the Agg backend (no display), with a CJK font first in the sans-serif list and every text
    drawn as it is written.

    Chart text is data (category, subset, file and model names): matplotlib would read ``$…$`` in it as
    math, so "cost $5 or $6" loses its dollars and a name holding ``$$`` or an odd ``$`` with ``^``/``_``
    stops the chart with a parse error. ``text.parse_math`` off is read by every Text when it is made
    (titles, labels, tick labels, legends, annotations), so no call site has to escape anything; our
    own tick formatters write plain text (no ``$\\mathdefault{…}$``), so nothing of ours needs math.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    found = _installed_cjk_font() or _installed_cjk_font(rescan=True)
    if found:
        plt.rcParams["font.sans-serif"] = [found, *plt.rcParams["font.sans-serif"]]
    else:
        warnings.warn(
            "no font with Chinese characters found: Chinese labels in charts will show as boxes "
            "(install one, e.g. apt-get install fonts-noto-cjk; charts made after that find it)",
            CheemsWarning,
            stacklevel=3,
        )
    plt.rcParams["font.family"] = "sans-serif"
    plt.rcParams["text.parse_math"] = False  # names are data, never mathtext (see the docstring)
    plt.rcParams["text.usetex"] = False  # a user's matplotlibrc with TeX on would read them as TeX
    plt.rcParams["axes.unicode_minus"] = False  # the CJK fonts lack U+2212
    return plt


def _installed_cjk_font(rescan: bool = False) -> str | None:
    """The first of :data:`CJK_FONTS` that matplotlib knows, or None.

    matplotlib lists fonts from a cache written on its first run, so a font installed since (say
    fonts-noto-cjk after matplotlib) is unknown to it. ``rescan`` first adds the system's fonts that the
    list lacks and saves the list, so the next run finds the font without scanning again.
    """
    import matplotlib
    from matplotlib import font_manager

    manager = font_manager.fontManager
    if rescan:
        known = {f.fname for f in manager.ttflist}
        new = [path for path in font_manager.findSystemFonts() if path not in known]
        for path in new:
            with contextlib.suppress(Exception):  # as matplotlib's own scan: a file it cannot read is skipped
                manager.addfont(path)
        if new:
            cache_file = Path(matplotlib.get_cachedir(), f"fontlist-v{font_manager.FontManager.__version__}.json")
            font_manager.json_dump(manager, cache_file)  # where matplotlib reads it; unwritable: only logged
    installed = {f.name for f in manager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def cjk_font() -> str | None:
    """The font charts use for Chinese text, or None when no CJK font is installed."""
    plt = _pyplot()
    first = plt.rcParams["font.sans-serif"][0]
    return first if first in CJK_FONTS else None


def _style(ax: Any) -> None:
    ax.grid(True, axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def new_figure(width: float = 6.4, height: float = 4.0) -> tuple[Any, Any]:
    """A (figure, axes) pair in the report's style."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(width, height), dpi=110, layout="constrained")
    _style(ax)
    return fig, ax


def new_panels(
    n: int, width: float = 3.6, height: float = 3.4, per_row: int = 4, sharey: bool = True
) -> tuple[Any, list[Any]]:
    """A figure with ``n`` axes side by side (rows of at most ``per_row``), sharing the y axis unless not
    ``sharey``, in the report's style: one panel per group, each ``width`` x ``height`` inches. Unused cells
    are hidden."""
    plt = _pyplot()
    cols, rows = min(n, per_row), -(-n // per_row)
    fig, grid = plt.subplots(
        rows, cols, figsize=(width * cols, height * rows), dpi=110, layout="constrained", sharey=sharey, squeeze=False
    )
    axes = list(grid.flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[:n]:
        _style(ax)
    return fig, axes[:n]


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes; the figure is closed (its memory freed)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    _pyplot().close(fig)
    return buffer.getvalue()


def png_data_uri(png: bytes) -> str:
    """A ``data:`` URI that an <img> in a self-contained HTML file can show."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
