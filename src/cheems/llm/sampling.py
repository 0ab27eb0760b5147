"""``generate_records``: N sampled responses per prompt from a chat model, cached and resumable (a pool).

The model is behind an OpenAI-compatible endpoint (vLLM, SGLang, Ollama: the judge's client,
:class:`cheems.llm.client.ChatClient`) or a local Hugging Face causal LM (the judge's
:class:`cheems.llm.local.LocalLM`, batched ``generate``).

Sample ``i`` of prompt ``p`` is seeded with :func:`sample_seed` ``(seed, p, i)``: sent as the request's
``seed`` to a server, or the row's own torch generator locally, so it does not depend on which
other samples are asked with it. Every sample is committed to a SQLite cache the moment it
arrives, keyed by the model's identity (endpoint or files, temperature, max tokens) and
(messages, sample index, seed): a killed run asks only for the missing samples when rerun, and
raising N asks only for the new ones.

The output is the input records, in order, each with its N samples appended as responses
``{"id": "<model>-<i>", "content", "model": <model>}``; whatever the input record held (responses,
``reference``, ``rank``, extra keys) is kept. So a pool grows one model at a time (:func:`merge_sample`):
a sample already in the input pool is not asked again, and a sample whose text is exactly that of a response
in the pool (another model's, a hand-written one, or this model's own) is stored once, on that response, under
both names (the pool rule, :func:`cheems.data.schema.pool_response`). Samples that failed
(after the retries, or a reply with no text or reasoning only: :func:`settle`) are left out and listed,
never cached; a prompt with no response at all is left out of the output, and a run with no sample at all is an error.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NamedTuple, Protocol, cast

from pydantic import Field

from cheems.cachedb import cache_errors, cache_file, open_cache_db, select_in
from cheems.data.io import load_rows, parse_record
from cheems.data.schema import Record, Response, pool_response, prompt_messages
from cheems.errors import InputError
from cheems.llm.client import ChatClient
from cheems.llm.endpoint import AT_LEAST_ONE, NOT_NEGATIVE, EndpointSettings, Outcome, RequestBudget
from cheems.llm.local import LocalLM
from cheems.llm.replies import failure_text, strip_reasoning
from cheems.llm.runs import ChatRun, print_budget_reached, request_rows, run_to_files, summary_table, with_saved_note
from cheems.runtime import ProgressBar, content_hash
from cheems.settings import Cli, rule

if TYPE_CHECKING:
    from rich.console import Console

GenJob = tuple[str, list[dict[str, str]], int]  # (cache item key, messages, seed)
OnDone = Callable[[str, Outcome], None]
WHAT, HINT = "generation cache", "pass another --cache file"


class GenerateSettings(EndpointSettings):
    """Everything :func:`cheems.llm.sampling.generate_records` needs; the endpoint's fields are
    :class:`EndpointSettings`'."""

    ROLE: ClassVar[str] = "generator"
    MODEL_FIELD: ClassVar[str] = "gen_model"

    gen_model: Annotated[
        str, rule(lambda name: name.strip(), "the model is empty", "e.g. --gen-model qwen2.5-7b-instruct")
    ] = Field(description="Model name at the endpoint; with --backend hf, a causal LM folder or hub id.")
    n: Annotated[int, Cli("--num-samples", "-n"), AT_LEAST_ONE] = Field(1, description="Samples per prompt.")
    seed: int = Field(0, description="Seeds every sample (sample i of prompt p gets its own seed from it).")
    cache: str | Path | None = Field(
        None, description="Sample cache (SQLite); default $CHEEMS_CACHE_DIR/generate.sqlite."
    )
    max_tokens: Annotated[int, AT_LEAST_ONE] = Field(1024, description="Most tokens per response.")
    temperature: Annotated[float, NOT_NEGATIVE] = Field(
        1.0, description="Sampling temperature (0 = greedy: every sample the same)."
    )


def sample_seed(seed: int, prompt_id: str, index: int) -> int:
    """The seed of sample ``index`` of prompt ``prompt_id``: 31 bits (any server takes it) from a hash."""
    return int(content_hash([seed, prompt_id, index])[:8], 16) >> 1


def settle(outcome: Outcome, text: str, reasoning: bool = False) -> Outcome:
    """``outcome`` holding ``text`` as a finished sample, or failed when ``text`` is no answer.

    No answer: nothing but white space (``content: null``, a model that stopped at once) is ``empty``;
    reasoning only (a ``<think>`` block with nothing after it, or ``reasoning``: the reply's text
    came beside a ``reasoning_content``) is ``reasoning_only``. Such a sample is not final: never
    cached, listed as failed, asked again by a rerun.
    """
    answer, had_reasoning = strip_reasoning(text)
    if answer.strip():
        outcome.raw, outcome.final = text, True
    elif had_reasoning or reasoning:
        outcome.failure, outcome.detail = "reasoning_only", "no text after the reasoning (cut off by --max-tokens?)"
    else:
        outcome.failure, outcome.detail = "empty", "the reply has no text (content null or empty)"
    return outcome


