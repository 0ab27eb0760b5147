"""Best-of-N: pick the best-scored response of each prompt and measure the picks against gold quality.

The downstream use of a reward model (the Cheems paper, section 6.2): sample N responses per prompt,
keep the one the RM scores highest. :func:`best_of_n` does the picking from any scores; when the
pool carries gold quality it draws the curve over n = 1, 2, 4, … N. The definitions (candidates, pick,
gold, quality, top tier, oracle, random) are in the README ("Best-of-N"), each one function here:
:func:`candidate_order`, :meth:`PromptCandidates.pick`, :func:`response_gold`, :func:`quality`,
:func:`curve_point`. Decisions a reader of the code needs:

- best-of-n looks at the first n candidates, so the n-sets are nested; a random draw is seeded by
  ``f"{seed}:{prompt_id}"``, so a prompt's draw depends only on the seed and its id;
- a tie in score goes to the candidate looked at first: with ``sample="random"`` the earlier drawn, so a
  pool sorted best-first, as ranked imports are, gives ties no edge;
- quality is a share of the prompt's other candidates (all N) beaten by gold, a tie counting half, so it is
  comparable across prompts with different numbers of responses; random is its exact expected value (the
  mean over the n candidates), not a draw.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cheems.data.io import ScoreKey
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.evaluate.bench import unmatched_scores
from cheems.evaluate.evaluation import score
from cheems.evaluate.run_settings import Sample
from cheems.metrics.compat import Compat, compat_record
from cheems.models.base import Scorer
from cheems.models.score_cache import DEFAULT_SCORE_CACHE

if TYPE_CHECKING:
    from cheems.models.score_cache import ScoreCache


SAMPLES: tuple[str, ...] = ("first", "random")
TIE_BREAK = "the candidate looked at first (first: earlier in the pool; random: drawn earlier)"


@dataclass
class PromptCandidates:
    """One prompt's candidates (indices into its responses, in look-at order), scores and gold."""

    record: Record
    order: list[int]
    scores: list[float]  # by position in ``order``
    gold: list[float] | None  # by position in ``order``; higher = better
    gold_kind: str | None  # "rank", "score" or None

    def pick(self, n: int) -> int:
        """Position (in ``order``) of the best-scored of the first ``n`` candidates; ties: the earliest there."""
        looked = range(min(n, len(self.order)))
        return min(looked, key=lambda i: (-self.scores[i], i))


def candidate_order(record: Record, scored: list[int], n: int, sample: Sample, seed: int) -> list[int]:
    """The candidates of a record: the first ``n`` scored responses, or a seeded random ``n`` in draw order."""
    if sample == "random":
        return random.Random(f"{seed}:{record.id}").sample(scored, min(n, len(scored)))
    return scored[:n]


def response_gold(record: Record, indices: list[int]) -> tuple[list[float] | None, str | None]:
    """Gold values (higher = better) of these responses and where they come from, or (None, None).

    ``-rank`` when the record's ranks cover them all, else their numeric ``score`` fields when all have one.
    """
    responses = [record.responses[i] for i in indices]
    if record.rank is not None and all(r.id in record.rank for r in responses):
        return [-float(record.rank[r.id]) for r in responses], "rank"
    values = [(r.model_extra or {}).get("score") for r in responses]
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) == len(values):
        return [float(v) for v in numbers], "score"
    return None, None


def quality(gold: list[float]) -> list[float]:
    """Each candidate's share of the other candidates it beats by gold (a tie counts half)."""
    m = len(gold)
    return [(sum((g > h) + 0.5 * (g == h) for h in gold) - 0.5) / (m - 1) for g in gold]


