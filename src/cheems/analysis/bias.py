"""Annotator and judge bias (the paper's Appendix D.3, Figure 15): position bias and length preference.

Whoever made a set of comparisons (people in the annotation app, an LLM judge, the makers of an
imported set) leaves traces in it that have nothing to do with quality. Two are measured here, for
each group of comparisons (an input file, a comparison ``source`` or an ``annotator``):

- **position bias**: P(the first-shown response wins) among the decisive (non-tie) comparisons whose
  shown order is known, with a Clopper–Pearson interval and the two-sided binomial test against 1/2;
  ties are counted apart;
- **length preference**: P(A wins) as a function of len(A) − len(B) in characters, in equal-count
  (quantile) bins with an interval per bin, and P(the longer response wins) among decisive
  comparisons of responses of different length.

Where comparisons come from: records (:func:`cheems.data.stream.read_records`), whose comparison extra
``shown`` (``"ab"``: ``a`` was shown first, as ``cheems judge`` and ``cheems annotate export`` write
it) gives the order; a record with a ``rank`` and no comparisons gives every pair its rank orders or
ties (:func:`cheems.ranking.rank_comparisons`), with no order. Details files of a judge evaluation
(:func:`cheems.evaluate.details.read_details`) give each parsed verdict, shown order included.

Without a shown order there is no "A": a comparison's ``a`` is wherever the file put it (an
imported pairwise set stores the chosen response first, a ranked list is best-first), so P(a wins)
would describe the file, not the labeller. Such a group's length curve counts each comparison from
both sides, the curve of a labeller shown the pair in random order with no position bias: it is
symmetric by construction, P(A wins | Δ) = 1 − P(A wins | −Δ), and its bins are bins of |Δ| with
P(longer wins) in each. Nothing about position is reported for such a group.

The intervals treat comparisons as independent draws. Comparisons that share a prompt or a
response (every pair of a ranked list) are not quite, so their intervals are somewhat too narrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.data.io import ReadResult, load_rows
from cheems.data.schema import Comparison, Record
from cheems.data.stream import read_records
from cheems.errors import InputError
from cheems.evaluate.details import Details, read_details
from cheems.metrics.outcomes import PairOutcome
from cheems.ranking import rank_comparisons

if TYPE_CHECKING:
    from rich.console import Console

BY = ("file", "source", "annotator")
LEVEL = 0.95
VERDICT_OUTCOME = {"A": "a", "B": "b", "C": "tie"}  # a verdict is about the shown order: A = first shown


@dataclass(frozen=True)
class Judgement:
    """One comparison as the analysis sees it: lengths of A and B (characters) and the outcome.

    ``outcome`` is ``"a"``, ``"b"`` or ``"tie"``. A is the first-shown response when ``shown``,
    else the comparison's ``a`` (an order that means nothing; see the module docstring).
    """

    a_chars: int
    b_chars: int
    outcome: str
    shown: bool

    @property
    def delta(self) -> int:
        """len(A) − len(B)."""
        return self.a_chars - self.b_chars


# ---------------------------------------------------------------------------------- reading inputs


@dataclass
class Loaded:
    """Judgements grouped for the analysis, what the inputs left out (notes), and what reading skipped."""

    groups: dict[str, list[Judgement]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: list[InputError] = field(default_factory=list)
    warnings: list[InputError] = field(default_factory=list)

    def add(self, group: str, judgement: Judgement) -> None:
        self.groups.setdefault(group, []).append(judgement)


def comparison_judgement(record: Record, c: Comparison, path: str) -> Judgement:
    """One comparison of a record as a :class:`Judgement` (A = the first shown when ``shown`` says)."""
    shown = (c.model_extra or {}).get("shown")
    if shown not in (None, "ab", "ba"):
        raise InputError(
            f"prompt '{record.id}': a comparison's shown order is {shown!r}",
            path=path,
            field="shown",
            hint="'ab' (a was shown first) or 'ba' (b was), or leave it out when the order is unknown",
        )
    first, second = (c.b, c.a) if shown == "ba" else (c.a, c.b)
    won = c.winner_loser()
    outcome = "tie" if won is None else ("a" if won[0] == first else "b")
    return Judgement(
        len(record.response(first).content), len(record.response(second).content), outcome, shown is not None
    )


def _group_of(c: Comparison, by: str, path: str) -> str:
    if by == "file":
        return path
    return getattr(c, by) or f"(no {by})"


def add_records(loaded: Loaded, records: Sequence[Record], path: str, by: str) -> int:
    """Add every comparison of ``records`` (read from ``path``) to ``loaded``; returns how many."""
    n = from_rank = ranked = bare = 0
    for record in records:
        comparisons = record.comparisons
        if not comparisons and record.rank:
            comparisons = rank_comparisons(record.rank)
            from_rank += len(comparisons)
            ranked += 1
        bare += not comparisons
        for c in comparisons:
            loaded.add(_group_of(c, by, path), comparison_judgement(record, c, path))
        n += len(comparisons)
    if from_rank:
        loaded.notes.append(
            f"{path}: {from_rank} pair(s) derived from the ranks of {ranked} prompt(s) without comparisons "
            "(no shown order: no position bias from them)"
        )
    if bare:
        loaded.notes.append(f"{path}: {bare} prompt(s) with neither comparisons nor a rank are left out")
    return n


def _verdict_judgements(prompt_id: str, pair: PairOutcome, path: str) -> list[Judgement | None]:
    """A judge's verdicts on one pair (None for an unparsed one); a scorer's pair is an error."""
    if pair.verdicts is None:
        raise InputError(
            "holds a scorer's scores, not judge verdicts: scores have no shown order or labeller to analyse",
            path=path,
            hint="pass the --details file of a judge evaluation (cheems eval --judge-model ...)",
        )
    chars = {pair.chosen: pair.chosen_chars, pair.rejected: pair.rejected_chars}
    out: list[Judgement | None] = []
    for v in pair.verdicts:
        if v.first not in chars:
            raise InputError(
                f"prompt '{prompt_id}': a verdict's first response '{v.first}' is neither "
                f"'{pair.chosen}' nor '{pair.rejected}'",
                path=path,
                field="first",
                hint="write the file again with cheems eval --details",
            )
        second = pair.rejected if v.first == pair.chosen else pair.chosen
        out.append(
            None if v.label is None else Judgement(chars[v.first], chars[second], VERDICT_OUTCOME[v.label], True)
        )
    return out


def add_details(loaded: Loaded, details: Details, by: str) -> int:
    """Add every parsed verdict of a judge's details file (one group: the file, or its scorer); returns how many."""
    group = details.path if by == "file" else details.scorer
    n = unparsed = 0
    for prompts in details.outcomes.values():
        for o in prompts:
            for pair in o.pairs:
                for judgement in _verdict_judgements(o.prompt_id, pair, details.path):
                    if judgement is None:
                        unparsed += 1
                        continue
                    loaded.add(group, judgement)
                    n += 1
    if unparsed:
        loaded.notes.append(f"{details.path}: {unparsed} verdict(s) that could not be parsed are left out")
    return n