def model_tag(model: str) -> str:
    """The model's short name for response ids: the last part of a path or ``org/name``."""
    return model.rstrip("/").rsplit("/", 1)[-1] or model


# ------------------------------------------------------------------------------ reading prompts


def read_prompts(path: str | Path) -> list[Record]:
    """Prompt records from a JSONL/JSON file: canonical records whose ``responses`` may be missing or empty.

    One ``InputError`` (file:line, field) for the first bad row; duplicate prompt ids are errors.
    """
    out: list[Record] = []
    seen: dict[str, int] = {}
    for line, obj in load_rows(path):
        record = parse_record(obj, str(path), line, prompts=True)
        if record.id in seen:
            raise InputError(
                f"duplicate prompt id '{record.id}' (first at line {seen[record.id]})",
                path=str(path),
                line=line,
                field="id",
                hint="give every prompt its own id",
            )
        seen[record.id] = line
        out.append(record)
    return out


# ------------------------------------------------------------------------------ the cache

_SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
    generator TEXT NOT NULL,      -- content_hash(the model's identity, keyed)
    item TEXT NOT NULL,           -- content_hash({messages, sample, seed})
    gen_model TEXT,               -- for people reading the file
    prompt_id TEXT, sample INTEGER,  -- the first prompt that asked this (informational)
    content TEXT NOT NULL,
    prompt_tokens INTEGER, completion_tokens INTEGER, requests INTEGER,
    created REAL,
    PRIMARY KEY (generator, item)
) WITHOUT ROWID
"""


@dataclass(frozen=True)
class CachedSample:
    """One stored response and what it cost."""

    content: str
    prompt_tokens: int
    completion_tokens: int
    requests: int


class SampleCache:
    """Samples on disk (SQLite, WAL): each one committed as it arrives. Safe across processes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else cache_file("generate.sqlite")
        self._conn: sqlite3.Connection | None = None

    def connect(self) -> sqlite3.Connection:
        """Open (and create) the database; a one-line InputError when that is impossible."""
        if self._conn is None:
            # check_same_thread off: the API client may run its event loop in a worker thread
            self._conn = open_cache_db(self.path, _SCHEMA, WHAT, HINT, check_same_thread=False)
            self._conn.execute("PRAGMA synchronous=NORMAL")
        return self._conn

    def __enter__(self) -> SampleCache:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def get_many(self, generator: str, items: Iterable[str]) -> dict[str, CachedSample]:
        """Stored samples of these items under this model (missing ones are absent)."""
        with cache_errors(self.path, WHAT, HINT):
            rows = select_in(
                self.connect(),
                "SELECT item, content, prompt_tokens, completion_tokens, requests "
                "FROM samples WHERE generator = ? AND item IN ({marks})",
                [generator],
                list(dict.fromkeys(items)),
            )
            return {item: CachedSample(c, pt or 0, ct or 0, n or 0) for item, c, pt, ct, n in rows}

    def put(self, generator: str, item: str, sample: CachedSample, gen_model: str, prompt_id: str, index: int) -> None:
        """Store one sample and commit at once (a kill right after loses nothing)."""
        conn = self.connect()
        with cache_errors(self.path, WHAT, HINT), conn:
            conn.execute(
                "INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (generator, item, gen_model, prompt_id, index, sample.content)
                + (sample.prompt_tokens, sample.completion_tokens, sample.requests, time.time()),
            )

    def count(self) -> int:
        """How many samples are stored (all models)."""
        return cast("int", self.connect().execute("SELECT COUNT(*) FROM samples").fetchone()[0])


# ------------------------------------------------------------------------------ backends


class OpenAIGenerator(ChatClient):
    """Samples from an OpenAI-compatible endpoint: one request per sample, with its seed."""

    settings: GenerateSettings

    def generate_many(self, jobs: Iterable[GenJob], on_done: OnDone) -> None:
        """Ask for every job's sample, calling ``on_done(item, outcome)`` as each finishes (``outcome.raw``)."""

        async def handle(client: Any, job: GenJob) -> None:
            item, messages, seed = job
            outcome = Outcome()
            reply = await self.complete(client, messages, outcome, self.settings.temperature, seed=seed)
            on_done(item, outcome if reply is None else settle(outcome, reply.text, reply.reasoning))

        self.run_many(jobs, handle)


