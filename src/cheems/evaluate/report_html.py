"""``report.html``: one evaluation as a self-contained page people look at.

The numbers come from the evaluation's JSON (:meth:`EvalReport.to_dict`, the same numbers as
``report.json``): the metrics table with confidence intervals when the JSON has them, accuracy by
category for each subset (the paper's Figure 4), the length diagnostics and, for a generative
judge, its verdicts. The charts that need every pair (chosen vs rejected score distributions and
the calibration curve behind ECE) are drawn from the outcomes; a judge has no scores and gets its
verdict block instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from cheems.evaluate.html import Figure, HtmlTable, Section, render_page
from cheems.evaluate.plots import new_figure, png_bytes
from cheems.judge import reason_text
from cheems.metrics.cheemsbench import calibration_bins
from cheems.metrics.outcomes import Outcomes, PromptOutcome

ScorePairs = tuple[np.ndarray, np.ndarray]
"""The chosen and the rejected response's score of every pair of a subset (:meth:`Outcomes.scores`)."""

# one colour per series, the same on every chart of a page (colour-blind safe pair first)
CHOSEN, REJECTED, THIRD = "#1f77b4", "#d95f02", "#7f7f7f"

LENGTH_GROUPS = {"chosen_longer": "chosen longer", "chosen_shorter": "chosen shorter", "same_length": "same length"}


def with_ci(group: dict[str, Any], key: str, compact: bool = False) -> str:
    """``0.812 [0.780, 0.845]`` when ``group`` has ``KEY_ci``, else ``0.812``.

    ``compact`` (terminal tables): ``0.812 [.78,.85]``, the interval to two places and without spaces, so
    that in a narrow terminal the cell wraps between the number and its interval, never inside either.
    """
    ci = group.get(f"{key}_ci")
    text = f"{group[key]:.3f}"
    if not ci:
        return text
    return f"{text} {compact_interval(*ci)}" if compact else f"{text} [{ci[0]:.3f}, {ci[1]:.3f}]"


def interval_note(settings: Mapping[str, Any]) -> str:
    """How intervals were drawn, as a note under a table says it; ``settings``: an ``Intervals.settings()``."""
    level, resamples, seed = settings["level"], settings["resamples"], settings["seed"]
    return f"intervals: {level * 100:g}% percentile bootstrap over prompts ({resamples} resamples, seed {seed})"


def compact_interval(low: float, high: float, signed: bool = False) -> str:
    """An interval as a terminal table shows it, one word: ``[.78,.85]``, or ``[-.05,+.28]`` when ``signed``
    (a difference or a coefficient): two places, no leading zero, no space."""
    spec = "+.2f" if signed else ".2f"
    return "[{},{}]".format(*(format(x, spec).replace("0.", ".", 1) for x in (low, high)))


def report_page(
    data: dict[str, Any], outcomes: Mapping[str, Iterable[PromptOutcome]], title: str, notes: Sequence[str] = ()
) -> str:
    """The whole page: ``data`` is the evaluation's JSON, ``outcomes`` its judged pairs per subset, ``notes`` what
    the numbers leave out and how their intervals were made (``report_notes``)."""
    sections = [metrics_section(data), categories_section(data)]
    if data.get("judge") is not None:
        sections.append(judge_section(data["judge"]))
    pairs = {name: Outcomes.of(prompts).scores() for name, prompts in outcomes.items()}
    scores = {name: s for name, s in pairs.items() if s is not None}
    if scores and len(scores) == len(pairs):  # a judge's subsets have no scores
        sections += [scores_section(scores), calibration_section(data, scores)]
    sections.append(length_section(data))
    if data.get("checks"):
        sections.append(checks_section(data["checks"]))
    return render_page(title, sections, [_summary(data), *notes])  # notes say how intervals were made


def _summary(data: dict[str, Any]) -> str:
    subsets = data["subsets"].values()
    prompts, pairs = sum(s["n_prompts"] for s in subsets), sum(s["n_pairs"] for s in subsets)
    return f"overall {with_ci(data, 'overall')} over {len(subsets)} subset(s): {prompts:,} prompts, {pairs:,} pairs"


