"""What RL trainers hand a reward function, as the (prompt, response) items a cheems scorer reads.

TRL's GRPO gives prompts and completions in one of two forms: plain (strings) or conversational (lists of
``{"role", "content"}`` messages; a completion is ``[{"role": "assistant", "content": ...}]``, longer when the
policy called tools). verl gives the response as a string and the prompt only where the dataset put it. Either
way the reward model must read them as it was trained: the prompt as its prompt (a text pair's first text, or
the turns of its chat template) and the last assistant turn as the response, never one concatenated string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cheems.data.schema import Message
from cheems.errors import InputError
from cheems.models.base import ChatError, Prompt, ScoreItem, chat_item


def _content(value: Any, where: str) -> str:
    """A message's content as text: a string, None (an assistant turn of tool calls only) or text parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(p, Mapping) for p in value):  # [{"type": "text", "text"}]
        return "".join(p["text"] for p in value if p.get("type") == "text" and isinstance(p.get("text"), str))
    raise InputError(f"a message's content is {type(value).__name__}, not text", field=where)


def chat_turns(value: Any, where: str) -> list[Message]:
    """``value`` (a list of ``{"role", "content"}`` mappings) as chat turns; InputError naming ``where`` else."""
    # any iterable of messages: a list, or the numpy array a parquet column may hand verl
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InputError(f"expected a list of chat messages, got {type(value).__name__}", field=where)
    turns = []
    for i, message in enumerate(value):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InputError("a chat message needs a 'role' (and 'content')", field=f"{where}[{i}]")
        turns.append(Message(role=message["role"], content=_content(message.get("content"), f"{where}[{i}]")))
    return turns


def as_prompt(value: Any, where: str) -> Prompt:
    """A prompt as cheems scorers take it: a string (one user turn) or chat turns."""
    return value if isinstance(value, str) else chat_turns(value, where)


def score_item(prompt: Any, completion: Any, where: str) -> ScoreItem:
    """One (prompt, response): a plain completion is the response; a conversational one's last turn is, and any
    turns before it (tool calls and their results) extend the prompt."""
    if isinstance(completion, str):
        return as_prompt(prompt, f"prompts[{where}]"), completion
    turns = chat_turns(completion, f"completions[{where}]")
    try:
        return chat_item(turns, as_prompt(prompt, f"prompts[{where}]"))
    except ChatError as e:
        if e.part == "prompt":
            raise InputError(
                str(e), field=f"prompts[{where}]", hint="a prompt is a string or has a user turn"
            ) from None
        raise InputError(
            str(e), field=f"completions[{where}]", hint='TRL\'s form: [{"role": "assistant", "content": "..."}]'
        ) from None


def score_items(prompts: Sequence[Any], completions: Sequence[Any]) -> list[ScoreItem]:
    """The (prompt, response) of each of TRL's prompt-completion pairs, in order."""
    if len(prompts) != len(completions):
        raise InputError(f"{len(prompts)} prompts for {len(completions)} completions", field="completions")
    return [score_item(p, c, str(i)) for i, (p, c) in enumerate(zip(prompts, completions))]