class LocalGenerator(LocalLM):
    """Samples from a local causal LM: batches of ``batch_size`` rows, each row seeded on its own."""

    settings: GenerateSettings

    def __init__(self, settings: GenerateSettings, budget: RequestBudget) -> None:
        super().__init__(settings, budget)
        self._identity["temperature"] = settings.temperature

    def generate_many(self, jobs: Iterable[GenJob], on_done: OnDone) -> None:
        """Sample every job in batches (similar lengths together), calling ``on_done`` for each row."""
        jobs = list(jobs)
        if not jobs:
            return
        self.load()
        rows = [(item, self.render(messages), seed) for item, messages, seed in jobs]
        rows.sort(key=lambda row: -len(self.tokenizer(row[1], add_special_tokens=False)["input_ids"]))
        size = self.settings.batch_size
        for start in range(0, len(rows), size):
            batch = []
            for item, text, seed in rows[start : start + size]:
                if self.budget.take():
                    batch.append((item, text, seed))
                else:  # budget used up: resumed by a rerun
                    on_done(item, Outcome(failure="budget", detail="request budget used up", not_attempted=True))
            if not batch:
                continue
            replies = self.generate([t for _, t, _ in batch], self.settings.temperature, [s for _, _, s in batch])
            for (item, _, _), (reply, pt, ct) in zip(batch, replies):
                on_done(item, settle(Outcome(prompt_tokens=pt, completion_tokens=ct, requests=1), reply))


def make_generator(settings: GenerateSettings, budget: RequestBudget) -> OpenAIGenerator | LocalGenerator:
    """The backend ``settings.backend`` names."""
    return LocalGenerator(settings, budget) if settings.backend == "hf" else OpenAIGenerator(settings, budget)


# ------------------------------------------------------------------------------ the run


