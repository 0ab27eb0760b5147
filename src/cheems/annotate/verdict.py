"""Strict verdict parsing: a judge's reply -> "A", "B", "C", or a reason why it has no verdict.

The final answer is the reply's last non-empty line, after reasoning is removed (``<think>``
blocks, an unclosed ``<think>``, or everything before a lone ``</think>``). That line must name
exactly one label, alone or after a word such as 答案/最终答案/Answer, with decoration only
(``**A**``, ``[[A]]``, ``答案：A``, ``A。``). Anything else is not guessed at:

- a label that appears only inside reasoning is never taken;
- a last line naming two labels (``A或B``) is ambiguous;
- a reply stating one answer on an earlier line and another on the last is conflicting.

Callers re-ask the judge and finally record the pair as failed with the reason.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

LABELS = ("A", "B", "C")

# Reason code -> what it means, for reports.
FAILURE_REASONS = {
    "empty": "empty reply",
    "reasoning_only": "a verdict only inside reasoning, no final answer after it",
    "no_label": "no final A/B/C answer on the last line",
    "ambiguous": "the final line names more than one label",
    "conflicting": "the reply states different answers",
}

_TAGS = "think|thinking|reasoning|reflection"
_BLOCK = re.compile(rf"<({_TAGS})>.*?</\1>", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(rf"<(?:{_TAGS})>", re.IGNORECASE)
_CLOSE = re.compile(rf"</(?:{_TAGS})>", re.IGNORECASE)

_DECOR = r"[\s*_`'\"“”‘’\[\]()（）【】「」『』《》<>]*"
_END = r"[\s*_`'\"“”‘’\[\]()（）【】「」『』《》<>.。!！]*"
_PREFIX = (r"(?:(?:最终|最后的?)?(?:答案|结论|判断|裁决|评判结果|评判|选择|结果|回答)"
           r"|(?i:final\s+answer|final\s+verdict|answer|verdict|choice))")  # English words in any case, labels upper
_FINAL = re.compile(rf"^{_DECOR}(?:{_PREFIX}{_DECOR}(?:是|为)?{_DECOR}[:=]?{_DECOR})?([ABC]){_END}$")
# "A更好" / "回答B更优": only A or B can be "better".
_BETTER = re.compile(rf"^{_DECOR}(?:回答|选项|答案)?{_DECOR}([AB]){_DECOR}(?:更好|更优|更佳|较好|胜出|获胜){_END}$")
_STANDALONE = re.compile(r"(?<![A-Za-z])[ABC](?![A-Za-z])")


@dataclass(frozen=True)
class Verdict:
    """A parsed label (``A``/``B``/``C``), or ``failure`` (a key of ``FAILURE_REASONS``) and no label."""

    label: str | None
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the reply gave a usable verdict."""
        return self.label is not None


def strip_reasoning(text: str) -> tuple[str, bool]:
    """The reply without reasoning, and whether there was any."""
    had = False
    if _BLOCK.search(text):
        text, had = _BLOCK.sub("\n", text), True
    closes = list(_CLOSE.finditer(text))
    if closes:  # the opening tag was in the prompt (some chat templates): reasoning runs up to the last close
        text, had = text[closes[-1].end():], True
    opened = _OPEN.search(text)
    if opened:  # cut off mid-reasoning: nothing after the tag is an answer
        text, had = text[:opened.start()], True
    return text, had


def final_label(line: str) -> str | None:
    """The label a single line states as a final answer, or None."""
    line = line.strip()
    m = _FINAL.match(line) or _BETTER.match(line)
    return m.group(1) if m else None


def parse_verdict(reply: str | None) -> Verdict:
    """Parse a judge reply strictly (see the module docstring); never raises."""
    text = unicodedata.normalize("NFKC", reply or "")  # full-width letters and colons -> ASCII
    answer, had_reasoning = strip_reasoning(text)
    lines = [ln.strip() for ln in answer.splitlines() if ln.strip()]
    if not lines:
        return Verdict(None, "reasoning_only" if had_reasoning else "empty")
    label = final_label(lines[-1])
    if label is None:
        named = set(_STANDALONE.findall(lines[-1]))
        return Verdict(None, "ambiguous" if len(named) > 1 else "no_label")
    for line in lines[:-1]:
        earlier = final_label(line)
        if earlier is not None and earlier != label:
            return Verdict(None, "conflicting")
    return Verdict(label)