@dataclass
class BonResult:
    """Picks of one scorer and, with gold, the best-of-n curve (``to_dict`` is the ``--output-json`` shape)."""

    scorer: str
    n: int  # N: the n asked for, or the most scored responses a prompt has when that is fewer
    sample: Sample
    seed: int
    prompts: int
    picks: dict[ScoreKey, float]
    without_scores: list[str] = field(default_factory=list)
    unscored_responses: int = 0
    tied_picks: int = 0  # prompts whose pick shares its score with another candidate (the tie rule chose)
    gold_kind: str | None = None
    without_gold: int = 0
    single_candidate: int = 0
    curve: list[dict[str, Any]] = field(default_factory=list)
    n_asked: int | None = None  # the n given (None: all of each prompt's)
    unmatched_scores: list[ScoreKey] = field(default_factory=list)  # scores of no response of the pool
    compat: Compat = "strict"  # upstream: scored without the sys_prompt (recorded in to_dict)

    def write(self, output: Path, output_json: Path | None = None, plot: Path | None = None) -> None:
        """Its files, together: the picks (``{prompt_id, response_id, score}`` rows), the JSON, the curve's PNG."""
        from cheems.data.io import write_bytes, write_json, write_scores
        from cheems.outputs import together

        with together():
            write_scores(output, self.picks)
            if output_json:
                write_json(output_json, self.to_dict())
            if plot:
                write_bytes(plot, curve_png({self.scorer: self.to_dict()}, title=f"best-of-n: {self.scorer}"))

    def warnings(self, source: str) -> list[InputError]:
        """What the picks leave out: an ``-n`` above every prompt's candidates, responses and prompts without a
        score (they cannot be picked), and scores of ``source`` that match no response of the pool."""
        out = []
        if self.n_asked is not None and self.n_asked > self.n:
            out.append(
                InputError(
                    f"{self.n_asked} candidates asked for, but no prompt has more than {self.n} scored responses: "
                    f"N = {self.n}",
                    path="-n",
                    hint=f"give -n {self.n} or less, or leave it out for all of each prompt's",
                )
            )
        if self.unscored_responses:
            first = f" (first prompt without any: '{self.without_scores[0]}')" if self.without_scores else ""
            out.append(
                InputError(
                    f"{self.unscored_responses} response(s) have no score and are not candidates; "
                    f"{len(self.without_scores)} prompt(s) have no scored response and no pick{first}",
                    path=source,
                    hint="check that the scores and the pool use the same ids",
                )
            )
        return out + unmatched_warning(self.unmatched_scores, source, "the pool")

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON: settings, counts and the curve (empty without gold)."""
        return {
            "scorer": self.scorer,
            "n": self.n,
            "n_asked": self.n_asked,
            "sample": self.sample,
            "seed": self.seed,
            "tie_break": TIE_BREAK,
            "prompts": self.prompts,
            "picked": len(self.picks),
            "prompts_without_scores": len(self.without_scores),
            "unscored_responses": self.unscored_responses,
            "tied_picks": self.tied_picks,
            "unmatched_scores": len(self.unmatched_scores),
            "gold": {
                "kind": self.gold_kind,
                "prompts": self.curve[0]["prompts"] if self.curve else 0,
                "without_gold": self.without_gold,
                "single_candidate": self.single_candidate,
            },
            "curve": self.curve,
        } | compat_record(self.compat, None)


def unmatched_warning(unmatched: list[ScoreKey], source: str, of: str) -> list[InputError]:
    """The warning for scores of ``source`` that match no response of ``of`` (the bench, the pool): they are not
    used (none when every score matched)."""
    if not unmatched:
        return []
    prompt, response = unmatched[0]
    return [
        InputError(
            f"{len(unmatched)} score(s) match no response of {of} (first: prompt '{prompt}' response "
            f"'{response}'); they are not used",
            path=source,
            hint=f"check that the scores and {of} use the same ids",
        )
    ]


def curve_sizes(n: int) -> list[int]:
    """1, 2, 4, … up to ``n``, and ``n`` itself."""
    sizes = [1]
    while sizes[-1] * 2 <= n:
        sizes.append(sizes[-1] * 2)
    return sizes if sizes[-1] == n else [*sizes, n]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _triple(values: list[float], pick: int, n: int) -> dict[str, float]:
    """One prompt's pick, oracle (best of the first n) and random (mean of the first n) of per-candidate values."""
    looked = values[:n]
    return {"pick": values[pick], "oracle": max(looked), "random": _mean(looked)}


def curve_point(prompts: list[PromptCandidates], n: int) -> dict[str, Any]:
    """Mean quality, top-tier share (and raw gold score, with ``score`` gold) of pick, oracle and random at n."""
    per_prompt: dict[str, list[dict[str, float]]] = {"quality": [], "top_tier": [], "gold_score": []}
    for p in prompts:
        assert p.gold is not None  # the caller passes prompts with gold only
        pick = p.pick(n)
        best = max(p.gold)
        per_prompt["quality"].append(_triple(quality(p.gold), pick, n))
        per_prompt["top_tier"].append(_triple([float(g == best) for g in p.gold], pick, n))
        per_prompt["gold_score"].append(_triple(p.gold, pick, n))
    kinds = {p.gold_kind for p in prompts}
    point: dict[str, Any] = {
        "n": n,
        "prompts": len(prompts),
        "fewer_candidates": sum(len(p.order) < n for p in prompts),
    }
    for metric, rows in per_prompt.items():
        if metric == "gold_score" and kinds != {"score"}:
            continue  # raw values of ranks are not a quality scale
        point[metric] = {k: _mean([row[k] for row in rows]) for k in ("pick", "oracle", "random")}
    return point


