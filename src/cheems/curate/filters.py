"""Rule-based response quality filters (paper part 2.2): drop clearly bad responses only.

Each check is a small function that returns a *reason* (a short string) or ``None``; a
response is dropped for the first reason that fires, in the order of :data:`REASONS`.

- ``empty``: nothing but whitespace.
- ``too_long``: over the absolute cap ``max_chars``.
- ``too_long_relative``: longer than ``max_length_ratio`` × the median length of the prompt's
  other (non-empty) responses *and* longer than ``long_min_chars``, so that a 300-character
  answer is not "abnormal" merely because its siblings are one-liners.
- ``non_chinese``: too high a share of non-Chinese text once code (fenced, inline, and unfenced
  lines that look like code), LaTeX formulas and URLs are removed, so code and math answers
  survive; see :func:`non_chinese_share`.
  Prompts that ask for another language (translation, "用英文…") or are themselves mostly
  non-Chinese are exempt.
- ``truncated``: an unclosed code fence, or a long answer whose last line is prose that stops
  mid-sentence (ends in a Chinese character or a comma-like mark).
- ``repetitive``: one line repeated many times, or most long character n-grams repeated.

Ranks after filtering: comparisons naming a dropped response are removed, and the dropped
response's ``rank`` entry is removed and the remaining ranks renumbered densely (1, 2, …)
in the same order. This keeps every pairwise relation among the survivors exactly as it was
(re-resolving the comparisons could move responses between layers, and would not work for
records that carry a rank but no comparisons). A record left with fewer than two responses
cannot give a pair and is dropped.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from cheems.data.io import ReadResult, write_lines_and_report
from cheems.data.schema import Record, dense_ranks
from cheems.data.stream import Records
from cheems.outputs import claim_outputs
from cheems.settings import Settings

EMPTY = "empty"
TOO_LONG = "too_long"
TOO_LONG_RELATIVE = "too_long_relative"
NON_CHINESE = "non_chinese"
TRUNCATED = "truncated"
REPETITIVE = "repetitive"
REASONS = (EMPTY, TOO_LONG, TOO_LONG_RELATIVE, NON_CHINESE, TRUNCATED, REPETITIVE)

# A prompt matching this asks for an answer in another language: the non-Chinese check is skipped.
DEFAULT_EXEMPT_PROMPT = (
    r"翻译|译成|译为|译作|外语|"
    r"(?:英|日|韩|法|德|俄|西班牙|葡萄牙|意大利|阿拉伯|波斯|印地|泰|越南|印尼|马来|土耳其|荷兰|希腊|拉丁|"
    r"保加利亚|波兰|瑞典|乌克兰)(?:语|文)|"
    r"(?i:translat|english|in japanese|in french|in german|in spanish)"
)


class FilterConfig(Settings):
    """Every threshold of the quality filters; the defaults drop only clearly bad responses.

    A ``None`` threshold turns its check off (``max_chars``: no cap).
    """

    max_chars: int | None = Field(8000, ge=1, description="Absolute length cap in characters.")
    max_length_ratio: float | None = Field(
        3.0, gt=0, description="Drop if longer than this × the siblings' median (and over --long-min-chars)."
    )
    long_min_chars: int = Field(
        1000, ge=0, description="The relative length check fires only above this many characters."
    )
    max_non_chinese_share: float | None = Field(
        0.5,
        ge=0,
        le=1,
        description="Drop if the share of non-Chinese text (code, formulas, URLs aside) exceeds this.",
    )
    non_chinese_min_units: int = Field(20, ge=1, description="text units needed before the non-Chinese share is judged")
    exempt_prompt_pattern: str | None = Field(
        DEFAULT_EXEMPT_PROMPT, description="regex: prompts asking for another language"
    )
    truncation_min_chars: int | None = Field(
        200, ge=0, description="a prose ending mid-sentence counts as truncated above this length (None: off)"
    )
    check_unclosed_fence: bool = Field(True, description="an odd number of code fences counts as truncated")
    max_line_repeats: int | None = Field(
        6, ge=2, description="drop if one line (of >= line_min_chars) occurs this many times (None: off)"
    )
    line_min_chars: int = Field(
        10, ge=1, description="shorter lines (a lone '}' or '---') never count as repeated lines"
    )
    repetition_ngram: int = Field(20, ge=2, description="character n-gram size for the repeated n-gram share")
    max_repeated_ngram_share: float | None = Field(
        0.5, ge=0, le=1, description="drop if more than this share of n-grams repeat an earlier one (None: off)"
    )
    repetition_min_chars: int = Field(200, ge=0, description="the n-gram check only looks at texts this long")

    @field_validator("exempt_prompt_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as e:
                raise ValueError(f"not a valid regular expression: {e}") from None
        return value


# ---------------------------------------------------------------- text helpers

_FENCE_LINE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
_FENCED = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_LATEX = re.compile(
    r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|\\begin\{(\w+\*?)\}.*?\\end\{\1\}|\$[^$\n]+\$",
    re.DOTALL,
)
_URL = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>\"'，。）)】]+", re.IGNORECASE)
_ENDS_WITH_URL = re.compile(_URL.pattern + r"[)）\]】>]*$", re.IGNORECASE)

_CHINESE = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_CHINESE_CHAR = re.compile(f"[{_CHINESE}]")
# Alphabets written with spaces between words: one word is one unit, like one Chinese character.
_WORD = re.compile(r"[A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]+")
# Any other letter (kana, hangul, thai, …) counts one unit per character.
_OTHER_LETTER = re.compile(f"[^\\W\\d_A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff{_CHINESE}]")

_HTML_CODE = re.compile(r"<(code|pre)\b[^>]*>.*?(?:</?\1>|\Z)", re.DOTALL | re.IGNORECASE)
_CODE_SYMBOLS = set("{}[]()<>=;:+-*/%&|^!~#\"'`$@\\_.,")
# Lowercase statement / shell keywords that open a line of code (prose sentences start with a capital).
_CODE_START = re.compile(
    r"^\s*(?:import|from\s+\S+\s+import|def|class|return|package|func|public|private|protected|static|"
    r"#include|#define|let|var|const|function|print|printf|echo|for|while|if|elif|else|try|except|"
    r"catch|end|using|namespace|struct|fn|impl|int|void|char|double|float|bool|string|SELECT|select|"
    r"ssh|cd|ls|git|pip|pip3|npm|sudo|apt|apt-get|brew|docker|curl|wget|python|python3|conda|mkdir|chmod|export)\b"
)
_COMMENT_START = re.compile(r"^\s*(?:#|//|/\*|\*/|--\s)")
# A trailing comment ("x = 1  # 赋值"): its Chinese does not make the code before it prose.
_TRAILING_COMMENT = re.compile(r"\s(?:#|//).*$")


def is_code_line(line: str) -> bool:
    """Whether a line outside any fence looks like code (many answers paste code without fences).

    A comment line (``#``, ``//``, …) is code unless it holds Chinese (then it reads as prose,
    like a Chinese Markdown heading). Any other line must hold no Chinese outside a trailing
    comment, and is code when indented like a Markdown code block, when it opens with a
    lowercase statement or shell keyword, or when at least 15% of its visible characters are
    code punctuation. English prose has few such marks, so it stays prose.
    """
    if not line.strip():
        return False
    if _COMMENT_START.match(line):
        return not _CHINESE_CHAR.search(line)
    code = _TRAILING_COMMENT.sub("", line)
    if _CHINESE_CHAR.search(code):
        return False
    if line.startswith(("    ", "\t")) or _CODE_START.match(code):
        return True
    visible = [ch for ch in code if not ch.isspace()]
    return bool(visible) and sum(ch in _CODE_SYMBOLS for ch in visible) >= 0.15 * len(visible)


def _strip_code_blocks(text: str) -> str:
    return _HTML_CODE.sub("\n", _FENCED.sub("\n", text))


def _strip_code_lines(text: str) -> str:
    text = _INLINE_CODE.sub(" ", text)
    return "\n".join(line for line in text.split("\n") if not is_code_line(line))


def strip_code(text: str) -> str:
    """``text`` without code: fenced blocks (an unclosed fence runs to the end), ``<code>``/``<pre>``
    blocks, inline code, and unfenced lines that look like code (:func:`is_code_line`)."""
    return _strip_code_lines(_strip_code_blocks(text))


def strip_non_prose(text: str) -> str:
    """``text`` without code, LaTeX / ``$…$`` formulas and URLs: what the language check reads.

    Formulas go before the code-line test, which would otherwise eat a lone ``$$`` line and
    leave the formula between two such lines behind.
    """
    return _URL.sub(" ", _strip_code_lines(_LATEX.sub(" ", _strip_code_blocks(text))))


def language_units(text: str) -> tuple[int, int]:
    """(Chinese units, non-Chinese units) of ``text``.

    A Chinese character is one unit; a word of a spaced alphabet (Latin, Greek, Cyrillic) is one
    unit, so "使用 Python 的 requests 库" is 4 Chinese + 2 non-Chinese units, not 4 + 14;
    any other letter (kana, hangul, …) is one unit per character. Digits, punctuation and
    symbols are neutral: a formula-only answer has no units at all.
    """
    chinese = len(_CHINESE_CHAR.findall(text))
    other = len(_WORD.findall(text)) + len(_OTHER_LETTER.findall(text))
    return chinese, other


def non_chinese_share(text: str) -> tuple[float, int]:
    """(share of non-Chinese units, total units) of the prose of ``text`` (:func:`strip_non_prose`)."""
    chinese, other = language_units(strip_non_prose(text))
    total = chinese + other
    return (other / total if total else 0.0), total


def prompt_contents(record: Record) -> str:
    """The prompt's words alone: a chat list's contents joined, no role labels (for the language share).

    Not :func:`cheems.models.base.prompt_text`, which formats a prompt for a model.
    """
    if isinstance(record.input, str):
        return record.input
    return "\n".join(m.content for m in record.input)


def excerpt(text: str, width: int = 80) -> str:
    """The first ``width`` characters on one line, with an ellipsis when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


