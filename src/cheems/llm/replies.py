"""What a chat model's reply leaves: its reasoning set apart, its text as stored, a failure reason in words."""

from __future__ import annotations

import re
from collections.abc import Mapping

RAW_KEEP_CHARS = 2000  # of a judge's reply, what is stored (cache, failures file, output): head and tail


def clip_reply(text: str | None) -> str | None:
    """A judge's reply as stored: its head and tail when longer than ``RAW_KEEP_CHARS`` (the verdict is at one end)."""
    if text is None or len(text) <= RAW_KEEP_CHARS:
        return text
    half = RAW_KEEP_CHARS // 2
    return f"{text[:half]}\n…[{len(text) - 2 * half} characters cut]…\n{text[-half:]}"


# Reason code -> what it means: a reply that holds no answer at all (a judge adds its verdict's reasons).
REPLY_REASONS = {
    "empty": "empty reply",
    "reasoning_only": "reasoning only, no answer after it",
}
TRANSPORT_REASONS = {
    "timeout": "no reply in time (after all retries)",
    "connection": "connection failed or reset (after all retries)",
    "malformed": "reply was not valid chat-completions JSON (after all retries)",
    "too_large": "reply longer than the size limit (not read, not retried)",
}


def failure_text(code: str, reasons: Mapping[str, str] = REPLY_REASONS) -> str:
    """A failure reason code in words: one of ``reasons``, a transport failure, or an HTTP status."""
    if code.startswith("http_"):
        return f"HTTP {code[5:]} (after retries where retrying helps)"
    return reasons.get(code) or TRANSPORT_REASONS.get(code) or code


_TAG = re.compile(r"<(/?)(think|thinking|reasoning|reflection)>", re.IGNORECASE)


def strip_reasoning(text: str) -> tuple[str, bool]:
    """The reply without reasoning, and whether there was any.

    Removed: each ``<think>…</think>`` block; everything before a close tag that has no opening one
    (the opening tag was in the prompt, as some chat templates do); everything after an opening tag
    that is never closed (cut off mid-reasoning). One pass over the tags: linear in the reply's length.
    """
    kept: list[str] = []
    start, inside, had = 0, None, False  # inside: the name of the open tag
    for tag in _TAG.finditer(text):
        closing, name = bool(tag.group(1)), tag.group(2).lower()
        if inside is None and not closing:  # a block opens
            kept.append(text[start : tag.start()])
            inside, had = name, True
        elif closing and name == inside:  # the block closes
            kept.append("\n")
            start, inside = tag.end(), None
        elif closing:  # a close with no matching open: everything so far was reasoning
            kept, start, inside, had = [], tag.end(), None, True
    if inside is None:
        kept.append(text[start:])
    return "".join(kept), had