def is_details_file(path: str | Path, skip_invalid: bool = False) -> bool:
    """Whether a file is a details file (its rows have ``bench`` and ``pairs``) rather than records."""
    rows = load_rows(path, skip_invalid, [])  # lines skipped here are reported when the records are read
    return bool(rows) and isinstance(rows[0][1], dict) and "bench" in rows[0][1] and "pairs" in rows[0][1]


def load_judgements(paths: Sequence[str | Path], by: str = "file", skip_invalid: bool = False) -> Loaded:
    """Read record files and judge details files into judgements grouped ``by`` file, source or annotator.

    A file that gives no comparison at all is an ``InputError`` naming it.
    """
    if by not in BY:
        raise InputError(f"unknown grouping '{by}'", path="--by", hint=f"use one of {', '.join(BY)}")
    loaded = Loaded()
    seen: set[str] = set()
    for p in paths:
        path = str(p)
        if path in seen:
            raise InputError("is given twice", path=path, hint="name each file once")
        seen.add(path)
        if is_details_file(p, skip_invalid):
            n = add_details(loaded, read_details(p), by)
        else:
            result: ReadResult = read_records(p, skip_invalid=skip_invalid)
            loaded.skipped += result.skipped
            loaded.warnings += result.warnings
            n = add_records(loaded, result.records, path, by)
        if n == 0:
            raise InputError(
                "has no comparison: no record has comparisons or a rank, and no verdict was parsed",
                path=path,
                hint="analyse labelled records (cheems judge or cheems annotate export output, an imported "
                "preference set) or a judge's cheems eval --details file",
            )
    return loaded