# ---------------------------------------------------------------- the checks


def check_empty(content: str) -> str | None:
    """``empty`` when the response is whitespace only."""
    return EMPTY if not content.strip() else None


def check_max_chars(content: str, config: FilterConfig) -> str | None:
    """``too_long`` when the response is over the absolute cap."""
    if config.max_chars is not None and len(content) > config.max_chars:
        return TOO_LONG
    return None


def check_relative_length(content: str, sibling_lengths: list[int], config: FilterConfig) -> str | None:
    """``too_long_relative`` when over ``max_length_ratio`` × the siblings' median and over ``long_min_chars``."""
    if config.max_length_ratio is None or not sibling_lengths:
        return None
    n = len(content)
    if n > config.long_min_chars and n > config.max_length_ratio * statistics.median(sibling_lengths):
        return TOO_LONG_RELATIVE
    return None


def check_non_chinese(content: str, config: FilterConfig, exempt: bool = False) -> str | None:
    """``non_chinese`` when the prose's non-Chinese share exceeds the threshold (enough text only)."""
    if exempt or config.max_non_chinese_share is None:
        return None
    share, units = non_chinese_share(content)
    if units >= config.non_chinese_min_units and share > config.max_non_chinese_share:
        return NON_CHINESE
    return None


# A last line that is a list item, table row, heading or quote is complete without a full stop.
_STRUCTURED_LINE = re.compile(r"^\s*(?:[-*+•·>#|]|\d+[.、)）]|[（(]\d+[)）]|[一二三四五六七八九十]+[、.])")


