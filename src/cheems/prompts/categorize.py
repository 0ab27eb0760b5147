"""``categorize_records``: place every prompt in the taxonomy (:mod:`cheems.prompts.taxonomy`) with an LLM.

The model behind an OpenAI-compatible endpoint is shown the taxonomy's paths and one prompt, and must
answer with one path, ``main/sub``, on a line of its own. The answer is parsed strictly
(:func:`parse_path`): a path the taxonomy does not hold, two paths, or any other text is a parse failure,
counted and listed, never guessed; the record is written unchanged, its category left for people.

Requests go through the judge's HTTP client (:class:`cheems.llm.sampling.OpenAIGenerator`: retries, the
request budget, fatal stops), each seeded with :func:`cheems.llm.sampling.sample_seed` from ``--seed`` and
the prompt's id. Every reply is committed to a SQLite cache (:class:`cheems.llm.sampling.SampleCache`)
the moment it arrives, keyed by the model's identity and the messages (the taxonomy is in them) and seed:
a killed or budget-stopped run resumes where it stopped, and a reply that named no path is not asked
again (the same question gets the same answer; pass another ``--seed`` to ask anew).

Records that already have a category keep it unless ``overwrite``; nothing is asked for them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import Field

from cheems.cachedb import cache_file
from cheems.data.schema import Record
from cheems.llm.endpoint import EndpointSettings, Outcome, RequestBudget
from cheems.llm.replies import REPLY_REASONS, clip_reply, failure_text, strip_reasoning
from cheems.llm.runs import ChatRun, print_budget_reached, request_rows, run_to_files, summary_table
from cheems.llm.sampling import Ask, OpenAIGenerator, SampleCache, ask_cached, read_prompts, sample_seed
from cheems.models.base import prompt_text
from cheems.prompts.taxonomy import SEPARATOR, Taxonomy, load_taxonomy
from cheems.runtime import content_hash
from cheems.settings import Cli, one_of, rule

if TYPE_CHECKING:
    from rich.console import Console

UNPARSED = "unparsed"  # the failure reason of a reply that names no path of the taxonomy
REASONS = {**REPLY_REASONS, UNPARSED: "the reply names no path of the taxonomy"}
# What may wrap the one path of an answer: white space, Markdown emphasis or code, quotes, a final full stop.
_WRAPPING = re.compile(r"^[\s*`\"'“”「」]*(.*?)[\s*`\"'“”「」。.]*$", re.DOTALL)


class CategorizeSettings(EndpointSettings):
    """Everything :func:`categorize_records` needs; the endpoint's fields are :class:`EndpointSettings`'."""

    ROLE: ClassVar[str] = "categoriser"

    judge_model: Annotated[
        str, rule(lambda name: name.strip(), "the model is empty", "e.g. --judge-model qwen2.5-72b-instruct")
    ] = Field(description="Model name at the endpoint that assigns the categories.")
    backend: Annotated[str, one_of(("openai",), "backend")] = Field(
        "openai", description="openai: any chat-completions endpoint (the only backend categorize uses)."
    )
    taxonomy: Annotated[str | Path | None, Cli(path=True)] = Field(
        None, description="Taxonomy YAML (default: the one shipped with cheems, cheems/assets/taxonomy.yaml)."
    )
    overwrite: Annotated[bool, Cli(flag=True)] = Field(
        False, description="Categorise records that already have a category too (default: they keep it)."
    )
    seed: int = Field(0, description="Seeds every request (each prompt gets its own seed from it).")
    cache: str | Path | None = Field(
        None, description="Reply cache (SQLite); default $CHEEMS_CACHE_DIR/categorize.sqlite."
    )


def reply_cache(settings: CategorizeSettings) -> SampleCache:
    """The run's reply cache: ``settings.cache``, default ``$CHEEMS_CACHE_DIR/categorize.sqlite``."""
    return SampleCache(settings.cache if settings.cache is not None else cache_file("categorize.sqlite"))


def system_message(taxonomy: Taxonomy) -> str:
    """What the categoriser is told: the task, every path of the taxonomy (with each main category's
    description), and the one form of answer that counts."""
    lines = [
        "你是提示词分类员。请把用户给出的提示词归入下面分类体系中最合适的一个类别。",
        "",
        "分类体系（主类/子类）：",
    ]
    for main in taxonomy.categories:
        lines.append(f"【{main.name}】{main.description}".rstrip())
        lines += [f"{main.name}{SEPARATOR}{sub}" for sub in main.subcategories]
    lines += ["", "只回答一行：主类/子类，必须是上面列出的一项，不要解释，不要回答提示词本身。"]
    return "\n".join(lines)