# ---------------------------------------------------------------------------------- the numbers


@dataclass
class Share:
    """``wins`` of ``n``: the share, its Clopper–Pearson interval and the two-sided binomial test against 1/2."""

    wins: int
    n: int
    share: float | None
    ci: tuple[float, float] | None
    p_value: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "wins": self.wins,
            "n": self.n,
            "share": self.share,
            "ci": None if self.ci is None else list(self.ci),
            "p_value": self.p_value,
        }


def binomial_share(wins: int, n: int, level: float = LEVEL) -> Share:
    """The share ``wins / n`` with its exact (Clopper–Pearson) interval and binomial p-value vs 1/2."""
    if n == 0:
        return Share(wins, 0, None, None, None)
    from scipy.stats import binomtest

    test = binomtest(wins, n, 0.5)
    ci = test.proportion_ci(confidence_level=level, method="exact")
    return Share(wins, n, wins / n, (float(ci.low), float(ci.high)), float(test.pvalue))


@dataclass
class LengthBin:
    """One equal-count bin of the length curve: its range of x, the median x, and the share that won."""

    low: float
    high: float
    median: float
    wins: Share

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "median": self.median, **self.wins.to_dict()}


def quantile_bins(x: Sequence[float], wins: Sequence[bool], n_bins: int, level: float = LEVEL) -> list[LengthBin]:
    """Equal-count bins of ``x`` (edges at its quantiles; equal values stay in one bin, so there may be fewer).

    A value on an inner edge goes to the bin above it. Each bin reports its smallest and largest x,
    its median x and the share of ``wins`` in it.
    """
    import numpy as np

    if not len(x):
        return []
    values, hits = np.asarray(x, dtype=float), np.asarray(wins, dtype=bool)
    edges = np.unique(np.quantile(values, np.linspace(0, 1, n_bins + 1)))
    index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, max(len(edges) - 2, 0))
    bins = []
    for i in np.unique(index):
        members = values[index == i]
        won = hits[index == i]
        bins.append(
            LengthBin(
                float(members.min()),
                float(members.max()),
                float(np.median(members)),
                binomial_share(int(won.sum()), len(members), level),
            )
        )
    return bins


@dataclass
class LengthCurve:
    """P(A wins) by length difference.

    Not ``mirrored``: bins of Δ = len(first shown) − len(second), share = P(first shown wins).
    ``mirrored`` (no shown order): bins of |Δ| over pairs of different length, share = P(longer wins);
    the curve over Δ is those points at +|Δ| and 1 − share at −|Δ|.
    """

    mirrored: bool
    bins: list[LengthBin]

    def points(self) -> list[tuple[float, float, float, float]]:
        """(x, share, ci low, ci high) over Δ from left to right, mirrored points included."""
        right: list[tuple[float, float, float, float]] = []
        for b in self.bins:
            share, ci = b.wins.share, b.wins.ci
            if share is not None and ci is not None:  # both None, or neither: the bin has pairs
                right.append((b.median, share, *ci))
        if not self.mirrored:
            return right
        left = [(-x, 1 - p, 1 - high, 1 - low) for x, p, low, high in reversed(right)]
        return left + right

    def to_dict(self) -> dict[str, Any]:
        return {
            "x": "|len(A) - len(B)|" if self.mirrored else "len(first shown) - len(second shown)",
            "share": "P(longer wins)" if self.mirrored else "P(first shown wins)",
            "mirrored": self.mirrored,
            "bins": [b.to_dict() for b in self.bins],
        }