def check_truncated(content: str, config: FilterConfig) -> str | None:
    """``truncated`` for an unclosed code fence, or long prose ending mid-sentence."""
    if config.check_unclosed_fence and len(_FENCE_LINE.findall(content)) % 2 == 1:
        return TRUNCATED
    if config.truncation_min_chars is None or len(content.strip()) < config.truncation_min_chars:
        return None
    text = content.rstrip()
    if _ENDS_WITH_URL.search(text):
        return None  # a closing link ("来源 https://…") ends a text properly
    last_line = text.splitlines()[-1]
    if _STRUCTURED_LINE.match(last_line) or _FENCE_LINE.match(last_line) or is_code_line(last_line):
        return None
    last = last_line.rstrip()[-1]
    # Stops where a Chinese sentence goes on: an ideograph, or a comma-like mark. A final Latin
    # letter or digit is usually an answer ("故选: C", "答案是 42"), so it does not count.
    if _CHINESE_CHAR.match(last) or last in "，,、（(“‘《—-–/\\":
        return TRUNCATED
    return None


def repeated_ngram_share(text: str, n: int) -> float:
    """Share of the character n-grams of ``text`` (whitespace squeezed) that repeat an earlier one."""
    flat = " ".join(text.split())
    total = len(flat) - n + 1
    if total <= 0:
        return 0.0
    seen: set[str] = set()
    repeats = 0
    for i in range(total):
        gram = flat[i : i + n]
        if gram in seen:
            repeats += 1
        else:
            seen.add(gram)
    return repeats / total


