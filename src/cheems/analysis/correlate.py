"""Does a benchmark predict downstream results? Correlations across reward models (the paper's Figure 5).

Each reward model (RM) has one ``cheems eval --output-json`` file (its stem names the RM) and one row
of a downstream CSV (``name,<metric>...``: best-of-N quality, win rate, MT-Bench score...). For every
benchmark number of the eval JSONs (``overall``, ``SUBSET.accuracy``, ``SUBSET.exact_match``) and every
downstream metric, :func:`correlate` gives Pearson's r, Spearman's rho and Kendall's tau-b over the RMs
(with scipy's p-values) and percentile bootstrap intervals over RMs.

Bootstrap: ``numpy.random.default_rng(seed).integers(0, n, (resamples, n))`` draws the RMs of every
resample once, and every (benchmark number, metric) pair is measured on the same draws. A resample
with fewer than 3 distinct RMs (two points always lie on a line) or in which either column is constant
has no correlation: it is skipped, and ``used`` counts the resamples that remain. Spearman's rho is
Pearson's r on average ranks and Kendall's tau is tau-b, as scipy computes them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from cheems.analysis.leaderboard import load_leaderboard
from cheems.data.io import load_rows
from cheems.errors import InputError
from cheems.evaluate.html import Figure, HtmlTable, Section, render_page
from cheems.evaluate.plots import new_figure, new_panels, png_bytes
from cheems.evaluate.report_html import compact_interval

if TYPE_CHECKING:
    from rich.console import Console

METHODS = ("pearson", "spearman", "kendall")
FEW_RMS = 10  # under this many RMs the table is warned about: the paper correlates 26
_CELLS = 4_000_000  # resamples x RMs x RMs held at once by Kendall's tau (bounds memory for many RMs)


@dataclass
class RmTable:
    """The numbers being correlated: one value per RM (in ``names`` order) of each benchmark number and metric."""

    names: list[str]
    bench: dict[str, np.ndarray]  # "overall", "SUBSET.accuracy", "SUBSET.exact_match"
    downstream: dict[str, np.ndarray]
    warnings: list[str] = field(default_factory=list)


@dataclass
class Correlation:
    """One benchmark number against one downstream metric: the three coefficients, p-values and intervals.

    A coefficient is nan when a column is constant; an interval is nan when no resample could be used.
    """

    bench: str
    downstream: str
    n: int
    values: dict[str, float]  # method -> coefficient
    p_values: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    resamples: int
    used: int
    seed: int
    level: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON entry: ``bench, downstream, n, pearson, spearman, kendall``, then ``METHOD_p``,
        ``METHOD_ci`` and ``bootstrap``; nan is written as null (JSON has no nan)."""
        out: dict[str, Any] = {"bench": self.bench, "downstream": self.downstream, "n": self.n}
        out |= {m: _json(self.values[m]) for m in METHODS}
        out |= {f"{m}_p": _json(self.p_values[m]) for m in METHODS}
        out |= {f"{m}_ci": [_json(v) for v in self.intervals[m]] for m in METHODS}
        out["bootstrap"] = {"resamples": self.resamples, "used": self.used, "seed": self.seed, "level": self.level}
        return out


def _json(value: float) -> float | None:
    return None if math.isnan(value) else value


def bench_numbers(data: dict[str, Any]) -> dict[str, float]:
    """The benchmark numbers of one checked eval JSON: ``overall``, then each subset's accuracy and exact match."""
    out = {"overall": data["overall"]}
    for name, group in data["subsets"].items():
        out |= {f"{name}.accuracy": group["accuracy"], f"{name}.exact_match": group["exact_match"]}
    return out


def read_downstream(path: str | Path) -> tuple[list[str], dict[str, list[float]]]:
    """RM names (file order) and each metric's values from a CSV with a ``name`` column and numeric others.

    A missing or non-numeric cell, a duplicate name or a file without metric columns is an ``InputError``
    with its line.
    """
    rows = load_rows(path)
    header = list(rows[0][1])
    hint = "give one row per RM: name,<metric>,... with a number in every cell"
    if "name" not in header or len(header) < 2:
        raise InputError("needs a 'name' column and at least one metric column", path=str(path), line=1, hint=hint)
    metrics = [h for h in header if h != "name"]
    names: list[str] = []
    values: dict[str, list[float]] = {m: [] for m in metrics}
    seen: dict[str, int] = {}
    for line, row in rows:
        name = (row["name"] or "").strip()
        if not name:
            raise InputError("has no name", path=str(path), line=line, field="name", hint=hint)
        if name in seen:
            raise InputError(f"'{name}' is also on line {seen[name]}", path=str(path), line=line, field="name")
        seen[name] = line
        names.append(name)
        for m in metrics:
            values[m].append(_number(row[m], str(path), line, m))
    return names, values


