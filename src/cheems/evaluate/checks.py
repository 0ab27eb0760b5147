"""An evaluation that checks itself: each check one function in :data:`CHECKS`, run on an evaluation's judged pairs.

Every ``cheems eval`` runs the cheap checks (``--checks cheap``, the default): they read the pairs the evaluation
already holds, and the bench texts once more for the checks that compare texts. The expensive ones score again
with the model or ask the judge (``batch_invariance``, ``judge_null_responses``): ``cheems doctor`` and
``eval --checks all`` run them. A check gives one :class:`Check` per subset (or one for the whole bench,
``subset`` None), ``ok`` or ``warning``; ``label_swap`` finding a mismatch is a bug in the metric, not a property
of the model, and stops the run (:class:`CheckFailure`). docs/checks.md lists each check and its threshold.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.evaluate.bench import EvalReport, ranked, stream_bench
from cheems.metrics.cheemsbench import GroupMetrics, category_metrics, scored_outcome, subset_metrics
from cheems.metrics.metric_registry import by_category
from cheems.metrics.outcomes import PairOutcome, PromptOutcome
from cheems.registries import Registry

if TYPE_CHECKING:
    from cheems.judge.judge_settings import JudgeSettings
    from cheems.models.base import Scorer

Level = Literal["ok", "warning"]
T = TypeVar("T")
Which = Literal["cheap", "all", "none"]

BASELINE_WARN = 0.9
"""``length_baseline`` warns when "longer wins" or "shorter wins" reaches this accuracy."""
TIE_WARN = 0.01
"""``score_ties`` warns when at least this share of a subset's ranked pairs have equal scores."""
TRUNCATION_WARN = 0.01
"""``truncation`` warns when at least this share of a subset's responses do not fit in ``max_length``."""
BATCH_TOLERANCE = 1e-2
"""``batch_invariance`` warns when a score moves by more than this times max(1, the largest |score|): bf16 rounding
alone moves m3e-small's scores by about 1e-3 between batch sizes; a padding bug moves them by their spread."""
LABEL_SWAP_TOLERANCE = 1e-12
"""``label_swap``: the reversed accuracy must equal the mirrored one within floating-point rounding."""
NULL_RESPONSES = ("解答：", "：", "让我们一步步思考。")
"""``judge_null_responses``' non-answers; the question itself repeated is the fourth."""