def check_repetitive(content: str, config: FilterConfig) -> str | None:
    """``repetitive`` when a line repeats ``max_line_repeats`` times or most n-grams repeat.

    Both look at the text without code blocks: code legitimately repeats lines.
    """
    prose = strip_code(content)
    if config.max_line_repeats is not None:
        lines = Counter(s for line in prose.splitlines() if len(s := line.strip()) >= config.line_min_chars)
        if lines and max(lines.values()) >= config.max_line_repeats:
            return REPETITIVE
    if config.max_repeated_ngram_share is not None and len(prose) >= config.repetition_min_chars:
        if repeated_ngram_share(prose, config.repetition_ngram) > config.max_repeated_ngram_share:
            return REPETITIVE
    return None


def prompt_is_exempt(record: Record, config: FilterConfig) -> bool:
    """Whether the prompt asks for a non-Chinese answer (pattern match, or mostly non-Chinese itself)."""
    text = prompt_contents(record)
    if config.exempt_prompt_pattern and re.search(config.exempt_prompt_pattern, text):
        return True
    if config.max_non_chinese_share is None:
        return False
    share, units = non_chinese_share(text)
    return units > 0 and share > config.max_non_chinese_share


def response_reason(content: str, sibling_lengths: list[int], config: FilterConfig, exempt: bool = False) -> str | None:
    """The first reason to drop one response, or None to keep it."""
    return (
        check_empty(content)
        or check_max_chars(content, config)
        or check_relative_length(content, sibling_lengths, config)
        or check_non_chinese(content, config, exempt)
        or check_truncated(content, config)
        or check_repetitive(content, config)
    )


# ---------------------------------------------------------------- records


@dataclass
class FilterExample:
    """One dropped response, for the report."""

    prompt_id: str
    response_id: str
    excerpt: str


@dataclass
class FilterReport:
    """What the filters dropped and why."""

    records_in: int = 0
    records_out: int = 0
    responses_in: int = 0
    responses_out: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: {reason: 0 for reason in REASONS})
    examples: dict[str, list[FilterExample]] = field(default_factory=dict)
    records_dropped: int = 0  # left with fewer than two responses
    records_dropped_examples: list[str] = field(default_factory=list)
    comparisons_removed: int = 0  # comparisons that named a dropped response (in kept and dropped records)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        return {
            "records_in": self.records_in,
            "records_out": self.records_out,
            "records_dropped_fewer_than_2_responses": self.records_dropped,
            "records_dropped_examples": self.records_dropped_examples,
            "responses_in": self.responses_in,
            "responses_out": self.responses_out,
            "responses_dropped": sum(self.dropped.values()),
            "dropped_by_reason": dict(self.dropped),
            "comparisons_removed": self.comparisons_removed,
            "examples": {k: [vars(e) for e in v] for k, v in self.examples.items()},
        }


def dense_rank(rank: dict[str, int], keep: set[str]) -> dict[str, int]:
    """``rank`` restricted to ``keep`` and renumbered 1, 2, … in the same order (ties stay ties)."""
    return dense_ranks({rid: r for rid, r in rank.items() if rid in keep})