@dataclass
class GenerateStats:
    """What a run did. Counts are of samples (prompt × sample index)."""

    gen_model: str
    prompts: int = 0
    samples: int = 0  # planned: the ones the input pool lacks
    in_pool: int = 0  # already in the input pool: not asked again
    merged: int = 0  # a text the pool already holds (any model's): stored on that response (both names)
    generated: int = 0  # from the model in this run
    cached: int = 0  # taken from the cache
    failed: Counter[str] = field(default_factory=Counter)  # reason code -> samples
    not_attempted: int = 0  # stopped by the request budget
    prompts_left_out: int = 0  # prompts that ended with no response at all
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    budget_exhausted: bool = False

    @property
    def failed_total(self) -> int:
        """Samples with no response, whatever the reason."""
        return sum(self.failed.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary."""
        return {
            "gen_model": self.gen_model,
            "prompts": self.prompts,
            "samples": self.samples,
            "in_pool": self.in_pool,
            "merged": self.merged,
            "generated": self.generated,
            "cached": self.cached,
            "failed": dict(sorted(self.failed.items())),
            "not_attempted": self.not_attempted,
            "prompts_left_out": self.prompts_left_out,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "budget_exhausted": self.budget_exhausted,
        }


@dataclass
class FailedSample:
    """A sample with no response: which one, and why."""

    prompt_id: str
    sample: int
    reason: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able row for the failures file."""
        return {
            "prompt_id": self.prompt_id,
            "sample": self.sample,
            "reason": self.reason,
            "reason_text": failure_text(self.reason),
            "detail": self.detail,
        }


@dataclass
class GenerateResult:
    """The pool (records with the samples appended), the run's statistics and its failed samples."""

    records: list[Record]
    stats: GenerateStats
    failures: list[FailedSample]


@dataclass(frozen=True)
class _Planned:
    record: int  # index into the records
    sample: int
    seed: int
    item: str
    messages: list[dict[str, str]]  # the record's, one list shared by its samples


class Ask(NamedTuple):
    """One question of a cached run: what is sent, and the (prompt id, sample index) the cache notes beside it."""

    messages: list[dict[str, str]]
    seed: int
    prompt_id: str
    sample: int


class RunCounts(Protocol):
    """The counts of a run that :func:`ask_cached` keeps."""

    requests: int
    prompt_tokens: int
    completion_tokens: int
    budget_exhausted: bool


def merge_sample(responses: list[Response], sample_id: str, content: str, model: str) -> None:
    """Add one sample of ``model`` to a prompt's ``responses`` (in place) by the pool rule,
    :func:`cheems.data.schema.pool_response`: a text already there (of any model, this one too) is stored
    once, under every name; otherwise the sample is appended as ``{"id": sample_id, "content", "model"}``."""
    pool_response(responses, Response(id=sample_id, content=content, model=model))


def _in_pool(record: Record, model: str) -> set[str]:
    """The sample ids of ``model`` already in the record's responses (its own or merged into another's)."""
    present: set[str] = set()
    for response in record.responses:
        if model in response.all_models:
            present.update([response.id, *(response.merged or [])])
    return present


def _plan(records: Sequence[Record], settings: GenerateSettings) -> tuple[list[_Planned], int]:
    """Every (prompt, sample index) to have that the pool lacks, with its seed and cache key, and how many
    the pool already has; InputError on an id clash."""
    tag = model_tag(settings.gen_model)
    planned: list[_Planned] = []
    in_pool = 0
    for index, record in enumerate(records):
        messages = prompt_messages(record.prompt)
        taken = {r.id for r in record.responses}
        present = _in_pool(record, settings.gen_model)
        for i in range(settings.n):
            sample_id = f"{tag}-{i}"
            if sample_id in present:
                in_pool += 1
                continue
            if sample_id in taken:
                raise InputError(
                    f"prompt '{record.id}' already has a response '{sample_id}' of another model",
                    field="responses",
                    hint="rename that response, or serve this model under another name",
                )
            seed = sample_seed(settings.seed, record.id, i)
            item = content_hash({"messages": messages, "sample": i, "seed": seed})
            planned.append(_Planned(index, i, seed, item, messages))
    return planned, in_pool


def ask_cached(
    backend: OpenAIGenerator | LocalGenerator,
    cache: SampleCache,
    key: str,
    asks: Mapping[str, Ask],
    stats: RunCounts,
    label: str,
    what: str,
    progress: bool,
) -> tuple[dict[str, Outcome], set[str]]:
    """Outcomes of ``asks`` (cache item -> question): those in ``cache`` under ``key`` read back, the rest asked of
    ``backend``, each final reply committed as it arrives (an interrupted run resumes where it stopped).

    Returns the outcomes and the items asked in this run; adds the requests and tokens to ``stats`` and sets its
    ``budget_exhausted``. A run stopped by an ``InputError`` (server gone, key refused) says how many ``what`` of
    it are saved in the cache.
    """
    outcomes = {item: Outcome(raw=c.content, final=True) for item, c in cache.get_many(key, asks).items()}
    todo = {item: ask for item, ask in asks.items() if item not in outcomes}
    new: set[str] = set()
    bar = ProgressBar(len(todo), label, enabled=progress, terminal_only=True, transient=True)

    def on_done(item: str, outcome: Outcome) -> None:
        outcomes[item] = outcome
        new.add(item)
        stats.requests += outcome.requests
        stats.prompt_tokens += outcome.prompt_tokens
        stats.completion_tokens += outcome.completion_tokens
        if outcome.final:
            ask = todo[item]
            sample = CachedSample(outcome.raw or "", outcome.prompt_tokens, outcome.completion_tokens, outcome.requests)
            cache.put(key, item, sample, backend.settings.model_name, ask.prompt_id, ask.sample)
        bar.advance()

    try:
        if todo:
            backend.generate_many(((item, a.messages, a.seed) for item, a in todo.items()), on_done)
    except InputError as e:  # the run stopped: nothing finished is lost
        saved = sum(outcomes[item].final for item in new)
        if not saved:
            raise
        raise with_saved_note(e, f"{saved} {what} of this run are saved in {cache.path}") from None
    finally:
        bar.close()
    stats.budget_exhausted = backend.budget.exhausted and any(
        item not in outcomes or outcomes[item].not_attempted for item in todo
    )
    return outcomes, new


def generate_records(records: Sequence[Record], settings: GenerateSettings, progress: bool = True) -> GenerateResult:
    """Sample ``settings.n`` responses for every record's prompt; return the records with them appended.

    Samples in the cache are not asked again; each new one is committed as it arrives, so an
    interrupted run resumes where it stopped. The output depends on the inputs and the cache
    only, never on the order replies came back in. Raises ``InputError`` for conditions that fail
    every request (bad key, wrong URL, a model that does not load) and when no sample came at all
    (every one failed, or the request budget ran out first).
    """
    budget = RequestBudget(settings.max_requests)
    backend = make_generator(settings, budget)
    generator = content_hash(backend.identity, keyed=True)
    planned, in_pool = _plan(records, settings)
    stats = GenerateStats(settings.gen_model, prompts=len(records), samples=len(planned), in_pool=in_pool)
    asks: dict[str, Ask] = {}
    for p in planned:  # the same prompt twice (same id and text) is asked once
        asks.setdefault(p.item, Ask(p.messages, p.seed, records[p.record].id, p.sample))
    with SampleCache(settings.cache) as cache:
        outcomes, new = ask_cached(
            backend, cache, generator, asks, stats, f"sampling from {settings.gen_model}", "sample(s)", progress
        )
    result = _assemble(records, planned, outcomes, new, settings, stats)
    if stats.samples and not stats.generated + stats.cached:
        raise _no_samples(result, settings)
    return result


def _no_samples(result: GenerateResult, settings: GenerateSettings) -> InputError:
    """The one-line error of a run that got no sample at all: what happened to them, and what to do."""
    stats = result.stats
    if not stats.failed_total:  # the request budget stopped the run before any reply
        return InputError(
            f"no sample was generated: the request budget (--max-requests {settings.max_requests}) "
            f"ran out before any of the {stats.samples} sample(s)",
            path="--max-requests",
            hint="raise it and rerun",
        )
    reasons = ", ".join(f"{code}: {n}" for code, n in stats.failed.most_common())
    return InputError(
        f"no sample was generated: {stats.failed_total} of {stats.samples} sample(s) failed ({reasons}); "
        f"the first: {result.failures[0].detail}",
        path=settings.model_option,
        hint=f"check that {settings.model_name} answers at {settings.base_url}"
        if settings.backend == "openai"
        else f"check that {settings.model_name} generates text",
    )


def _assemble(
    records: Sequence[Record],
    planned: list[_Planned],
    outcomes: dict[str, Outcome],
    new: set[str],
    settings: GenerateSettings,
    stats: GenerateStats,
) -> GenerateResult:
    """Append each record's samples in sample order; count and list what is missing."""
    tag = model_tag(settings.gen_model)
    pools = [list(record.responses) for record in records]
    failures: list[FailedSample] = []
    for p in planned:
        outcome = outcomes.get(p.item)
        if outcome is None or outcome.not_attempted:
            stats.not_attempted += 1
        elif not outcome.final:
            stats.failed[outcome.failure or "unknown"] += 1
            failures.append(FailedSample(records[p.record].id, p.sample, outcome.failure or "unknown", outcome.detail))
        else:
            stats.generated += p.item in new
            stats.cached += p.item not in new
            before = len(pools[p.record])
            merge_sample(pools[p.record], f"{tag}-{p.sample}", outcome.raw or "", settings.gen_model)
            stats.merged += len(pools[p.record]) == before
    out = []
    for record, responses in zip(records, pools):
        if responses:
            out.append(record.model_copy(update={"responses": responses}))
        else:
            stats.prompts_left_out += 1
    return GenerateResult(out, stats, failures)


# ------------------------------------------------------------------------------ ``cheems generate`` as one call


def generate_files(
    source: Path, output: Path, settings: GenerateSettings, *, stats_json: Path | None = None, progress: bool = True
) -> ChatRun[GenerateResult]:
    """Sample ``settings.n`` responses per prompt of ``source`` (:func:`read_prompts`, :func:`generate_records`)
    into ``output``; failed samples go to ``OUT.failures.jsonl``, the statistics to ``stats_json``.

    The API key is checked before any file is read; no output may replace the prompts or the cache. An interrupted
    run leaves the outputs unchanged and its finished samples in the cache: a rerun resumes.
    """
    settings.check_api_key()
    cache = SampleCache(settings.cache).path
    inputs = [("PROMPTS", source), ("--cache", cache)]
    return run_to_files(
        output, stats_json, inputs, cache, "samples", lambda: generate_records(read_prompts(source), settings, progress)
    )


def print_generate_run(run: ChatRun[GenerateResult], console: Console) -> None:
    """The run as a table, then what to do about left-out prompts, failures or a spent budget."""
    stats = run.result.stats
    rows = [
        ("prompts", str(stats.prompts)),
        ("samples to have", str(stats.samples)),
        ("already in the pool", str(stats.in_pool)),
        ("generated now", str(stats.generated)),
        ("from cache", str(stats.cached)),
        ("merged (same text)", str(stats.merged)),
        *request_rows(stats),
    ]
    console.print(summary_table(f"generate: {stats.gen_model}", rows))
    console.print(f"wrote {run.output}")
    if stats.prompts_left_out:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(
                (f"{stats.prompts_left_out} prompt(s) left out", "yellow"), ": no response at all (rerun to resume)"
            )
        )
    if run.failures is not None:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(
                (f"{stats.failed_total} sample(s) failed", "yellow"),
                f", listed in {run.failures} (rerun to ask them again)",
            )
        )
    print_budget_reached(console, stats, "sample(s)", "samples")