@dataclass
class Check:
    """One finding of a check: ``value`` is what it measured (a number, a mapping, or None when skipped)."""

    name: str
    subset: str | None
    level: Level
    value: Any
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The item of the ``checks`` list of ``--output-json`` (docs/formats.md)."""
        return {
            "name": self.name,
            "subset": self.subset,
            "level": self.level,
            "value": self.value,
            "message": self.message,
        }

    def line(self) -> str:
        """One terminal line: ``name (subset): message``."""
        where = f" ({self.subset})" if self.subset is not None else ""
        return f"{self.name}{where}: {self.message}"


class CheckFailure(InputError):
    """A check found a bug in the metric (``label_swap``): the run stops with this one line, writing nothing."""


Metric = Callable[[Sequence[PromptOutcome]], GroupMetrics]
"""A metric as ``label_swap`` and ``score_ties`` recompute it: the accuracy and exact match of a group of prompts
(one category) from their scored pairs (each pair's ``chosen_score`` and ``rejected_score`` set; whether a pair is
right is the metric's to decide), as :func:`category_metrics` gives them."""


def rescored(prompts: Sequence[PromptOutcome]) -> list[PromptOutcome]:
    """The prompts' pairs judged afresh from their scores by the rule every evaluation uses
    (:func:`scored_outcome`: right iff score(chosen) > score(rejected))."""
    found = []
    for prompt in prompts:
        scores = {}
        for p in prompt.pairs:
            assert p.chosen_score is not None and p.rejected_score is not None  # only scored pairs come here
            scores[(prompt.prompt_id, p.chosen)] = p.chosen_score
            scores[(prompt.prompt_id, p.rejected)] = p.rejected_score
        bare = [PairOutcome(p.chosen, p.rejected, False, p.chosen_chars, p.rejected_chars) for p in prompt.pairs]
        found.append(scored_outcome(PromptOutcome(prompt.prompt_id, prompt.category, bare), scores))
    return found


def cheems_metric(prompts: Sequence[PromptOutcome]) -> GroupMetrics:
    """The numbers ``eval`` reports for a category, recomputed from the pairs' scores by the same code
    (:func:`rescored`, :func:`category_metrics`)."""
    return category_metrics(rescored(prompts))


SubsetMetric = Callable[[Sequence[PromptOutcome]], GroupMetrics]
"""A subset's numbers from all its prompts (those without a ranked pair too), as ``eval`` makes them: accuracy and
exact match as means over its categories."""


def upstream_metric(prompts: Sequence[PromptOutcome]) -> GroupMetrics:
    """A subset's numbers under ``--compat upstream``'s rule (CheemsRM's exact match: a tie does not break it, and a
    prompt without a ranked pair counts as exact), which ``score_ties`` shows beside the strict ones where they
    differ: the very function ``eval --compat upstream`` uses (:func:`subset_metrics`), of all the subset's prompts."""
    return subset_metrics(rescored(prompts), "upstream")


@dataclass
class CheckContext:
    """What the checks read: the evaluation, the bench (in memory, or its files read again), and what scored.

    ``metric`` is what ``label_swap`` recomputes and ``score_ties`` reports (the seam a test feeds a wrong metric
    through); ``upstream``, when given, is a second rule (upstream's, where a tie counts otherwise), a
    :data:`SubsetMetric` of all a subset's prompts, whose accuracy and exact match ``score_ties`` shows beside the
    strict ones. ``scorer`` is the run's reward model;
    ``scorer_at(n)`` the same model at batch size ``n`` (``batch_invariance``); ``judge`` the run's LLM judge;
    ``model`` the model's folder or spec (``contamination``). ``sample``: responses (or prompts) the expensive
    checks take, drawn with ``seed``.
    """

    report: EvalReport
    bench: Sequence[str | Path] = ()
    records: Mapping[str, list[Record]] | None = None
    scorer: Scorer | None = None
    scorer_at: Callable[[int], Scorer] | None = None
    batch_size: int = 16
    judge: JudgeSettings | None = None
    model: str | None = None
    metric: Metric = cheems_metric
    upstream: SubsetMetric | None = upstream_metric
    sample: int = 32
    seed: int = 0
    workers: int | None = 1

    def subsets(self, fn: Callable[[Record], Any]) -> Iterator[tuple[str, Iterable[Any]]]:
        """``fn`` of each ranked record, per subset: from memory, or the bench files read again (``fn`` then runs
        in the readers' workers: a module-level function)."""
        if self.records is not None:
            for name, records in self.records.items():
                yield name, (fn(ranked(r)) for r in records)
            return
        for name, file in stream_bench(self.bench, workers=self.workers):
            yield name, file.map(_Ranked(fn))

    def scored(self) -> dict[str, list[PromptOutcome]] | None:
        """Each subset's prompts with their scored pairs; None for a judge (verdicts, no scores)."""
        if any(t.scores() is None for t in self.report.outcomes.values()):
            return None
        return {name: list(table) for name, table in self.report.outcomes.items()}


@dataclass(frozen=True)
class _Ranked:
    """``fn`` of a record with its ranks resolved (picklable, for the readers' workers)."""

    fn: Callable[[Record], Any]

    def __call__(self, record: Record) -> Any:
        return self.fn(ranked(record))


@dataclass(frozen=True)
class CheckKind:
    """A registered check: the function, and whether it is expensive (scores again, asks a judge)."""

    run: Callable[[CheckContext], list[Check]]
    expensive: bool = False


CHECKS: Registry[CheckKind] = Registry("check", "--checks")
"""Every check, by name, in the order they run and are listed."""


def check(name: str, *, help: str, expensive: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register a function ``(CheckContext) -> list[Check]`` as the check ``name``."""

    def add(fn: Callable[[CheckContext], list[Check]]) -> Callable[[CheckContext], list[Check]]:
        CHECKS.add(name, CheckKind(fn, expensive), help)
        return fn

    return add


def run_checks(context: CheckContext, which: Which | Sequence[str] = "cheap") -> list[Check]:
    """The checks' findings, in registration order: ``cheap`` ones, ``all``, ``none``, or the ones named.

    Raises :class:`CheckFailure` when ``label_swap`` finds the metric wrong.
    """
    if which == "none":
        return []
    if isinstance(which, str):
        names = [e.name for e in CHECKS.entries() if which == "all" or not e.value.expensive]
    else:
        names = list(which)
    return [found for name in names for found in CHECKS.get(name).run(context)]


# ---------------------------------------------------------------- label_swap


def reversed_prompt(prompt: PromptOutcome) -> PromptOutcome:
    """The prompt with every ranked pair reversed: the rejected response is now the chosen one."""
    pairs = [
        PairOutcome(p.rejected, p.chosen, False, p.rejected_chars, p.chosen_chars, p.rejected_score, p.chosen_score)
        for p in prompt.pairs
    ]
    return PromptOutcome(prompt.prompt_id, prompt.category, pairs)


def _ties(prompts: Sequence[PromptOutcome]) -> tuple[int, int]:
    """(pairs with equal scores, pairs)."""
    pairs = [p for prompt in prompts for p in prompt.pairs]
    return sum(p.chosen_score == p.rejected_score for p in pairs), len(pairs)


@check("label_swap", help="the metric with every ranking reversed equals 1 - accuracy - tie share; else a bug")
def label_swap(context: CheckContext) -> list[Check]:
    """Per category: ``accuracy`` of the reversed pairs must be 1 − accuracy − tie share (within
    :data:`LABEL_SWAP_TOLERANCE`); a mismatch raises :class:`CheckFailure`. A subset's value is its largest gap."""
    scored = context.scored()
    if scored is None:
        return [Check("label_swap", None, "ok", None, "skipped: a judge's verdicts have no scores to reverse")]
    found = []
    for subset, prompts in scored.items():
        worst = 0.0
        for category, group in by_category(prompts).items():
            accuracy = context.metric(group).accuracy
            swapped = context.metric([reversed_prompt(p) for p in group]).accuracy
            ties, n = _ties(group)
            mirrored = 1 - accuracy - ties / n
            gap = abs(swapped - mirrored)
            if not gap <= LABEL_SWAP_TOLERANCE:  # NaN fails too
                raise CheckFailure(
                    f"label_swap: subset '{subset}' category '{category}': accuracy with every ranking reversed is "
                    f"{swapped!r}, but 1 - accuracy - tie share is {mirrored!r} (accuracy {accuracy!r}, "
                    f"{ties} of {n} pairs tied); the metric is wrong",
                    hint="this is a bug in the metric, not in the model: report it; nothing was written",
                )
            worst = max(worst, gap)
        message = f"reversed rankings give 1 - accuracy - tie share (largest gap {worst:.1g}, rounding)"
        found.append(Check("label_swap", subset, "ok", worst, message))
    return found


# ---------------------------------------------------------------- score_ties


@check("score_ties", help="share of ranked pairs whose two scores are equal (a tie is wrong)")
def score_ties(context: CheckContext) -> list[Check]:
    """Per subset: the share of ranked pairs with equal scores; warns at :data:`TIE_WARN`. With ``upstream``, the
    accuracy and exact match under both rules (means over categories, as the subset's), said when they differ."""
    scored = context.scored()
    if scored is None:
        return [Check("score_ties", None, "ok", None, "skipped: a judge's ties are its C verdicts (judge block)")]
    found = []
    for subset, prompts in scored.items():
        ties, n = _ties(prompts)
        share = ties / n
        value: dict[str, Any] = {"share": share, "tied_pairs": ties, "pairs": n}
        message = f"{ties} of {n} ranked pairs ({share:.1%}) have equal scores; a tie counts as wrong"
        if context.upstream is not None:
            theirs = context.upstream(prompts)  # every prompt: upstream counts those without a ranked pair
            strict = _means(prompts, context.metric)
            upstream = {"accuracy": theirs.accuracy, "exact_match": theirs.exact_match}
            differ = [
                f"{key.replace('_', ' ')} strict {strict[key]:.4f}, upstream {upstream[key]:.4f}"
                for key in ("accuracy", "exact_match")
                if strict[key] != upstream[key]
            ]
            if differ:  # side by side only where the rules give other numbers
                value |= {"strict": strict, "upstream": upstream}
                message += "; " + "; ".join(differ)
        level: Level = "warning" if ties and share >= TIE_WARN else "ok"
        found.append(Check("score_ties", subset, level, value, message))
    return found


# ---------------------------------------------------------------- degenerate


def text_facts(record: Record) -> Counter[str]:
    """What ``degenerate`` counts in a ranked record (texts compared without surrounding white space): its
    ``identical_pairs`` of ``pairs`` and its ``responses_equal_reference`` of ``responses``."""
    text = {r.id: r.content.strip() for r in record.responses}
    pairs = record.ranked_pairs()
    reference = record.reference.strip() if record.reference is not None else None
    return Counter(
        identical_pairs=sum(text[a] == text[b] for a, b in pairs),
        pairs=len(pairs),
        responses_equal_reference=0 if reference is None else sum(t == reference for t in text.values()),
        responses=len(record.responses),
    )


@check("degenerate", help="constant scores, identical responses in a ranked pair, a response equal to the reference")
def degenerate(context: CheckContext) -> list[Check]:
    """Per subset: warns when every response has the same score, when a ranked pair's two responses are the same
    text (no scorer can get it right), or when a response is the reference itself."""
    found = []
    for subset, facts in context.subsets(text_facts):
        total: Counter[str] = Counter()
        for f in facts:
            total.update(f)
        problems = []
        table = context.report.outcomes.get(subset)
        scores = table.scores() if table is not None else None
        constant = None
        if scores is not None and table is not None and table.n_pairs:
            values = {*scores[0].tolist(), *scores[1].tolist()}
            constant = len(values) == 1
            if constant:
                problems.append(f"every response has the same score ({next(iter(values))!r})")
        same, copied = total["identical_pairs"], total["responses_equal_reference"]
        if same:
            problems.append(f"{same} of {total['pairs']} ranked pairs compare two identical responses")
        if copied:
            problems.append(f"{copied} of {total['responses']} responses are the reference itself")
        keys = ("identical_pairs", "pairs", "responses_equal_reference", "responses")
        value = {"constant_scores": constant, **{key: total[key] for key in keys}}
        message = "; ".join(problems) or "scores vary, no ranked pair of identical responses, no copied reference"
        found.append(Check("degenerate", subset, "warning" if problems else "ok", value, message))
    return found


# ---------------------------------------------------------------- length_baseline


def _by_length(prompts: Sequence[PromptOutcome], sign: int) -> list[PromptOutcome]:
    """The prompts scored by length in characters (``sign`` 1: longer wins, -1: shorter wins)."""
    return [
        PromptOutcome(
            p.prompt_id,
            p.category,
            [
                PairOutcome(
                    x.chosen,
                    x.rejected,
                    x.chosen_chars > x.rejected_chars if sign > 0 else x.chosen_chars < x.rejected_chars,
                    x.chosen_chars,
                    x.rejected_chars,
                )
                for x in p.pairs
            ],
        )
        for p in prompts
    ]


def random_exact_match(prompt: PromptOutcome) -> Fraction:
    """The exact probability that a random scorer (continuous scores: no ties) gets every ranked pair of ``prompt``
    right: prod(k!) / n! for the gold rank levels of sizes k over its n ranked responses."""
    beaten: Counter[str] = Counter()
    ids = set()
    for p in prompt.pairs:
        beaten[p.chosen] += 1
        ids |= {p.chosen, p.rejected}
    # responses tied in gold beat the same number of responses; different levels beat different numbers
    levels = Counter(beaten[i] for i in ids)
    return Fraction(math.prod(math.factorial(k) for k in levels.values()), math.factorial(len(ids)))


def _means(prompts: Sequence[PromptOutcome], metric: Metric) -> dict[str, float]:
    """``metric``'s accuracy and exact match of the prompts as a subset's are made: means over its categories."""
    groups = [metric(g) for g in by_category(prompts).values()]
    return {key: sum(getattr(m, key) for m in groups) / len(groups) for key in ("accuracy", "exact_match")}


def _category_mean(prompts: Sequence[PromptOutcome], of: Callable[[list[PromptOutcome]], float]) -> float:
    groups = by_category(prompts)
    return sum(of(g) for g in groups.values()) / len(groups) if groups else 0.0


@check("length_baseline", help="accuracy of 'longer wins', 'shorter wins' (characters) and of a random scorer")
def length_baseline(context: CheckContext) -> list[Check]:
    """Per subset, as the subset's metrics are made (category means): the accuracy and exact match of "the longer
    response wins" and "the shorter response wins" (length in characters; equal lengths are a tie, wrong) and the
    exact expected ones of a random scorer (accuracy 1/2; exact match prod(k!)/n! per prompt). Warns when a length
    baseline's accuracy reaches :data:`BASELINE_WARN` or a baseline's accuracy beats the scorer's."""
    found = []
    for subset, table in context.report.outcomes.items():
        prompts = [p for p in table if p.pairs]
        metrics = context.report.subsets[subset]
        value: dict[str, Any] = {"scorer": {"accuracy": metrics.accuracy, "exact_match": metrics.exact_match}}
        for name, sign in (("longer_wins", 1), ("shorter_wins", -1)):
            value[name] = _means(_by_length(prompts, sign), category_metrics)
        exact = _category_mean(prompts, lambda g: float(sum(map(random_exact_match, g)) / len(g)))
        value["random"] = {"accuracy": 0.5, "exact_match": exact}
        problems = []
        for name in ("longer_wins", "shorter_wins", "random"):
            accuracy = value[name]["accuracy"]
            why = [f"reaches {BASELINE_WARN}"] if name != "random" and accuracy >= BASELINE_WARN else []
            why += [f"beats the scorer's {metrics.accuracy:.3f}"] if accuracy > metrics.accuracy else []
            if why:
                problems.append(f"{name.replace('_', ' ')} {accuracy:.3f} {' and '.join(why)}")
        summary = (
            f"accuracy: longer wins {value['longer_wins']['accuracy']:.3f}, shorter wins "
            f"{value['shorter_wins']['accuracy']:.3f}, random 0.5, scorer {metrics.accuracy:.3f} "
            "(lengths in characters)"
        )
        message = "; ".join(problems) + f" — {summary}" if problems else summary
        found.append(Check("length_baseline", subset, "warning" if problems else "ok", value, message))
    return found


# ---------------------------------------------------------------- truncation


def score_items(record: Record) -> list[tuple[Any, str]]:
    """The (prompt, response) items of a record, as :func:`cheems.models.score_records` scores them."""
    return [(record.prompt, r.content) for r in record.responses]


@check("truncation", help="share of responses that do not fit in --max-length tokens (a model run)")
def truncation(context: CheckContext) -> list[Check]:
    """Per subset: the share of responses too long to fit in ``max_length`` tokens by themselves, so that tokens
    of the response itself are cut: its start, for both formats (the encoding keeps the end, where the reward is
    read). Warns at :data:`TRUNCATION_WARN`: two cut responses are scored on their endings alone."""
    encoder = getattr(context.scorer, "encoder", None)
    if encoder is None:
        why = "scores read from a file: needs the --model that scored (its tokenizer)"
        if context.judge is not None:
            why = "a judge reads whole responses"
        elif context.scorer is not None:
            why = f"measured for Hugging Face reward models, not '{context.scorer.name}'"
        return [Check("truncation", None, "ok", None, f"skipped: {why}")]
    found = []
    for subset, items in context.subsets(score_items):
        flat = [item for record_items in items for item in record_items]
        cut = sum(e.response_too_long for e in encoder.encode(flat))
        share = cut / len(flat) if flat else 0.0
        value = {"share": share, "truncated": cut, "responses": len(flat), "max_length": encoder.limit}
        message = (
            f"{cut} of {len(flat)} responses ({share:.1%}) do not fit in {encoder.limit} tokens: their start is cut "
            "(the prompt is dropped, the end kept)"
        )
        found.append(
            Check("truncation", subset, "warning" if cut and share >= TRUNCATION_WARN else "ok", value, message)
        )
    return found


# ---------------------------------------------------------------- batch_invariance


def _sample(context: CheckContext, items: list[T]) -> list[T]:
    """Up to ``sample`` of ``items``, drawn with ``seed``, in their order."""
    if len(items) <= context.sample:
        return items
    keep = sorted(random.Random(context.seed).sample(range(len(items)), context.sample))
    return [items[i] for i in keep]


def _sample_items(context: CheckContext) -> list[tuple[Any, str]]:
    """Up to ``sample`` (prompt, response) items of the bench, drawn with ``seed`` (in bench order)."""
    items = [item for _, records in context.subsets(score_items) for record_items in records for item in record_items]
    return _sample(context, items)


@check("batch_invariance", help="a sample scored at batch size 1 and at the run's batch size", expensive=True)
def batch_invariance(context: CheckContext) -> list[Check]:
    """A sample of responses scored afresh (no cache) at batch size 1 and at the run's: warns when a score moves
    by more than :data:`BATCH_TOLERANCE` × max(1, largest |score|). cheems pads on the right only (a causal RM
    reads its last real token, found from the mask), so there is no left padding to compare."""
    from cheems.runtime import process_rank

    if context.scorer_at is None:
        return [Check("batch_invariance", None, "ok", None, "skipped: needs the --model that scored")]
    if process_rank()[1] > 1:
        return [Check("batch_invariance", None, "ok", None, "skipped: run it without a launcher")]
    items = _sample_items(context)
    one = context.scorer_at(1).score(items)
    many = context.scorer_at(context.batch_size).score(items)
    gap = max((abs(a - b) for a, b in zip(one, many)), default=0.0)
    allowed = BATCH_TOLERANCE * max([1.0, *map(abs, one)])
    value = {
        "max_abs_difference": gap,
        "tolerance": allowed,
        "responses": len(items),
        "batch_sizes": [1, context.batch_size],
        "padding": "right",
    }
    message = (
        f"{len(items)} responses at batch size 1 and {context.batch_size}: largest score difference {gap:.3g} "
        f"(tolerance {allowed:.3g}; right padding only)"
    )
    return [Check("batch_invariance", None, "warning" if gap > allowed else "ok", value, message)]


# ---------------------------------------------------------------- contamination


@check("contamination", help="training prompts (train_config.yaml of the model folder) that overlap the bench")
def contamination(context: CheckContext) -> list[Check]:
    """When the model is a folder ``cheems train`` wrote, its ``train_config.yaml`` names the training files:
    the training records whose prompt overlaps a bench prompt (:func:`cheems.prompts.decontaminate.bench_overlaps`,
    ``cheems decontaminate``'s matcher). Warns on any overlap."""
    from cheems.data.stream import stream_records
    from cheems.prompts.decontaminate import bench_overlaps
    from cheems.yamlfile import read_yaml_mapping

    def skip(why: str) -> list[Check]:
        return [Check("contamination", None, "ok", None, f"skipped: {why}")]

    config = Path(context.model) / "train_config.yaml" if context.model else None
    if config is None or not config.is_file():
        return skip("the model is no folder with a train_config.yaml (cheems train writes one)")
    if not context.bench:
        return skip("needs the bench files")
    try:  # the model's own files: a bad one makes this check say so, never stops the evaluation
        data = read_yaml_mapping(config)[0].get("data") or []
        files = [str(d) for d in (data if isinstance(data, list) else [data])]
        present = [f for f in files if Path(f).is_file()]
        if not present:
            return skip(f"the training files {config} names are not here: {', '.join(files) or 'none'}")
        overlaps = bench_overlaps(stream_records(present, workers=context.workers), context.bench)
    except InputError as e:
        return skip(f"cannot read the training data: {e}")
    bench_hit = len({o["bench_id"] for o in overlaps})
    kinds = Counter(o["overlap"] for o in overlaps)
    value = {
        "training_records": len(overlaps),
        "bench_prompts": bench_hit,
        "by_overlap": dict(kinds),
        "training_files": present,
    }
    missing = [f for f in files if f not in present]
    message = f"{len(overlaps)} training records overlap {bench_hit} bench prompts" + (
        f" ({', '.join(f'{k} {n}' for k, n in kinds.items())})" if kinds else ""
    )
    if missing:
        message += f"; not checked (not here): {', '.join(missing)}"
    return [Check("contamination", None, "warning" if overlaps else "ok", value, message)]


# ---------------------------------------------------------------- judge_null_responses


def null_records(record: Record) -> list[Record]:
    """The record's best-ranked response against each non-answer (:data:`NULL_RESPONSES` and the question
    repeated), one record each, the real answer ranked first."""
    from cheems.data.schema import Response

    rank = record.rank
    assert rank  # only ranked records with pairs come here
    real = min((r for r in record.responses if r.id in rank), key=lambda r: rank[r.id])
    question = record.input if isinstance(record.input, str) else record.input[-1].content
    made = []
    for i, text in enumerate((*NULL_RESPONSES, question)):
        null = Response(id="null", content=text)
        made.append(
            record.model_copy(
                update={
                    "id": f"{record.id}/null-{i}",
                    "responses": [real, null],
                    "rank": {real.id: 1, "null": 2},
                    "comparisons": [],
                    "reference": None,
                }
            )
        )
    return made


@check("judge_null_responses", help="a judge asked to prefer a non-answer ('解答：', '：', ...)", expensive=True)
def judge_null_responses(context: CheckContext) -> list[Check]:
    """A sample of prompts (``sample``, ``seed``), each prompt's best-ranked answer against non-answers ("解答：",
    a bare colon, "让我们一步步思考。", the question repeated), asked of the judge as the bench's pairs are: warns
    when the judge prefers a non-answer even once (one token can fool a judge)."""
    from cheems.evaluate.judge_bench import judge_bench

    if context.judge is None:
        return [Check("judge_null_responses", None, "ok", None, "skipped: only for --judge-model")]
    ranked_records = [r for _, records in context.subsets(_with_pairs) for r in records if r is not None]
    asked = [made for r in _sample(context, ranked_records) for made in null_records(r)]
    outcomes = judge_bench({"null": asked}, context.judge, progress=False).outcomes["null"]
    texts = (*NULL_RESPONSES, "the question")
    preferred: Counter[str] = Counter()
    for prompt in outcomes:
        kind = texts[int(prompt.prompt_id.rsplit("-", 1)[1])]
        pair = prompt.pairs[0]
        if any(pair.picked(v) == "null" for v in pair.verdicts or []):
            preferred[kind] += 1
    n = len(outcomes)
    value = {"pairs": n, "null_preferred": sum(preferred.values()), "by_response": {t: preferred[t] for t in texts}}
    message = f"the judge preferred a non-answer in {sum(preferred.values())} of {n} pairs" + (
        f" ({', '.join(f'{t!r} {k}' for t, k in preferred.items())})" if preferred else ""
    )
    return [Check("judge_null_responses", None, "warning" if preferred else "ok", value, message)]


def _with_pairs(record: Record) -> Record | None:
    """The record when it has a ranked pair."""
    return record if record.ranked_pairs() else None