def _without(record: Record, drop: set[str]) -> tuple[Record, int]:
    """``record`` without the responses in ``drop`` and everything naming them; also comparisons removed."""
    comparisons = [c for c in record.comparisons if c.a not in drop and c.b not in drop]
    keep = {r.id for r in record.responses if r.id not in drop}
    update: dict[str, Any] = {
        "responses": [r for r in record.responses if r.id not in drop],
        "comparisons": comparisons,
    }
    if record.rank is not None:
        update["rank"] = dense_rank(record.rank, keep)
    return record.model_copy(update=update), len(record.comparisons) - len(comparisons)


@dataclass
class RecordFiltered:
    """What the filters did to one record (its part of the report)."""

    record_id: str
    responses_in: int
    responses_out: int  # fewer than two: the record is dropped
    comparisons_removed: int
    drops: list[tuple[str, str, str]]  # (reason, response id, excerpt) in response order


def filter_record(record: Record, config: FilterConfig) -> tuple[Record | None, RecordFiltered]:
    """One record without its bad responses (None when fewer than two are left), and what was dropped."""
    lengths = {r.id: len(r.content) for r in record.responses}
    exempt = prompt_is_exempt(record, config)
    drops: list[tuple[str, str, str]] = []
    for response in record.responses:
        siblings = [n for rid, n in lengths.items() if rid != response.id and n > 0]
        reason = response_reason(response.content, siblings, config, exempt)
        if reason is not None:
            drops.append((reason, response.id, excerpt(response.content)))
    kept, removed = _without(record, {rid for _, rid, _ in drops}) if drops else (record, 0)
    outcome = RecordFiltered(record.id, len(record.responses), len(kept.responses), removed, drops)
    return (kept if len(kept.responses) >= 2 else None), outcome


def add_to_report(report: FilterReport, outcome: RecordFiltered, max_examples: int = 3) -> None:
    """Count one record's outcome; examples are the first ``max_examples`` in input order."""
    report.records_in += 1
    report.responses_in += outcome.responses_in
    report.comparisons_removed += outcome.comparisons_removed
    for reason, response_id, text in outcome.drops:
        report.dropped[reason] += 1
        examples = report.examples.setdefault(reason, [])
        if len(examples) < max_examples:
            examples.append(FilterExample(outcome.record_id, response_id, text))
    if outcome.responses_out < 2:
        report.records_dropped += 1
        if len(report.records_dropped_examples) < max_examples:
            report.records_dropped_examples.append(outcome.record_id)
        return
    report.records_out += 1
    report.responses_out += outcome.responses_out


def filter_records(
    records: list[Record], config: FilterConfig | None = None, max_examples: int = 3
) -> tuple[list[Record], FilterReport]:
    """Drop bad responses (and records left with fewer than two); return kept records and the report
    (:func:`filter_step` over the list)."""
    report = FilterReport()
    return list(filter_step(Records(records), config or FilterConfig(), report, max_examples)), report


def filter_step(records: Records, config: FilterConfig, report: FilterReport, max_examples: int = 3) -> Iterator[Any]:
    """:func:`filter_record` over ``records``: the kept records (their lines when streamed from files),
    counting each record into ``report`` as it passes."""
    for kept, outcome in records.step(functools.partial(filter_record, config=config)):
        add_to_report(report, outcome, max_examples)
        if kept is not None:
            yield kept


def filter_file(
    source: str | Path,
    output: str | Path,
    config: FilterConfig | None = None,
    report_json: str | Path | None = None,
    *,
    skip_invalid: bool = False,
    workers: int | None = None,
) -> tuple[FilterReport, ReadResult]:
    """:func:`filter_step` from a record file into ``output`` (and its report into ``report_json``), streamed,
    as ``cheems curate filter``: the report and the lines skipped. The outputs are claimed first
    (:func:`cheems.outputs.claim_outputs`): never ``source``."""
    claim_outputs(inputs=[("IN", source)], files=[("--output", output), ("--report-json", report_json)])
    report = FilterReport()
    records = Records([source], skip_invalid=skip_invalid, workers=workers, label="curate filter")
    write_lines_and_report(output, filter_step(records, config or FilterConfig(), report), report_json, report.to_dict)
    return report, records.issues
