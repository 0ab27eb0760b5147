"""A pool's prompts by category as a sunburst, like the paper's Figure 10, and ``cheems validate`` in one call.

Two rings: the main categories inside, their subcategories outside, each slice as wide as its share
of the prompts. Slices too thin to hold a label stay unlabelled; within a main category, the
subcategories too small to be read are drawn as one slice ``其他`` so the outer ring stays legible at
CheemsBench's 50+ subcategories.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cheems.data.dataset_stats import FileStats, PoolCounts, file_stats
from cheems.errors import InputError

OTHER = "其他"
INNER_LABEL_DEGREES = 9.0  # thinner inner slices are left unlabelled
OUTER_LABEL_DEGREES = 3.2  # thinner outer slices are left unlabelled (one line of 7-point text)
MIN_SUB_SHARE = OUTER_LABEL_DEGREES / 360  # a smaller subcategory joins its main category's 其他
MAIN_LINE, SUB_CHARS = 5, 10  # characters a line of a main category's label; most of a subcategory's


def grouped_subcategories(categories: Mapping[tuple[str, str], int]) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """(main, prompts, [(sub, prompts)]) largest first; small subcategories merged into one ``其他`` slice.

    A subcategory under :data:`MIN_SUB_SHARE` of all prompts is merged when at least two of its main
    category are (a lone small one keeps its name); an empty sub (a one-level path) is drawn unnamed.
    """
    total = sum(categories.values())
    by_main: dict[str, Counter[str]] = {}
    for (main, sub), n in categories.items():
        by_main.setdefault(main, Counter())[sub] += n
    out = []
    for main, subs in sorted(by_main.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        ordered = sorted(subs.items(), key=lambda kv: (-kv[1], kv[0]))
        small = [(sub, n) for sub, n in ordered if sub and sub != OTHER and n < MIN_SUB_SHARE * total]
        if len(small) >= 2:
            kept = [kv for kv in ordered if kv not in small]
            other = sum(n for _, n in small) + subs.get(OTHER, 0)
            ordered = [kv for kv in kept if kv[0] != OTHER] + [(f"{OTHER}({len(small)})", other)]
        out.append((main, sum(subs.values()), ordered))
    return out


def category_sunburst(categories: Mapping[tuple[str, str], int], title: str = "prompts per category") -> bytes:
    """The sunburst of prompts per (main, sub) category as PNG bytes, with Chinese labels."""
    from matplotlib import colormaps

    from cheems.evaluate.plots import new_figure, png_bytes

    groups = grouped_subcategories(categories)
    total = sum(n for _, n, _ in groups)
    fig, ax = new_figure(8.0, 8.0)
    ax.set_axis_off()
    ax.set_aspect("equal")
    palette = colormaps["tab10" if len(groups) <= 10 else "tab20"]
    inner_sizes, inner_colors, outer_sizes, outer_colors, outer_names = [], [], [], [], []
    for k, (_, n, subs) in enumerate(groups):
        # tab20 comes in dark/light pairs: every dark one first, so neighbours differ
        base = palette(k % 10 if palette.N == 10 else (2 * k) % 20 + (k // 10) % 2)
        inner_sizes.append(n)
        inner_colors.append(base)
        for j, (sub, m) in enumerate(subs):
            lighten = 0.35 + 0.45 * (j / max(len(subs) - 1, 1))  # lighter and lighter round the slice
            outer_sizes.append(m)
            outer_colors.append(tuple(c + (1 - c) * lighten for c in base[:3]))
            outer_names.append(sub)
    # one ring each: (sizes, colours, outer radius, ring width)
    inner, outer = (
        ax.pie(sizes, radius=radius, colors=colors, startangle=90, counterclock=False, wedgeprops=wedge)[0]
        for sizes, colors, radius, wedge in (
            (inner_sizes, inner_colors, 0.62, {"edgecolor": "white", "linewidth": 0.8, "width": 0.36}),
            (outer_sizes, outer_colors, 1.0, {"edgecolor": "white", "linewidth": 0.8, "width": 0.38}),
        )
    )
    for w, (main, n, _) in zip(inner, groups):
        if w.theta2 - w.theta1 >= INNER_LABEL_DEGREES:
            lines = [main[i : i + MAIN_LINE] for i in range(0, len(main), MAIN_LINE)]
            _label(ax, w, 0.44, "\n".join([*lines, f"{100 * n / total:.0f}%"]), 9, radial=False)
    for w, name in zip(outer, outer_names):
        if name and w.theta2 - w.theta1 >= OUTER_LABEL_DEGREES:
            short = name if len(name) <= SUB_CHARS else name[: SUB_CHARS - 1] + "…"
            _label(ax, w, 0.81, short, 7, radial=True)
    ax.set_title(f"{title} ({total} prompts, {len(groups)} main categories)", fontsize=12)
    return png_bytes(fig)


def _label(ax: Any, wedge: Any, radius: float, text: str, size: float, radial: bool) -> None:
    """``text`` at the middle of ``wedge``, ``radius`` from the centre; radial text reads outwards, never
    upside down."""
    angle = (wedge.theta1 + wedge.theta2) / 2
    x, y = radius * math.cos(math.radians(angle)), radius * math.sin(math.radians(angle))
    rotation = 0.0
    if radial:
        rotation = angle if -90 <= (angle + 180) % 360 - 180 <= 90 else angle + 180
    ax.text(x, y, text, ha="center", va="center", fontsize=size, rotation=rotation, rotation_mode="anchor")


def validate_files(
    paths: Iterable[str | Path], *, skip_invalid: bool = False, workers: int | None = None, plot: Path | None = None
) -> list[FileStats]:
    """``cheems validate`` in one call: each file's :class:`FileStats` (:func:`file_stats`), and with ``plot``
    a PNG of all the files' prompts per category (:func:`category_sunburst`) written there (claimed first:
    never one of ``paths``)."""
    from cheems.data.io import write_bytes
    from cheems.outputs import claim_outputs

    paths = list(paths)
    claim_outputs(inputs=[("FILES", path) for path in paths], files=[("--plot", plot)])
    if plot is not None and plot.suffix.lower() != ".png":
        raise InputError(
            f"the plot is a PNG image, not '{plot.suffix or plot.name}'",
            path="--plot",
            hint="name it e.g. categories.png",
        )
    rows = list(file_stats(paths, skip_invalid=skip_invalid, workers=workers))
    if plot is not None:
        pool = PoolCounts()
        for row in rows:
            pool += row.pool
        write_bytes(plot, category_sunburst(pool.categories))
    return rows
