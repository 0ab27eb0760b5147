"""The one normalisation of prompt text: what ``dedup`` and ``decontaminate`` compare.

Two prompts that differ only in ways a reader does not notice normalise to the same string:

- Unicode NFKC, which also folds full-width letters, digits and signs to half width (``ＡＢＣ１２３`` → ``ABC123``);
- case (``casefold``);
- whitespace and punctuation, Chinese and Western (``，。？！“”、`` and ``,.?!"``), removed: Chinese has no spaces
  between words, so a removed space never joins two words that were apart;
- traditional characters, converted to simplified with OpenCC's ``t2s`` tables (``opencc-python-reimplemented``).

A multi-turn prompt is compared by its full text: every turn's content, in order.
"""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

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


def _kept(char: str) -> bool:
    # P*: punctuation; Z*: separators; C*: control and format characters (zero-width spaces among them)
    return unicodedata.category(char)[0] not in "PZC" and not char.isspace()


def normalize(text: str) -> str:
    """``text`` as prompts are compared: NFKC (full to half width), case-folded, without whitespace or punctuation,
    traditional characters as simplified."""
    text = "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if _kept(c))
    converter, traditional = _converter()
    if traditional.isdisjoint(text):
        return text
    return converter.convert(text)  # type: ignore[attr-defined]


def prompt_text(record: Record) -> str:
    """A record's prompt as one text: a multi-turn prompt is every turn's content, in order."""
    return "\n".join(m["content"] for m in prompt_messages(record.input))


def normalized_prompt(record: Record) -> str:
    """The normalised text of a record's prompt (:func:`normalize` of :func:`prompt_text`)."""
    return normalize(prompt_text(record))