def metrics_section(data: dict[str, Any]) -> Section:
    """Each subset's categories, the subset means (bold), then overall: the numbers of ``report.json``."""
    columns = ["subset", "category", "accuracy", "exact match", "prompts", "pairs", "ECE"]
    rows: list[list[str]] = []
    bold: set[int] = set()
    for name, subset in data["subsets"].items():
        for cat, m in subset.get("categories", {}).items():
            rows.append([name, cat, with_ci(m, "accuracy"), with_ci(m, "exact_match"), *_counts(m), ""])
        bold.add(len(rows))
        ece = f"{subset['ece']:.3f}" if "ece" in subset else ""
        means = [with_ci(subset, "accuracy"), with_ci(subset, "exact_match")]
        rows.append([name, "mean of categories", *means, *_counts(subset), ece])
    bold.add(len(rows))
    rows.append(["overall", "mean of (acc + exact) / 2", with_ci(data, "overall"), *[""] * 4])
    if not any("ece" in s for s in data["subsets"].values()):  # a judge has no scores to calibrate
        columns, rows = columns[:-1], [row[:-1] for row in rows]
    table = HtmlTable(columns, rows, numeric={"accuracy", "exact match", "prompts", "pairs", "ECE"}, bold_rows=bold)
    right = (
        "every verdict on it names the better-ranked one"
        if "judge" in data
        else "the better-ranked one gets the higher score"
    )
    text = (
        f"A pair is two responses of a prompt with different ranks; it is right when {right}. "
        "Accuracy: share of pairs right; exact match: share of prompts with every pair right. A "
        "subset's numbers are means over its categories; overall is the mean over subsets of (accuracy + exact "
        "match) / 2."
    )
    return Section("Metrics", [table], text)


def _counts(group: dict[str, Any]) -> list[str]:
    return [f"{group['n_prompts']:,}", f"{group['n_pairs']:,}"]


def categories_section(data: dict[str, Any]) -> Section:
    """Accuracy and exact match of every category, one chart per subset (the paper's Figure 4)."""
    figures = [category_chart(name, subset) for name, subset in data["subsets"].items()]
    band = any("accuracy_ci" in s for s in data["subsets"].values())
    text = "The dashed line is the subset's accuracy (mean of categories)" + (", the band its interval" if band else "")
    text += "; in brackets, each category's pairs."
    return Section("Accuracy by category", figures, text)


def category_chart(name: str, subset: dict[str, Any]) -> Figure:
    """Horizontal bars: each category's accuracy and exact match, the subset's mean accuracy as a line."""
    categories = subset.get("categories", {})
    labels = list(categories)
    fig, ax = new_figure(4.6, 0.9 + 0.42 * len(labels))
    ax.grid(False, axis="y")
    ax.grid(True, axis="x", alpha=0.3)
    rows = range(len(labels))
    for offset, key, colour, label in ((-0.2, "accuracy", CHOSEN, "accuracy"), (0.2, "exact_match", THIRD, "exact")):
        values = [categories[c][key] for c in labels]
        bars = ax.barh([y + offset for y in rows], values, height=0.38, color=colour, label=label)
        ax.bar_label(bars, fmt="%.2f", padding=2, fontsize=7)
    ax.axvline(subset["accuracy"], color=CHOSEN, linestyle="--", linewidth=1)
    if "accuracy_ci" in subset:
        ax.axvspan(*subset["accuracy_ci"], color=CHOSEN, alpha=0.12, linewidth=0)
    ax.set_yticks(list(rows), [f"{c} ({categories[c]['n_pairs']})" for c in labels])
    ax.invert_yaxis()  # first category on top, as in the table
    ax.set_xlim(0, 1.1)
    ax.set_xlabel("share right")
    ax.set_title(f"{name}: accuracy {subset['accuracy']:.3f}", fontsize=10, loc="left")
    # above the axes, right of the title: a legend inside would hide a long bar
    ax.legend(loc="lower right", bbox_to_anchor=(1, 1), ncols=2, fontsize=8, frameon=False)
    return Figure(png_bytes(fig), f"accuracy and exact match by category, subset {name}")


def scores_section(scores: dict[str, ScorePairs]) -> Section:
    """Chosen vs rejected score distributions, one chart per subset."""
    figures = [score_chart(name, *group) for name, group in scores.items()]
    text = (
        "Each ranked pair adds its chosen and its rejected response's score (a response in several pairs counts "
        "in each). The further apart the two, the better the scorer separates them."
    )
    return Section("Scores of chosen and rejected responses", figures, text)