def best_of_n(
    records: list[Record],
    scores: Mapping[ScoreKey, float],
    *,
    n: int | None = None,
    sample: Sample = "first",
    seed: int = 0,
    scorer: str = "",
) -> BonResult:
    """Pick the best-scored of each prompt's N candidates; with gold, draw the curve over n = 1, 2, 4, … N.

    ``n`` = None, or more than any prompt has: every scored response is a candidate (N = the largest number
    a prompt has). The definitions: the module docstring and the README ("Best-of-N"). Raises ``InputError``
    for a bad ``n`` or ``sample``.
    """
    if n is not None and n < 1:
        raise InputError(f"must be at least 1, got {n}", path="-n", hint="e.g. -n 4")
    if sample not in SAMPLES:
        raise InputError(f"unknown sample '{sample}'", path="--sample", hint=f"use one of {', '.join(SAMPLES)}")
    scored = [[i for i, r in enumerate(rec.responses) if (rec.id, r.id) in scores] for rec in records]
    most = max((len(s) for s in scored), default=1)
    size = most if n is None else min(n, max(most, 1))
    result = BonResult(scorer, size, sample, seed, len(records), {}, n_asked=n)
    result.unmatched_scores = unmatched_scores(records, scores)
    with_gold: list[PromptCandidates] = []
    for record, indices in zip(records, scored):
        result.unscored_responses += len(record.responses) - len(indices)
        if not indices:
            result.without_scores.append(record.id)
            continue
        order = candidate_order(record, indices, size, sample, seed)
        values = [scores[(record.id, record.responses[i].id)] for i in order]
        gold, kind = response_gold(record, order)
        prompt = PromptCandidates(record, order, values, gold, kind)
        best = prompt.pick(size)
        result.tied_picks += values.count(values[best]) > 1
        chosen = record.responses[order[best]]
        result.picks[(record.id, chosen.id)] = scores[(record.id, chosen.id)]
        if gold is None:
            result.without_gold += 1
        elif len(order) < 2:
            result.single_candidate += 1
        else:
            with_gold.append(prompt)
    if with_gold:
        kinds = {p.gold_kind for p in with_gold}
        result.gold_kind = kinds.pop() if len(kinds) == 1 else "mixed"
        longest = max(len(p.order) for p in with_gold)
        result.curve = [curve_point(with_gold, k) for k in curve_sizes(min(size, longest))]
    return result


def curve_png(runs: Mapping[str, dict[str, Any]], title: str = "best-of-n") -> bytes:
    """The curves of one or more scorers' ``to_dict`` results on one pool as a PNG: quality and top-tier share.

    Each scorer's picks are a line; the oracle and a random pick are drawn once, from the first run
    (on one pool with the same N and sampling they are the same for every scorer).
    """
    from cheems.evaluate.plots import new_panels, png_bytes

    fig, axes = new_panels(2, width=4.6, height=3.6)
    first = next(iter(runs.values()))
    for ax, metric, label in zip(
        axes, ("quality", "top_tier"), ("mean quality (share of candidates beaten)", "top-tier share")
    ):
        sizes = [p["n"] for p in first["curve"]]
        ax.plot(sizes, [p[metric]["oracle"] for p in first["curve"]], "k--", label="oracle")
        ax.plot(sizes, [p[metric]["random"] for p in first["curve"]], "k:", label="random pick")
        for name, run in runs.items():
            ax.plot([p["n"] for p in run["curve"]], [p[metric]["pick"] for p in run["curve"]], "o-", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.set_xlabel("n (candidates per prompt)")
        ax.set_title(label, fontsize=10)
        ax.set_ylim(0, 1.02)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=8, frameon=False)
    fig.suptitle(f"{title} ({first['gold']['prompts']} prompts with gold)", fontsize=11)
    return png_bytes(fig)


def bon(
    pool: list[Record],
    by: Scorer | Mapping[ScoreKey, float],
    *,
    n: int | None = None,
    sample: Sample = "first",
    seed: int = 0,
    source: str | None = None,
    cache: ScoreCache | None = DEFAULT_SCORE_CACHE,
    compat: Compat = "strict",
) -> BonResult:
    """Best-of-N: pick the best-scored response of each prompt of ``pool``, scored ``by`` a scorer (through
    ``cache``, by default the commands' score cache, as :func:`score`) or a scores table; with gold ranks or
    scores, the best-of-n curve.

    ``result.picks`` are the rows ``cheems bon -o`` writes, ``result.to_dict()`` its ``--output-json``.
    ``n``, ``sample``, ``seed``, ``compat`` as ``-n``, ``--sample``, ``--seed``, ``--compat`` (upstream: a scorer
    scores a record's input without its ``sys_prompt``, as CheemsRM does); ``source`` names the scorer
    (default its name, or ``scores``).
    """
    if isinstance(by, Mapping):
        values, name = dict(by), source or "scores"
    else:
        values, name = score({"pool": pool}, by, cache=cache, compat=compat), source or by.name
    result = best_of_n(pool, values, n=n, sample=sample, seed=seed, scorer=name)
    result.compat = compat
    return result
