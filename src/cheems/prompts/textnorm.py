"""The one normalisation of prompt text: what ``dedup`` and ``decontaminate`` compare.

Two prompts that differ only in ways a reader does not notice normalise to the same string:

- Unicode NFKC, which also folds full-width letters, digits and signs to half width (``ＡＢＣ１２３`` → ``ABC123``);
- case (``casefold``), except in code-like text (:data:`CODE`: a call ``f(``, an index ``a[``, an assignment
  ``x =``, an attribute ``a.b``, ``snake_case``, braces or a backtick), where case is meaning
  (``print(A)`` is not ``Print(a)``);
- whitespace and punctuation, Chinese and Western (``，。？！“”、`` and ``,.?!"``), removed: Chinese has no spaces
  between words, so a removed space never joins two words that were apart. Punctuation inside a number or a
  formula (:data:`FORMULA`: ``-5``, ``1.5``, ``(2+3)*4``, ``1/2``, ``50%``, ``1,000``, ``2:30``, ``1、2``) is kept:
  there it is meaning (``1.5`` is not ``15``, ``-5`` is not ``5``);
- traditional characters, converted to simplified with OpenCC's ``t2s`` tables (``opencc-python-reimplemented``).

A multi-turn prompt is compared by its full text: every turn's content, in order.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path
from typing import cast

from cheems.data.schema import Record, prompt_messages


@functools.cache
def _converter() -> tuple[object, frozenset[str]]:
    """OpenCC's t2s converter and the traditional characters: those its character table maps to another one.

    The pure-Python converter costs about 1 µs a character; most prompts are simplified already, so a prompt
    without a traditional character skips it. (Of the phrase table, only a few entries of characters that are all
    simplified already, such as 么麽 → 幺麽, are left out that way.)
    """
    import opencc

    table = Path(opencc.__file__).parent / "dictionary" / "TSCharacters.txt"
    traditional = set()
    for line in table.read_text(encoding="utf-8").splitlines():
        key, _, values = line.partition("\t")
        if values.split(" ")[0] != key:
            traditional.add(key)
    return opencc.OpenCC("t2s"), frozenset(traditional)


_MARKS = r"-+*/^=<>%.,:()\[\]、"
FORMULA = re.compile(rf"[-+(\[.]*\d(?:[{_MARKS}\d]*[\d)\]%])?")
"""A number or formula (after NFKC, without white space): it starts with a sign, a bracket or a decimal point
and its first digit, and ends with a digit, a closing bracket or ``%``; its punctuation is kept."""
CODE = re.compile(r"`|[{}]|[A-Za-z_][A-Za-z0-9_]*(?:[(\[]|=|\.[A-Za-z_])|[A-Za-z0-9]_[A-Za-z0-9]")
"""Text that looks like code keeps its case (in NFKC text, before white space and punctuation are removed)."""


def _blank(char: str) -> bool:
    # Z*: separators; C*: control and format characters (zero-width spaces among them)
    return unicodedata.category(char)[0] in "ZC" or char.isspace()


def _punctuation(char: str) -> bool:
    return unicodedata.category(char)[0] == "P"


def _without_punctuation(text: str) -> str:
    """``text`` without punctuation, except inside the numbers and formulas :data:`FORMULA` finds."""
    parts, at = [], 0
    for match in FORMULA.finditer(text):
        parts.append("".join(c for c in text[at : match.start()] if not _punctuation(c)))
        parts.append(match.group())
        at = match.end()
    parts.append("".join(c for c in text[at:] if not _punctuation(c)))
    return "".join(parts)


def normalize(text: str) -> str:
    """``text`` as prompts are compared: NFKC (full to half width), case-folded unless code-like, without
    whitespace or punctuation (but numbers and formulas whole), traditional characters as simplified."""
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")  # the minus sign is a hyphen-minus
    if not CODE.search(text):
        text = text.casefold()
    text = _without_punctuation("".join(c for c in text if not _blank(c)))
    converter, traditional = _converter()
    if traditional.isdisjoint(text):
        return text
    return cast("str", converter.convert(text))  # type: ignore[attr-defined]


def prompt_turns(record: Record) -> list[tuple[str, str]]:
    """(role, normalised content) of every turn of a record's prompt as a model sees it: its ``sys_prompt`` as the
    first, system turn, then the earlier turns of a multi-turn prompt, then the question."""
    return [(m["role"], normalize(m["content"])) for m in prompt_messages(record.prompt)]
