"""Charts with matplotlib: one place that picks a font able to draw Chinese and turns figures into PNG.

Every chart of a report, a leaderboard or a bias analysis is made here or with :func:`new_figure`,
so the font rule and the output format are the same everywhere. matplotlib is imported on first
use (it costs a second at start-up).
"""

from __future__ import annotations

import base64
import io
import warnings
from functools import cache
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
    """pyplot on the Agg backend (no display), with a CJK font first in the sans-serif list."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import font_manager
    from matplotlib import pyplot as plt

    installed = {f.name for f in font_manager.fontManager.ttflist}
    found = [name for name in CJK_FONTS if name in installed]
    if found:
        plt.rcParams["font.sans-serif"] = [found[0], *plt.rcParams["font.sans-serif"]]
    else:
        warnings.warn(
            "no font with Chinese characters found: Chinese labels in charts will show as boxes "
            "(install one, e.g. apt-get install fonts-noto-cjk)",
            CheemsWarning,
            stacklevel=3,
        )
    plt.rcParams["font.family"] = "sans-serif"
    plt.rcParams["axes.unicode_minus"] = False  # the CJK fonts lack U+2212
    return plt


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