def _number(cell: str | None, path: str, line: int, column: str) -> float:
    try:
        value = float(cell) if cell is not None else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        shown = "is missing" if cell is None or not cell.strip() else f"'{cell}' is not a finite number"
        raise InputError(shown, path=path, line=line, field=column, hint="write a number, e.g. 0.62")
    return value


def load_rm_table(bench_paths: Sequence[str | Path], downstream_path: str | Path) -> RmTable:
    """Pair every eval JSON (RM = file stem) with its downstream row; a name on one side only is an error.

    The eval JSONs are read and checked as ``cheems leaderboard`` reads them (same metric and subsets in
    every file).
    """
    stems = [Path(p).stem for p in bench_paths]
    for i, stem in enumerate(stems):
        if stem in stems[:i]:
            raise InputError(
                f"two --bench files are both named '{stem}'",
                path=str(bench_paths[i]),
                hint="rename one: the file stem names the RM",
            )
    names, downstream = read_downstream(downstream_path)
    without_json = [n for n in names if n not in stems]
    if without_json:
        raise InputError(
            f"RM(s) {', '.join(without_json)} have a row but no --bench file",
            path=str(downstream_path),
            hint=f"give --bench {without_json[0]}.json (the eval JSON's stem names the RM), or drop the row",
        )
    without_row = [p for p, s in zip(bench_paths, stems) if s not in names]
    if without_row:
        raise InputError(
            f"--bench {', '.join(map(str, without_row))} name(s) RM(s) "
            f"{', '.join(Path(p).stem for p in without_row)} without a row here",
            path=str(downstream_path),
            hint="add a row per RM, named by the eval JSON's file stem",
        )
    board = load_leaderboard(bench_paths, stems)
    by_name = {row.name: bench_numbers(row.data) for row in board.rows}
    keys = list(bench_numbers(board.rows[0].data))
    bench = {k: np.array([by_name[n][k] for n in names]) for k in keys}
    table = RmTable(names, bench, {m: np.array(v) for m, v in downstream.items()})
    table.warnings = [note for note in board.notes if note.startswith("subset ")]  # pair counts that differ
    table.warnings += _table_warnings(table)
    return table


def _table_warnings(table: RmTable) -> list[str]:
    n = len(table.names)
    if n < 3:
        raise InputError(
            f"{n} RM(s): a correlation needs at least 3",
            hint="give an eval JSON and a downstream row for each of 3 or more RMs",
        )
    out = []
    if n < FEW_RMS:
        out.append(
            f"only {n} RMs: correlations over fewer than {FEW_RMS} are very uncertain (see the intervals; "
            "the paper uses 26)"
        )
    for kind, columns in (("benchmark number", table.bench), ("downstream metric", table.downstream)):
        out += [f"{kind} {k} is the same for every RM: no correlation" for k, v in columns.items() if np.ptp(v) == 0]
    return out


def correlate(table: RmTable, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> list[Correlation]:
    """Every benchmark number against every downstream metric (in that order), with bootstrap intervals."""
    from scipy import stats

    from cheems.metrics.bootstrap import check_bootstrap, percentile_interval, resample_indices

    check_bootstrap(resamples, level)
    n = len(table.names)
    picks = resample_indices(n, resamples, seed)
    out = []
    for b, x in table.bench.items():
        for d, y in table.downstream.items():
            draws = resampled(x, y, picks)
            ok = ~np.isnan(draws[0])
            constant = np.ptp(x) == 0 or np.ptp(y) == 0
            values, p_values = {}, {}
            for m, test in zip(METHODS, (stats.pearsonr, stats.spearmanr, stats.kendalltau)):
                result = (math.nan, math.nan) if constant else test(x, y)
                values[m], p_values[m] = float(result[0]), float(result[1])
            intervals = {
                m: percentile_interval(draws[i, ok], level) if ok.any() else (math.nan, math.nan)
                for i, m in enumerate(METHODS)
            }
            out.append(Correlation(b, d, n, values, p_values, intervals, resamples, int(ok.sum()), seed, level))
    return out


def resampled(x: np.ndarray, y: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Pearson, Spearman and Kendall (tau-b) of each resample ``x[picks[i]], y[picks[i]]``: shape (3, resamples).

    nan where a resample has fewer than 3 distinct RMs or a resampled column is constant.
    """
    from scipy.stats import rankdata

    ordered = np.sort(picks, axis=1)
    enough = (ordered[:, 1:] != ordered[:, :-1]).sum(axis=1) + 1 >= 3
    xs, ys = x[picks], y[picks]
    out = np.full((3, len(picks)), np.nan)
    ok = enough & (np.ptp(xs, axis=1) > 0) & (np.ptp(ys, axis=1) > 0)
    xs, ys = xs[ok], ys[ok]
    out[0, ok] = _pearson(xs, ys)
    out[1, ok] = _pearson(rankdata(xs, axis=1), rankdata(ys, axis=1))
    out[2, ok] = _tau_b(xs, ys)
    return out


def _pearson(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r of two (rows, n) arrays with no constant row."""
    xc = xs - xs.mean(axis=1, keepdims=True)
    yc = ys - ys.mean(axis=1, keepdims=True)
    r = (xc * yc).sum(axis=1) / np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))
    return cast("np.ndarray", np.clip(r, -1.0, 1.0))  # rounding can step just past 1


