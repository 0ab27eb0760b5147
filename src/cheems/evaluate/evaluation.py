"""The evaluation steps as a script calls them: score a bench, evaluate a scorer, a scores table or a judge on
it. ``cheems score`` and ``eval`` print what these return (``cheems.score``, ``cheems.evaluate``); what scores
(:class:`ScoredBy`) is shared by ``eval``, ``suite``, ``bon`` and ``curate distant``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from cheems.data.io import ReadResult, ScoreKey
from cheems.data.schema import Record
from cheems.data.stream import Records, same_record
from cheems.errors import InputError
from cheems.evaluate.bench import EvalReport, add_intervals, evaluate_scores, load_bench, score_responses
from cheems.evaluate.checks import CheckContext, Which, run_checks
from cheems.evaluate.run_settings import EvalSettings, check_metric
from cheems.metrics.compat import Compat
from cheems.models.base import Scorer
from cheems.models.score_cache import DEFAULT_SCORE_CACHE
from cheems.models.scoring import ScoringSettings

if TYPE_CHECKING:
    from cheems.evaluate.benchmark_report import BenchmarkReport
    from cheems.judge.judge_settings import JudgeSettings
    from cheems.llm.endpoint import ConnectionSettings
    from cheems.models.score_cache import ScoreCache

# How settings are made from the values given: (model, values) -> settings (the CLI's ``settings_of``).
Build = Callable[[type[Any], Mapping[str, Any]], Any]

Bench = Mapping[str, list[Record]]


def score(
    bench: Bench, scorer: Scorer, *, cache: ScoreCache | None = DEFAULT_SCORE_CACHE, compat: Compat = "strict"
) -> dict[ScoreKey, float]:
    """Score every response of a bench (:func:`cheems.load_bench`) with a scorer (:func:`cheems.load_scorer`).

    Returns ``{(prompt_id, response_id): score}``, the rows ``cheems score`` writes. ``cache``: the
    :class:`cheems.models.ScoreCache` read and filled, by default the commands' file (``ScoreCache()``, as
    ``cheems score`` without ``--cache``); None scores everything afresh (``--no-cache``). All in one call, so
    that a model's length bucketing spans the whole bench (:func:`score_files` scores files a chunk at a time).
    ``compat="upstream"`` scores a record's input without its ``sys_prompt`` (:func:`as_read`).
    """
    records = (r for records in as_read(bench, compat).values() for r in records)
    return dict(score_responses(records, scorer, cache, chunk=None))


def as_read(bench: Bench, compat: Compat) -> dict[str, list[Record]]:
    """The bench as a scorer or a judge reads it: as it is, or under ``compat="upstream"`` without the records'
    ``sys_prompt``, as CheemsRM's evaluation gives its models the user turn and the response alone
    (``cheems/eval_rm.py``: ``rm_evaluate``, ``generative_evaluate``). Scores and verdicts are cached by the text
    asked, so the two never share one."""
    if compat == "strict":
        return dict(bench)
    return {name: [upstream_input(r) for r in records] for name, records in bench.items()}


def upstream_input(record: Record) -> Record:
    """A record as ``--compat upstream`` asks a scorer or a judge about it: without its ``sys_prompt`` (the one rule
    of :func:`as_read` and of ``cheems score --compat upstream``)."""
    return record.model_copy(update={"sys_prompt": None}) if record.sys_prompt is not None else record


def evaluate(
    bench: Bench,
    by: Scorer | Mapping[ScoreKey, float] | JudgeSettings,
    *,
    source: str | None = None,
    resamples: int = 1000,
    seed: int = 0,
    cache: ScoreCache | None = DEFAULT_SCORE_CACHE,
    progress: bool = True,
    compat: Compat = "strict",
    checks: Which = "cheap",
) -> EvalReport:
    """CheemsBench's metrics of a bench judged ``by`` a scorer, a scores table or an LLM judge.

    - ``by``: a :class:`cheems.models.Scorer` (scored here, through ``cache``: by default the commands' score
      cache, None for none, as :func:`score`), a mapping
      ``{(prompt_id, response_id): score}`` (:func:`cheems.data.read_scores` reads a scores file), or a
      :class:`cheems.judge.JudgeSettings` (the judge's verdicts are cached in its ``cache`` file);
    - ``source``: the name the report gives what was evaluated (default: the scorer's name, ``scores``,
      or the judge model);
    - ``resamples``, ``seed``: the bootstrap intervals of the prompts (0: none), as ``--resamples`` and
      ``--bootstrap-seed``;
    - ``progress``: a judge's progress bar;
    - ``compat``: ``"strict"`` (cheems' rules) or ``"upstream"`` (the official code's, as ``--compat``:
      :mod:`cheems.metrics.compat`): exact match and the scoring input.
    - ``checks``: the checks that run (``report.checks``; :func:`cheems.evaluate.checks.run_checks`): ``cheap``,
      ``all`` or ``none``, as ``--checks``. A metric found wrong raises
      :class:`cheems.evaluate.checks.CheckFailure`.

    ``report.to_dict()`` is what ``cheems eval --output-json`` writes for the same inputs.
    """
    from cheems.judge.judge_settings import JudgeSettings

    bench = dict(bench)
    if isinstance(by, JudgeSettings):
        from cheems.evaluate.judge_bench import judge_bench

        report = judge_bench(as_read(bench, compat), by, progress=progress)
        report.compat = compat  # a judge's verdicts count alike under both (metrics.exact_prompts)
    elif isinstance(by, Mapping):
        report = evaluate_scores(bench, dict(by), source or "scores", compat)
    else:
        report = evaluate_scores(bench, score(bench, by, cache=cache, compat=compat), source or by.name, compat)
    if resamples:
        add_intervals(report, resamples, seed)
    scorer = None if isinstance(by, (Mapping, JudgeSettings)) else by
    judge = by if isinstance(by, JudgeSettings) else None
    context = CheckContext(report, records=bench, scorer=scorer, judge=judge, model=getattr(scorer, "name", None))
    report.checks = run_checks(context, checks)
    return report


@dataclass(frozen=True)
class ScoredBy:
    """What scores a bench or a pool: exactly one of a scores file, a reward model (``scoring.model``, with the
    connection settings of an RM server) or an LLM judge. The one value behind ``--scores`` / ``--model`` /
    ``--judge-model`` of ``eval``, ``bon``, ``suite`` and ``curate distant``. The scores file is read, the model
    loaded and its score cache opened once, on first use: every bench a run evaluates shares them."""

    scores: Path | None = None
    scoring: ScoringSettings = field(default_factory=ScoringSettings)
    connection: ConnectionSettings | None = None
    judge: JudgeSettings | None = None
    _loaded: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_settings(
        cls,
        given: Mapping[str, Any],
        build: Build,
        scores: Path | None = None,
        *,
        needs: str,
        hint: str,
        others: tuple[Path | None, ...] = (),
    ) -> ScoredBy:
        """The one of ``scores``, ``given["model"]`` and ``given["judge_model"]`` that is given, with its settings
        made by ``build`` from ``given`` (the CLI's names the option of a bad value). ``needs`` (one line, with
        ``hint``) when not exactly one of them and of ``others`` (winrate's ``--annotate``, ``--from-export``) is
        given; a judge's API key is checked here, before any file is read."""
        from cheems.judge.judge_settings import JudgeSettings
        from cheems.llm.endpoint import ConnectionSettings

        if sum(x is not None for x in (scores, given.get("model"), given.get("judge_model"), *others)) != 1:
            raise InputError(needs, hint=hint)
        if given.get("judge_model"):
            if given.get("no_cache"):
                raise InputError(
                    "a judge's verdicts are always cached (an interrupted run resumes from them)",
                    path="--no-cache",
                    hint="leave out --no-cache, or give --cache FILE to keep them in another file",
                )
            judge = build(JudgeSettings, given)
            judge.check_api_key()
            return cls(judge=judge)
        return cls(scores=scores, scoring=build(ScoringSettings, given), connection=build(ConnectionSettings, given))

    @property
    def model(self) -> str | None:
        """The reward model that scores, or None (a scores file or a judge does)."""
        return None if self.scores is not None or self.judge is not None else self.scoring.model

    @property
    def source(self) -> str:
        """The name a report gives what scored: the scores file, the judge model or the reward model."""
        if self.scores is not None:
            return str(self.scores)
        return self.judge.judge_model if self.judge is not None else self.scoring.model or ""

    def inputs(self, bench: list[Path]) -> list[tuple[str, Path | str | None]]:
        """The files a run reads besides the bench (its caches too): an output must replace none of them."""
        if self.judge is not None:
            return [("--bench", b) for b in bench] + self.judge.inputs()
        return [*self.scoring.inputs(bench, cached=self.scores is None), ("--scores", self.scores)]

    def by(self) -> Mapping[ScoreKey, float] | Scorer | JudgeSettings:
        """What :func:`evaluate` takes: the scores read, the scorer loaded, or the judge."""
        return self.judge if self.judge is not None else self.scores_or_scorer()

    def scores_or_scorer(self) -> Mapping[ScoreKey, float] | Scorer:
        """What :func:`cheems.analysis.bon.bon` takes: the scores file read, or the reward model loaded."""
        from cheems.data.io import read_scores

        if "by" not in self._loaded:
            scores = self.scores
            self._loaded["by"] = read_scores(scores) if scores is not None else self.scoring.scorer(self.connection)
        return cast("Mapping[ScoreKey, float] | Scorer", self._loaded["by"])

    def cache(self) -> ScoreCache | None:
        """The score cache of a reward model (a judge caches its verdicts itself)."""
        if "cache" not in self._loaded:
            self._loaded["cache"] = self.scoring.score_cache() if self.model is not None else None
        return cast("ScoreCache | None", self._loaded["cache"])

    def check_context(
        self,
        report: EvalReport,
        bench: list[Path],
        records: Bench | None,
        scorer: Scorer | None,
        workers: int | None = None,
    ) -> CheckContext:
        """What the checks of an evaluation by this scorer read (:class:`cheems.evaluate.checks.CheckContext`)."""

        def at(batch_size: int) -> Scorer:
            if scorer is not None and batch_size == self.scoring.batch_size:
                return scorer  # the run's own, its weights loaded
            return self.scoring.model_copy(update={"batch_size": batch_size}).scorer(self.connection)

        return CheckContext(
            report,
            bench,
            records,
            scorer=scorer,
            scorer_at=at if self.model is not None else None,
            batch_size=self.scoring.batch_size,
            judge=self.judge,
            model=self.model,
            workers=workers,
        )


def score_files(
    bench: list[Path],
    scoring: ScoringSettings,
    connection: ConnectionSettings | None = None,
    *,
    workers: int | None = None,
    issues: ReadResult | None = None,
    compat: Compat = "strict",
) -> Iterator[tuple[ScoreKey, float]]:
    """:func:`score` the bench files a chunk at a time, in their order, with a progress bar: memory stays bounded
    by a chunk, whatever the size of the files. Warnings of the files go to ``issues``. Under a launcher every
    process reads the files and takes its share of each chunk's batches. ``cheems score`` writes these rows.
    ``compat="upstream"`` scores each record as ``eval --compat upstream`` does (:func:`upstream_input`), so its
    scores file gives ``eval --scores --compat upstream`` the upstream numbers."""
    from cheems.evaluate.bench import stream_bench

    scorer = scoring.scorer(connection)
    files = stream_bench(bench, workers=workers, label="scoring")
    as_asked = same_record if compat == "strict" else upstream_input
    return score_responses(_bench_records(files, issues, as_asked), scorer, scoring.score_cache())


def _bench_records(
    files: Iterator[tuple[str, Records]], issues: ReadResult | None, fn: Callable[[Record], Record] = same_record
) -> Iterator[Record]:
    """``fn`` of the records of every bench file in turn, each file's warnings added to ``issues`` once it is
    read."""
    for _, records in files:
        yield from records.map(fn)
        if issues is not None:
            issues.warnings += records.issues.warnings


@dataclass
class BenchEvaluation:
    """An evaluation of bench files: the report, another benchmark's metric of it (``--metric``), the bench
    fingerprint a details file carries, and the warnings of the files."""

    report: EvalReport
    other: BenchmarkReport | None = None
    fingerprint: str | None = None
    warnings: list[InputError] = field(default_factory=list)
    inputs: list[tuple[str, Path | str | None]] = field(default_factory=list)  # what write() never replaces

    def to_dict(self) -> dict[str, Any]:
        """The ``--output-json``: the metrics (CheemsBench's, or ``--metric``'s), with the ``checks`` list."""
        if self.other is None:
            return self.report.to_dict()
        checks = self.report.checks
        return self.other.to_dict() | ({"checks": [c.to_dict() for c in checks]} if checks else {})

    def write(self, output_json: Path | None, report: Path | None, details: Path | None) -> None:
        """Its files, together: the metrics as JSON, the report folder (CheemsBench's), the details; none of them
        replaces a bench file or another input of the run (:func:`evaluate_files` names them)."""
        from cheems.data.io import write_json
        from cheems.evaluate.details import write_details
        from cheems.evaluate.report import REPORT_FILES, write_report
        from cheems.outputs import claim_outputs, together

        outputs = [("--output-json", output_json), ("--details", details)]
        claim_outputs(inputs=self.inputs, files=outputs, folders=[("--report", report, REPORT_FILES)])

        with together():
            if output_json:
                write_json(output_json, self.to_dict())
            if report:
                write_report(self.report, report, title=self.report.scorer)
            if details:
                assert self.fingerprint is not None  # made whenever details are asked for
                run = self.report
                write_details(details, run.outcomes, run.scorer, self.fingerprint, run.compat)


def eval_run(
    bench: list[Path],
    by: ScoredBy,
    settings: EvalSettings,
    *,
    output_json: Path | None = None,
    report: Path | None = None,
    details: Path | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> BenchEvaluation | None:
    """What ``cheems eval`` runs: the metric and the outputs checked first (none may replace an input), then
    :func:`evaluate_files`. Under a launcher (``torchrun``) a process other than rank 0 scores its share of a
    ``--model``'s responses and returns None: rank 0 makes the one report, to write with ``run.write``."""
    from cheems.evaluate.report import REPORT_FILES
    from cheems.outputs import claim_outputs
    from cheems.runtime import is_main_process

    check_metric(settings.metric, report, judge=by.judge is not None)
    outputs = [("--output-json", output_json), ("--details", details)]
    claim_outputs(inputs=by.inputs(bench), files=outputs, folders=[("--report", report, REPORT_FILES)])
    if not (by.model or is_main_process()):  # under a launcher only --model has work to share
        return None
    if not is_main_process():  # the other ranks score their share; their report is dropped: no bootstrap, no checks
        settings = settings.model_copy(update={"resamples": 0, "checks": "none"})
    fingerprint = details is not None and is_main_process()
    run = evaluate_files(bench, by, settings, workers=workers, progress=progress, fingerprint=fingerprint)
    return run if is_main_process() else None  # under a launcher rank 0 writes the one report


def evaluate_files(
    bench: list[Path],
    by: ScoredBy,
    settings: EvalSettings | None = None,
    *,
    workers: int | None = None,
    progress: bool = True,
    fingerprint: bool = False,
) -> BenchEvaluation:
    """:func:`evaluate` of bench files, as ``cheems eval`` runs it: a scores file with CheemsBench's metrics a
    chunk at a time (bounded memory), anything else on the bench in memory; another ``settings.metric`` is that
    benchmark's metric of the judged pairs, with its own intervals; ``fingerprint``: the bench's, for a details
    file. ``settings.checks`` names the checks that run (:func:`cheems.evaluate.checks.run_checks`); a metric found
    wrong stops the run (:class:`cheems.evaluate.checks.CheckFailure`)."""
    from cheems.data.keytable import read_score_table
    from cheems.evaluate.bench import evaluate_bench, stream_bench
    from cheems.evaluate.details import bench_fingerprint

    settings = settings or EvalSettings()
    check_metric(settings.metric, None, judge=by.judge is not None)  # before a judge is asked anything
    metric, resamples, seed, compat = settings.metric, settings.resamples, settings.bootstrap_seed, settings.compat
    if by.scores is not None and metric == "cheems":
        table = read_score_table(by.scores)
        files = stream_bench(bench, workers=workers)
        result, printed, issues = evaluate_bench(files, table, by.source, fingerprint=fingerprint, compat=compat)
        if resamples:
            add_intervals(result, resamples, seed)
        result.checks = run_checks(by.check_context(result, bench, None, None, workers), settings.checks)
        return BenchEvaluation(result, None, printed, issues, by.inputs(bench))
    warnings: list[InputError] = []
    from cheems.metrics.metric_registry import record_check

    records = load_bench(bench, warnings, check=record_check(metric, compat))
    drawn = resamples if metric == "cheems" else 0  # another metric draws its own, of its own numbers
    given = by.by()
    result = evaluate(
        records,
        given,
        source=by.source,
        resamples=drawn,
        seed=seed,
        cache=by.cache(),
        progress=progress,
        compat=compat,
        checks="none",
    )
    other = None
    if metric != "cheems":
        from cheems.evaluate.benchmark_report import benchmark_report

        other = benchmark_report(metric, records, result, compat, resamples=resamples, seed=seed)
    scorer = given if isinstance(given, Scorer) else None
    result.checks = run_checks(by.check_context(result, bench, records, scorer, workers), settings.checks)
    printed = bench_fingerprint(records) if fingerprint else None
    return BenchEvaluation(result, other, printed, warnings, by.inputs(bench))