def score_chart(name: str, chosen: np.ndarray, rejected: np.ndarray) -> Figure:
    """Two histograms on shared bins: scores of the chosen and of the rejected responses (one of each per pair)."""
    edges = np.histogram_bin_edges(np.concatenate([chosen, rejected]), bins=min(30, max(5, len(chosen) // 4)))
    fig, ax = new_figure(4.6, 3.0)
    for values, colour, label in ((chosen, CHOSEN, "chosen"), (rejected, REJECTED, "rejected")):
        ax.hist(values, bins=edges, color=colour, alpha=0.45, label=f"{label} (mean {values.mean():.3g})")
        ax.hist(values, bins=edges, color=colour, histtype="step", linewidth=1.2)
    ax.set_xlabel("score")
    ax.set_ylabel("pairs")
    ax.set_title(name, fontsize=10, loc="left")
    ax.legend(fontsize=8, frameon=False)
    return Figure(png_bytes(fig), f"score distributions of chosen and rejected responses, subset {name}")


def calibration_section(data: dict[str, Any], scores: dict[str, ScorePairs]) -> Section:
    """The reliability curve whose gaps ECE averages."""
    text = (
        "Pairs binned by |score difference| (5 equal-width bins); a point is the bin's confidence, sigmoid of its mean "
        "|difference|, against the share of its pairs right. ECE is the pair-weighted mean distance to the diagonal; "
        "it means something only for scores trained as Bradley–Terry log-odds."
    )
    return Section("Calibration", [calibration_chart(data, scores)], text)


def calibration_chart(data: dict[str, Any], scores: dict[str, ScorePairs]) -> Figure:
    """One line per subset through its :func:`calibration_bins`, with the diagonal of a calibrated scorer."""
    fig, ax = new_figure(4.6, 3.6)
    ax.grid(True, axis="x", alpha=0.3)
    ax.plot([0.5, 1], [0.5, 1], color=THIRD, linestyle=":", linewidth=1, label="calibrated")
    for (name, (chosen, rejected)), colour in zip(scores.items(), (CHOSEN, REJECTED, "#1b9e77", "#7570b3", "#e7298a")):
        bins = calibration_bins(chosen - rejected)
        ece = data["subsets"][name].get("ece")
        label = f"{name} (ECE {ece:.3f})" if ece is not None else name
        ax.plot([b.confidence for b in bins], [b.accuracy for b in bins], marker="o", color=colour, label=label)
        for b in bins:
            ax.annotate(
                str(b.count), (b.confidence, b.accuracy), textcoords="offset points", xytext=(4, -10), fontsize=7
            )
    ax.set_xlim(0.48, 1.02)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("confidence: sigmoid(mean |score difference|)")
    ax.set_ylabel("share of pairs right")
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return Figure(png_bytes(fig), "calibration curve", "numbers: pairs in the bin")


def length_section(data: dict[str, Any]) -> Section:
    """Accuracy where the chosen response is longer, shorter or as long: the tell of a length-following scorer."""
    groups = {
        **{name: s["length"] for name, s in data["subsets"].items() if "length" in s},
        "whole bench": data["length"],
    }
    rows = [[name, *(_length_cell(split[key]) for key in LENGTH_GROUPS), _gap(split)] for name, split in groups.items()]
    table = HtmlTable(
        ["subset", *LENGTH_GROUPS.values(), "longer − shorter"],
        rows,
        caption="accuracy (pairs); lengths in characters",
        numeric={*LENGTH_GROUPS.values(), "longer − shorter"},
        bold_rows={len(rows) - 1},
    )
    text = (
        "A scorer that prefers long answers is right where the chosen response is longer and wrong where it is "
        "shorter; a good one is right on both."
    )
    return Section("Length", [table, length_chart(groups)], text)


def _length_cell(group: dict[str, Any]) -> str:
    if group["accuracy"] is None:
        return f"— ({group['n_pairs']})"
    return f"{group['accuracy']:.3f} ({group['n_pairs']:,})"


def _gap(split: dict[str, Any]) -> str:
    longer, shorter = split["chosen_longer"]["accuracy"], split["chosen_shorter"]["accuracy"]
    return "—" if longer is None or shorter is None else f"{longer - shorter:+.3f}"


def length_chart(groups: dict[str, dict[str, Any]]) -> Figure:
    """Grouped bars: accuracy on chosen-longer, chosen-shorter and same-length pairs, per subset."""
    fig, ax = new_figure(4.6, 3.0)
    width = 0.8 / len(LENGTH_GROUPS)
    for i, (key, colour) in enumerate(zip(LENGTH_GROUPS, (CHOSEN, REJECTED, THIRD))):
        xs = [x + (i - 1) * width for x in range(len(groups))]
        values = [split[key]["accuracy"] for split in groups.values()]
        bars = ax.bar(xs, [v or 0 for v in values], width=width * 0.95, color=colour, label=LENGTH_GROUPS[key])
        ax.bar_label(bars, labels=["" if v is None else f"{v:.2f}" for v in values], padding=2, fontsize=7)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8, frameon=False, ncols=3, loc="upper center")
    return Figure(png_bytes(fig), "accuracy by length of the chosen response", "accuracy by which response is longer")


def checks_section(checks: list[dict[str, Any]]) -> Section:
    """The evaluation's own checks (the ``checks`` list of the JSON), warnings first, one row each."""
    ordered = sorted(checks, key=lambda c: c["level"] != "warning")  # stable: each check's subsets stay in order
    rows = [[c["name"], c["subset"] or "(bench)", c["level"], c["message"]] for c in ordered]
    bold = {i for i, c in enumerate(ordered) if c["level"] == "warning"}
    table = HtmlTable(["check", "subset", "level", "finding"], rows, bold_rows=bold)
    warned = len(bold)
    text = (
        f"{warned} warning(s). What each check measures and when it warns: docs/checks.md."
        if warned
        else ("No check warns. What each check measures and when it warns: docs/checks.md.")
    )
    return Section("Checks", [table], text)


def judge_section(judge: dict[str, Any]) -> Section:
    """The judge's run: what was asked, what it answered, position bias, cost."""
    rows = [[label, value] for label, value in _judge_rows(judge)]
    table = HtmlTable(["", "value"], rows, caption=judge.get("judge_model", ""), numeric={"value"})
    text = (
        "Verdicts are about the order the responses were shown in: A, the first shown wins; B, the second; C, a tie. "
        "A tie or an unparseable verdict counts as wrong."
    )
    return Section("Judge", [table, verdict_chart(judge)], text)


# the judge block's keys in reading order, with their labels (verdict counts and failure reasons: a row each)
JUDGE_LABELS = {
    "judge_model": "judge model",
    "template": "prompt template",
    "seed": "order seed",
    "both_orders": "both orders",
    "questions": "questions asked",
    "verdicts": "",
    "parse_failures": "unparseable verdicts",
    "parse_failure_reasons": "",
    "first_shown_win_share": "first-shown win share",
    "position_consistency": "same winner in both orders",
    "cached": "answers from the cache",
    "judged": "answers requested",
    "requests": "requests sent",
    "prompt_tokens": "prompt tokens",
    "completion_tokens": "completion tokens",
    "cost": "cost",
}
VERDICT_LABELS = {"A": "A: first shown wins", "B": "B: second shown wins", "C": "C: tie"}


def _judge_rows(judge: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for every key of the judge block; known keys first, in reading order, then any others."""
    rows: list[tuple[str, str]] = []
    for key in [*JUDGE_LABELS, *(k for k in judge if k not in JUDGE_LABELS)]:
        value, label = judge.get(key), JUDGE_LABELS.get(key, key)
        if value is None:
            continue
        if key == "verdicts":
            rows += [(VERDICT_LABELS.get(v, v), f"{count:,}") for v, count in value.items()]
        elif key == "parse_failure_reasons":
            rows += [(f"unparseable: {reason_text(code)}", f"{count:,}") for code, count in value.items()]
        elif key == "position_consistency":
            rate = "—" if value["rate"] is None else f"{value['rate']:.3f}"
            rows.append((label, f"{rate} ({value['consistent']:,} of {value['pairs']:,})"))
        elif key == "first_shown_win_share":
            rows.append((label, f"{value:.3f}"))
        elif key == "cost":
            rows.append((label, f"{value:.4f}"))
        elif isinstance(value, bool):
            rows.append((label, "yes" if value else "no"))
        elif not isinstance(value, (dict, list)):
            rows.append((label, f"{value:,}" if isinstance(value, int) else str(value)))
    return rows


def verdict_chart(judge: dict[str, Any]) -> Figure:
    """Bars of the verdict counts, unparseable ones included: a first-shown bias shows as A far above B."""
    short = {"A": "A\nfirst shown", "B": "B\nsecond shown", "C": "C\ntie"}
    counts = {short.get(k, k): v for k, v in judge.get("verdicts", {}).items()}
    counts["unparseable"] = judge.get("parse_failures", 0)
    fig, ax = new_figure(4.6, 2.8)
    bars = ax.bar(list(counts), list(counts.values()), color=[CHOSEN, REJECTED, THIRD, "#b2182b"][: len(counts)])
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_ylabel("verdicts")
    ax.tick_params(axis="x", labelsize=8)
    return Figure(png_bytes(fig), "verdict counts", "verdicts by shown order")