@dataclass
class GroupBias:
    """The bias numbers of one group of comparisons."""

    name: str
    comparisons: int
    ties: int
    with_order: int  # comparisons whose shown order is known
    position: Share | None  # P(first shown wins) among decisive comparisons with an order; None without any
    position_ties: int  # ties among the comparisons with an order
    longer: Share  # P(longer wins) among decisive comparisons of responses of different length
    same_length: int  # decisive comparisons of two responses of the same length (in no length share)
    curve: LengthCurve

    def to_dict(self) -> dict[str, Any]:
        return {
            "comparisons": self.comparisons,
            "ties": self.ties,
            "with_shown_order": self.with_order,
            "position": None
            if self.position is None
            else {**self.position.to_dict(), "ties": self.position_ties, "share_is": "P(first shown wins)"},
            "longer_wins": {**self.longer.to_dict(), "same_length": self.same_length},
            "length_curve": self.curve.to_dict(),
        }


def length_curve(judgements: Sequence[Judgement], n_bins: int, level: float = LEVEL) -> LengthCurve:
    """The curve over shown order when every decisive comparison has one, else mirrored (module docstring)."""
    decisive = [j for j in judgements if j.outcome != "tie"]
    if decisive and all(j.shown for j in decisive):
        return LengthCurve(
            False, quantile_bins([j.delta for j in decisive], [j.outcome == "a" for j in decisive], n_bins, level)
        )
    differ = [j for j in decisive if j.delta != 0]
    longer_won = [(j.outcome == "a") == (j.delta > 0) for j in differ]
    return LengthCurve(True, quantile_bins([abs(j.delta) for j in differ], longer_won, n_bins, level))


def group_bias(name: str, judgements: Sequence[Judgement], n_bins: int = 10, level: float = LEVEL) -> GroupBias:
    """Position bias, P(longer wins) and the length curve of one group."""
    ordered = [j for j in judgements if j.shown]
    ordered_decisive = [j for j in ordered if j.outcome != "tie"]
    decisive = [j for j in judgements if j.outcome != "tie"]
    differ = [j for j in decisive if j.delta != 0]
    return GroupBias(
        name=name,
        comparisons=len(judgements),
        ties=len(judgements) - len(decisive),
        with_order=len(ordered),
        position=binomial_share(sum(j.outcome == "a" for j in ordered_decisive), len(ordered_decisive), level)
        if ordered
        else None,
        position_ties=len(ordered) - len(ordered_decisive),
        longer=binomial_share(sum((j.outcome == "a") == (j.delta > 0) for j in differ), len(differ), level),
        same_length=len(decisive) - len(differ),
        curve=length_curve(judgements, n_bins, level),
    )


@dataclass
class BiasReport:
    """Every group's bias numbers, how they were grouped and binned, and what the inputs left out."""

    by: str
    n_bins: int
    groups: list[GroupBias]
    notes: list[str]
    level: float = LEVEL
    unit: str = "chars"

    def to_dict(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "unit": self.unit,
            "bins": self.n_bins,
            "level": self.level,
            "groups": {g.name: g.to_dict() for g in self.groups},
            "notes": self.notes,
        }


def bias_report(loaded: Loaded, by: str = "file", n_bins: int = 10, level: float = LEVEL) -> BiasReport:
    """The analysis of every group, in the order the groups were first met."""
    if n_bins < 1:
        raise InputError(f"needs at least one bin, got {n_bins}", path="--bins", hint="e.g. --bins 10")
    groups = [group_bias(name, js, n_bins, level) for name, js in loaded.groups.items()]
    notes = list(loaded.notes)
    for g in groups:
        if g.with_order < g.comparisons:
            notes.append(
                f"{g.name}: {g.comparisons - g.with_order} of {g.comparisons} comparisons have no shown order"
                + (" (no position bias for them)" if g.with_order else ": no position bias")
                + ("; its length curve counts each pair from both sides" if g.curve.mirrored else "")
            )
    return BiasReport(by, n_bins, groups, notes, level)


# ---------------------------------------------------------------------------------- tables, charts, page