def _tau_b(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Row-wise Kendall tau-b: sum of sign products over pairs / sqrt(untied x pairs * untied y pairs).

    Over the full n x n sign matrices every pair counts twice on both sides of the fraction, so the
    twos cancel. Computed a chunk of rows at a time so memory stays bounded.
    """
    n = xs.shape[1]
    step = max(1, _CELLS // (n * n))
    out = np.empty(len(xs))
    for start in range(0, len(xs), step):
        sx = np.sign(xs[start : start + step, :, None] - xs[start : start + step, None, :])
        sy = np.sign(ys[start : start + step, :, None] - ys[start : start + step, None, :])
        both = (sx * sy).sum(axis=(1, 2))
        out[start : start + step] = both / np.sqrt(np.abs(sx).sum(axis=(1, 2)) * np.abs(sy).sum(axis=(1, 2)))
    return out


# ---------------------------------------------------------------------------- charts and page

PAGE_FILES = ("correlate.html", "scatter.png", "heatmap.png")
"""What ``cheems correlate -o DIR`` writes in DIR."""


def _coefficient(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.2f}"


def scatter_chart(table: RmTable, correlations: list[Correlation]) -> bytes:
    """Figure 5's panels: one per (benchmark number, metric), each RM a named point, the least-squares line,
    and r, rho and tau in the title. PNG bytes."""
    fig, axes = new_panels(len(correlations), width=3.4, height=3.1, sharey=False)
    for ax, c in zip(axes, correlations):
        x, y = table.bench[c.bench], table.downstream[c.downstream]
        ax.scatter(x, y, s=22, color="#1f77b4", zorder=3)
        for name, xi, yi in zip(table.names, x, y):
            ax.annotate(name, (xi, yi), xytext=(3, 3), textcoords="offset points", fontsize=7)
        if np.ptp(x) > 0:
            slope, intercept = np.polyfit(x, y, 1)
            ends = np.array([x.min(), x.max()])
            ax.plot(ends, slope * ends + intercept, color="#d62728", lw=1, alpha=0.7)
        ax.margins(x=0.2, y=0.12)  # room for the names of the points at the edges
        ax.set_xlabel(c.bench, fontsize=8)
        ax.set_ylabel(c.downstream, fontsize=8)
        ax.tick_params(labelsize=7, labelleft=True)
        v = c.values
        title = f"r {_coefficient(v['pearson'])}  ρ {_coefficient(v['spearman'])}  τ {_coefficient(v['kendall'])}"
        ax.set_title(title, fontsize=9)
    return png_bytes(fig)


def heatmap_chart(table: RmTable, correlations: list[Correlation]) -> bytes:
    """The correlation table as a heatmap: benchmark numbers down, metrics across, coloured by Pearson's r
    (grey where undefined), each cell showing r, rho and tau. PNG bytes."""
    rows, cols = list(table.bench), list(table.downstream)
    grid = np.array([[c.values["pearson"] for c in correlations]]).reshape(len(rows), len(cols))
    fig, ax = new_figure(2.2 + 1.5 * len(cols), 1.0 + 0.55 * len(rows))
    ax.grid(False)
    cmap = _pyplot_colormap()
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=-1, vmax=1, aspect="auto")
    for c, (i, j) in zip(correlations, np.ndindex(len(rows), len(cols))):
        v = c.values
        text = f"r {_coefficient(v['pearson'])}\nρ {_coefficient(v['spearman'])}  τ {_coefficient(v['kendall'])}"
        dark = abs(v["pearson"]) > 0.6  # NaN compares False: grey cells keep black text
        ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    ax.set_xticks(range(len(cols)), cols, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    fig.colorbar(image, ax=ax, label="Pearson r", shrink=0.9)
    return png_bytes(fig)


def _pyplot_colormap():
    """Red-blue diverging, light enough for black text; undefined cells light grey."""
    from matplotlib import colormaps

    cmap = colormaps["RdBu_r"].copy()
    cmap.set_bad("#dddddd")
    return cmap


def correlate_html(table: RmTable, correlations: list[Correlation], title: str = "") -> str:
    """A self-contained page: the correlation table, the scatter panels, the heatmap and the numbers per RM."""
    heads = ["benchmark number", "downstream", "n"] + [f"{m} [{correlations[0].level:.0%} CI]" for m in METHODS]
    rows = [[c.bench, c.downstream, str(c.n), *(cell(c, m) for m in METHODS)] for c in correlations]
    numbers = HtmlTable(
        ["RM", *table.bench, *table.downstream],
        [
            [name, *(f"{v[i]:.3f}" for v in (*table.bench.values(), *table.downstream.values()))]
            for i, name in enumerate(table.names)
        ],
        numeric={*table.bench, *table.downstream},
    )
    sections = [
        Section(
            "Correlations",
            [HtmlTable(heads, rows, numeric={"n", *heads[3:]}), Figure(heatmap_chart(table, correlations), "heatmap")],
            f"Over {len(table.names)} RMs; p: scipy's two-sided p-value (Pearson: t-test; Spearman: t approximation; "
            "Kendall: exact without ties, else normal).",
        ),
        Section(
            "Benchmark number against downstream result",
            [
                Figure(
                    scatter_chart(table, correlations),
                    "one panel per benchmark number and metric",
                    "red: least squares",
                )
            ],
        ),
        Section("The numbers per RM", [numbers]),
    ]
    return render_page(title or "Benchmark vs downstream correlation", sections, page_notes(correlations, table))


def cell(c: Correlation, method: str, p_value: bool = True, compact: bool = False) -> str:
    """A coefficient as a table shows it: ``+0.93 [+0.41, +1.00] p=0.021`` (the parts that are defined);
    ``compact`` (a terminal) puts the interval on a line of its own as one word, ``[+.41,+1.00]``."""
    low, high = c.intervals[method]
    if math.isnan(low):
        interval = ""
    else:
        interval = "\n" + compact_interval(low, high, signed=True) if compact else f" [{low:+.2f}, {high:+.2f}]"
    p = c.p_values[method]
    return _coefficient(c.values[method]) + interval + ("" if math.isnan(p) or not p_value else f" p={p:.2g}")


def page_notes(correlations: list[Correlation], table: RmTable) -> list[str]:
    """How the intervals were drawn, and every warning about the inputs."""
    c = correlations[0]
    used = [x.used for x in correlations]
    return [
        f"[low, high]: {c.level:.0%} percentile bootstrap over RMs, {c.resamples:,} resamples (seed {c.seed}); "
        f"resamples with fewer than 3 distinct RMs or a constant column are skipped ({min(used):,} to "
        f"{max(used):,} used)",
        *table.warnings,
    ]


def write_correlations(
    table: RmTable, result: list[Correlation], output_json: str | Path | None, output: str | Path | None
) -> None:
    """The correlations as JSON (``output_json``) and the page with its charts (:data:`PAGE_FILES` in the folder
    ``output``), all or none."""
    from cheems.data.io import write_bytes, write_json, write_text
    from cheems.outputs import together

    with together():
        if output_json:
            write_json(output_json, {"correlations": [c.to_dict() for c in result]})
        if output:
            folder = Path(output)
            write_text(folder / "correlate.html", correlate_html(table, result))
            write_bytes(folder / "scatter.png", scatter_chart(table, result))
            write_bytes(folder / "heatmap.png", heatmap_chart(table, result))


def print_correlations(result: list[Correlation], console: Console) -> None:
    """The table: one row per (benchmark number, metric), each coefficient with its interval."""
    from rich import box
    from rich.table import Table

    c = result[0]
    title = f"correlation over {c.n} RMs ({c.level:.0%} bootstrap CI over RMs)"
    # fits an 80-column terminal: no vertical rules, each interval under its coefficient; a long
    # benchmark number or metric name folds, nothing is cut
    table = Table(title=title, box=box.SIMPLE_HEAVY, collapse_padding=True)
    table.add_column("benchmark", overflow="fold")
    table.add_column("downstream", overflow="fold")
    for method in METHODS:
        table.add_column(method, justify="right", overflow="fold")
    for c in result:
        cells = (cell(c, m, p_value=False, compact=True) for m in METHODS)
        table.add_row(c.bench, c.downstream, *cells)
    console.print(table)
    console.print("p-values: in --output-json and the -o page", highlight=False)