def categorize_messages(record: Record, taxonomy: Taxonomy) -> list[dict[str, str]]:
    """The request for one record: the taxonomy in the system message, the prompt (fenced) as the user turn."""
    user = f"提示词：\n<<<\n{prompt_text(record.prompt)}\n>>>"
    return [{"role": "system", "content": system_message(taxonomy)}, {"role": "user", "content": user}]


def parse_path(reply: str, taxonomy: Taxonomy) -> tuple[str, str] | None:
    """The (main, sub) path a reply names, or None: the reply (its reasoning removed) must be one line naming
    a path of the taxonomy, written ``main/sub`` (``／`` too), at most wrapped in quotes, ``**`` or backticks."""
    answer, _ = strip_reasoning(reply)
    match = _WRAPPING.match(answer.strip())
    text = (match.group(1) if match else "").replace("／", SEPARATOR)
    if not text or "\n" in text:
        return None
    return taxonomy.find(text)


# ------------------------------------------------------------------------------ the run


@dataclass
class CategorizeStats:
    """What a run did. Counts are of records."""

    judge_model: str
    records: int = 0
    kept: int = 0  # had a category and kept it
    kept_outside: int = 0  # of those kept, a category that is no [main, sub] path of the taxonomy
    assigned: int = 0  # got a category from the model (this run or the cache)
    cached: int = 0  # of those assigned or failed, answered from the cache
    failed: Counter[str] = field(default_factory=Counter)  # reason code -> records
    not_attempted: int = 0  # stopped by the request budget
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    budget_exhausted: bool = False
    by_category: Counter[str] = field(default_factory=Counter)  # main category -> records assigned to it

    @property
    def failed_total(self) -> int:
        """Records the model gave no category, whatever the reason."""
        return sum(self.failed.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary."""
        return {
            "judge_model": self.judge_model,
            "records": self.records,
            "assigned": self.assigned,
            "kept": self.kept,
            "kept_outside_taxonomy": self.kept_outside,
            "failed": dict(sorted(self.failed.items())),
            "not_attempted": self.not_attempted,
            "cached": self.cached,
            "assigned_by_main_category": dict(sorted(self.by_category.items())),
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "budget_exhausted": self.budget_exhausted,
        }


@dataclass
class FailedRecord:
    """A record the model gave no category: which one, why, and what it answered."""

    prompt_id: str
    reason: str
    detail: str
    reply: str | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able row for the failures file."""
        return {
            "prompt_id": self.prompt_id,
            "reason": self.reason,
            "reason_text": failure_text(self.reason, REASONS),
            "detail": self.detail,
            "reply": clip_reply(self.reply),
        }


@dataclass
class CategorizeResult:
    """The records (categories assigned where the model named one), the statistics and the failures."""

    records: list[Record]
    stats: CategorizeStats
    failures: list[FailedRecord]


def categorize_records(
    records: Sequence[Record], settings: CategorizeSettings, progress: bool = True
) -> CategorizeResult:
    """Ask the model for the category path of every record without one (every record with ``overwrite``).

    Replies in the cache are not asked again; each new one is committed as it arrives. The output depends
    on the inputs and the cache only, never on the order replies came back in. Raises ``InputError`` for a
    bad taxonomy and for conditions that fail every request (bad key, wrong URL); a run stopped that way
    keeps its finished replies in the cache.
    """
    taxonomy = load_taxonomy(settings.taxonomy)
    budget = RequestBudget(settings.max_requests)
    client = OpenAIGenerator(settings, budget)
    model = content_hash({**client.identity, "task": "categorize"}, keyed=True)
    stats = CategorizeStats(settings.judge_model, records=len(records))
    asked: dict[int, tuple[str, list[dict[str, str]], int]] = {}  # record index -> (item, messages, seed)
    paths = set(taxonomy.paths())
    for index, record in enumerate(records):
        if record.category and not settings.overwrite:
            stats.kept += 1
            stats.kept_outside += tuple(record.category) not in paths
            continue
        messages = categorize_messages(record, taxonomy)
        seed = sample_seed(settings.seed, record.id, 0)
        asked[index] = (content_hash({"messages": messages, "seed": seed}), messages, seed)
    asks: dict[str, Ask] = {}
    for index, (item, messages, seed) in asked.items():
        asks.setdefault(item, Ask(messages, seed, records[index].id, 0))
    with reply_cache(settings) as cache:
        label = f"categorising with {settings.judge_model}"
        outcomes, new = ask_cached(client, cache, model, asks, stats, label, "reply(ies)", progress)
    cached = set(outcomes) - new
    return _assemble(records, asked, outcomes, cached, taxonomy, stats)


def _assemble(
    records: Sequence[Record],
    asked: dict[int, tuple[str, list[dict[str, str]], int]],
    outcomes: dict[str, Outcome],
    cached: set[str],
    taxonomy: Taxonomy,
    stats: CategorizeStats,
) -> CategorizeResult:
    """Every record, in order, with the path its reply names; count and list the rest."""
    out: list[Record] = []
    failures: list[FailedRecord] = []
    for index, record in enumerate(records):
        if index not in asked:
            out.append(record)
            continue
        item = asked[index][0]
        outcome = outcomes.get(item)
        if outcome is None or outcome.not_attempted:
            stats.not_attempted += 1
            out.append(record)
            continue
        stats.cached += item in cached
        path = parse_path(outcome.raw, taxonomy) if outcome.final and outcome.raw is not None else None
        if path is None:
            reason = UNPARSED if outcome.final else outcome.failure or "unknown"
            detail = "the reply is not one line naming a path of the taxonomy" if outcome.final else outcome.detail
            stats.failed[reason] += 1
            failures.append(FailedRecord(record.id, reason, detail, outcome.raw))
            out.append(record)
            continue
        stats.assigned += 1
        stats.by_category[path[0]] += 1
        out.append(record.model_copy(update={"category": list(path)}))
    return CategorizeResult(out, stats, failures)


# ------------------------------------------------------------------------------ ``cheems categorize apply`` as one call


def categorize_files(
    source: Path, output: Path, settings: CategorizeSettings, *, stats_json: Path | None = None, progress: bool = True
) -> ChatRun[CategorizeResult]:
    """Categorise the prompts of ``source`` (:func:`cheems.llm.sampling.read_prompts`, :func:`categorize_records`)
    into ``output``; records the model gave no category go to ``OUT.failures.jsonl``, the statistics to
    ``stats_json``.

    The API key and the taxonomy are checked before the prompts are read; no output may replace the prompts,
    the taxonomy or the cache. An interrupted run leaves the outputs unchanged and its replies in the cache.
    """
    settings.check_api_key()
    load_taxonomy(settings.taxonomy)
    cache = reply_cache(settings).path
    taxonomy = Path(settings.taxonomy) if settings.taxonomy is not None else None
    inputs = [("PROMPTS", source), ("--taxonomy", taxonomy), ("--cache", cache)]
    return run_to_files(
        output,
        stats_json,
        inputs,
        cache,
        "replies",
        lambda: categorize_records(read_prompts(source), settings, progress),
    )


def print_categorize_run(run: ChatRun[CategorizeResult], console: Console) -> None:
    """The run as a table (assigned, kept, failed, not asked), then what to do about failures or a spent budget."""
    stats = run.result.stats
    rows = [
        ("records", str(stats.records)),
        ("assigned", str(stats.assigned)),
        *((f"  {main}", str(n)) for main, n in sorted(stats.by_category.items())),
        ("kept (had a category)", str(stats.kept)),
        ("  of them not in the taxonomy", str(stats.kept_outside)),
        ("answered from cache", str(stats.cached)),
        *request_rows(stats, lambda code: failure_text(code, REASONS)),
    ]
    console.print(summary_table(f"categorize: {stats.judge_model}", rows))
    console.print(f"wrote {run.output}")
    if run.failures is not None:
        from rich.text import Text  # a style for our words, never markup in a string

        console.print(
            Text.assemble(
                (f"{stats.failed_total} record(s) got no category", "yellow"),
                f" (left uncategorised for people), listed in {run.failures}",
            )
        )
    print_budget_reached(console, stats, "record(s)", "replies")