TABLE_COLUMNS = [
    "group",
    "comparisons",
    "ties",
    "shown order",
    "P(first shown wins) [95% CI]",
    "p (position)",
    "P(longer wins) [95% CI]",
    "p (length)",
]
BIN_COLUMNS = ["group", "x", "range", "median", "n", "share [95% CI]"]
BIAS_FILES = ("bias.json", "position.png", "length.png", "bias.html")


def share_text(s: Share | None, missing: str = "no shown order") -> str:
    """``0.512 [0.480, 0.544] n=812``; ``missing`` when there is nothing to measure."""
    if s is None or s.share is None or s.ci is None:
        return missing if s is None else "– (n=0)"
    return f"{s.share:.3f} [{s.ci[0]:.3f}, {s.ci[1]:.3f}] n={s.n}"


def p_text(p: float | None) -> str:
    """A p-value in two significant digits (tiny ones as ``<1e-16``)."""
    if p is None:
        return "–"
    return "<1e-16" if p < 1e-16 else f"{p:.2g}"


def table_rows(report: BiasReport) -> list[list[str]]:
    """One row per group, in :data:`TABLE_COLUMNS` order (the CLI's table and the page's)."""
    return [
        [
            g.name,
            str(g.comparisons),
            str(g.ties),
            str(g.with_order),
            share_text(g.position),
            p_text(g.position.p_value if g.position else None),
            share_text(g.longer, "–"),
            p_text(g.longer.p_value),
        ]
        for g in report.groups
    ]


def bin_rows(report: BiasReport) -> list[list[str]]:
    """Every bin of every group's length curve, in :data:`BIN_COLUMNS` order."""
    rows = []
    for g in report.groups:
        x = "|Δ|, P(longer wins)" if g.curve.mirrored else "Δ, P(first shown wins)"
        for b in g.curve.bins:
            span = f"{b.low:g}" if b.low == b.high else f"{b.low:g} … {b.high:g}"
            rows.append([g.name, x, span, f"{b.median:g}", str(b.wins.n), share_text(b.wins)])
    return rows


def _labels(report: BiasReport) -> list[str]:
    """Short chart labels: a file's name without its folder when that stays unique."""
    names = [g.name for g in report.groups]
    if report.by == "file":
        short = [Path(n).name for n in names]
        if len(set(short)) == len(short):
            names = short
    return names


def position_png(report: BiasReport) -> bytes:
    """Bars of P(first shown wins) with their intervals, one per group; 0.5 is no position bias."""
    from cheems.evaluate.plots import new_figure, png_bytes

    fig, ax = new_figure(max(4.0, 1.3 * len(report.groups) + 1.5), 3.8)
    for i, g in enumerate(report.groups):
        s = g.position
        if s is None or s.share is None or s.ci is None:
            ax.text(i, 0.5, "no shown order", rotation=90, ha="center", va="center", color="#59636e")
            continue
        ax.bar(i, s.share, width=0.6, color="#4c78a8", yerr=[[s.share - s.ci[0]], [s.ci[1] - s.share]], capsize=5)
        ax.text(i, s.ci[1] + 0.02, f"{s.share:.2f}\nn={s.n}", ha="center", va="bottom", fontsize=8)
    ax.axhline(0.5, color="#c0392b", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(report.groups)), _labels(report), rotation=15 if len(report.groups) > 3 else 0)
    ax.set_xlim(-0.7, len(report.groups) - 0.3)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("P(first shown wins)")
    ax.set_title(f"position bias ({report.level:.0%} Clopper–Pearson intervals)")
    return png_bytes(fig)


def length_png(report: BiasReport) -> bytes:
    """P(A wins) against len(A) − len(B), one panel per group, with interval bands; a mirrored curve is dashed."""
    from matplotlib.ticker import FuncFormatter, SymmetricalLogLocator

    from cheems.evaluate.plots import new_panels, png_bytes

    fig, axes = new_panels(len(report.groups))
    for ax, g, label in zip(axes, report.groups, _labels(report)):
        points = g.curve.points()
        if points:
            x, share, low, high = zip(*points)
            ax.fill_between(x, low, high, color="#4c78a8", alpha=0.25, linewidth=0)
            ax.plot(x, share, marker="o", markersize=3, color="#4c78a8", linestyle="--" if g.curve.mirrored else "-")
        ax.axhline(0.5, color="#c0392b", linestyle="--", linewidth=1)
        ax.axvline(0, color="#59636e", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=10)  # most gaps are small, a few are thousands of characters
        widest = max((abs(x) for x, *_ in points), default=0)
        subs = (1, 3) if widest < 300 else (1,)  # ticks at 1, 3, 10, 30 only where they do not crowd
        ax.xaxis.set_major_locator(SymmetricalLogLocator(base=10, linthresh=10, subs=subs))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.margins(x=0.04)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(
            label + ("\n(no shown order: mirrored)" if g.curve.mirrored else "\n(A = first shown)"), fontsize=9
        )
        ax.set_xlabel(f"len(A) − len(B) ({report.unit}, bin medians)")
    axes[0].set_ylabel("P(A wins)")
    return png_bytes(fig)


def bias_page(report: BiasReport, title: str, position: bytes, length: bytes) -> str:
    """The self-contained ``bias.html``: the table, both charts and every bin."""
    from cheems.evaluate.html import Figure, HtmlTable, Section, render_page

    numeric = set(TABLE_COLUMNS[1:])
    level = f"{report.level:.0%}"
    sections = [
        Section(
            "Position bias",
            [
                HtmlTable(TABLE_COLUMNS, table_rows(report), f"grouped by {report.by}", numeric),
                Figure(position, "P(first shown wins) per group", f"0.5 = no position bias; {level} Clopper–Pearson"),
            ],
            "P(the first-shown response wins) among decisive comparisons whose shown order is known, and "
            "P(the longer response wins) among decisive comparisons of responses of different length; "
            "p-values of the two-sided binomial test against 0.5. Ties are counted, never in a share.",
        ),
        Section(
            "Length",
            [
                Figure(length, "P(A wins) against the length difference, per group", "bands: per-bin intervals"),
                HtmlTable(BIN_COLUMNS, bin_rows(report), f"{report.n_bins} equal-count bins at most", {"median", "n"}),
            ],
            "P(A wins) in equal-count bins of len(A) − len(B). A is the first-shown response where the order is "
            "known; where it is not, each pair counts from both sides (a dashed, mirrored curve) and the bins "
            "are bins of |len(A) − len(B)| with P(longer wins).",
        ),
    ]
    return render_page(title, sections, report.notes)


def write_bias(report: BiasReport, folder: Path, title: str) -> None:
    """Write :data:`BIAS_FILES` into ``folder``: the JSON, both charts and the page."""
    from cheems.data.io import write_bytes, write_json, write_text

    json_file, position_file, length_file, page_file = BIAS_FILES
    position, length = position_png(report), length_png(report)
    write_json(folder / json_file, report.to_dict())
    write_bytes(folder / position_file, position)
    write_bytes(folder / length_file, length)
    write_text(folder / page_file, bias_page(report, title, position, length))


def write_bias_outputs(
    report: BiasReport, output_json: str | Path | None, folder: str | Path | None, title: str
) -> None:
    """The numbers as JSON (``output_json``) and :data:`BIAS_FILES` in ``folder`` (:func:`write_bias`), all or none."""
    from cheems.data.io import write_json
    from cheems.outputs import together

    with together():
        if output_json:
            write_json(output_json, report.to_dict())
        if folder:
            write_bias(report, Path(folder), title)


def print_bias(report: BiasReport, by: str, console: Console) -> None:
    """The bias of each group as a table, then the report's notes."""
    from rich.table import Table

    table = Table(title=f"position and length bias, by {by}")
    table.add_column(TABLE_COLUMNS[0], overflow="fold")  # a group name is wrapped, never cut
    for col in TABLE_COLUMNS[1:]:
        table.add_column(col, justify="right")
    for row in table_rows(report):
        table.add_row(*row)
    console.print(table)
    for note in report.notes:
        console.print(f"note: {note}", soft_wrap=True)
