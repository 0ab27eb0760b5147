"""The scorer protocol, the item a scorer scores, and helpers every scorer shares.

Nothing here imports torch: the all-cache-hits path of ``score_records`` must stay fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Literal, Protocol, TypeVar, runtime_checkable

from cheems.data.schema import Message, prompt_messages
from cheems.runtime import content_hash

Prompt = str | list[Message]
ScoreItem = tuple[Prompt, str]  # (prompt, response)
T = TypeVar("T")

# Bumped when a change in this package changes the scores a given model gives, so old cache
# entries stop matching (it is part of every model scorer's fingerprint).
# 2: a leading system turn is its own paragraph in text-pair inputs (was a "system: ..." line).
# 3: a folder recording mean pooling (cheems_pooling) is scored mean-pooled (was read at [CLS]).
# 4: a text pair too long is cut from its start (the prompt's, then the response's), not from the end.
# 5: on a CPU with bf16 units, bf16 scoring holds the weights in bf16 (was fp32 weights under autocast).
SCORING_VERSION = 5


@runtime_checkable
class Scorer(Protocol):
    """Anything that gives each (prompt, response) a number; higher = better.

    A scorer whose ``score`` runs only its process's share under a launcher and gathers the rest
    sets a class attribute ``shards = True`` (:mod:`cheems.models.sharding`); any other runs on rank 0.
    """

    name: str

    def fingerprint(self) -> str:
        """Identity of the scores this scorer gives (model files + settings); cheap, loads no weights."""
        ...

    def score(self, items: Sequence[ScoreItem]) -> list[float]:
        """One score per item, in the order given."""
        ...


def prompt_text(prompt: Prompt | list[dict[str, str]]) -> str:
    """The prompt as plain text, for models without a chat template.

    A system message (a record's ``sys_prompt``) comes first as its own paragraph; one user turn
    is its text alone, a longer dialogue one ``role: content`` line per turn.
    """
    if isinstance(prompt, str):
        return prompt
    messages = prompt_messages(prompt)
    system = [m["content"] for m in messages[:1] if m["role"] == "system"]
    turns = messages[len(system) :]
    if len(turns) == 1 and turns[0]["role"] == "user":
        dialogue = turns[0]["content"]
    else:
        dialogue = "\n".join(f"{m['role']}: {m['content']}" for m in turns)
    return "\n\n".join([*system, dialogue]) if dialogue else "\n\n".join(system)


def item_digest(item: ScoreItem) -> str:
    """The content hash of (prompt, response): the item's half of a score-cache key."""
    prompt, response = item
    return content_hash([prompt if isinstance(prompt, str) else prompt_messages(prompt), response])


class ChatTurn(Protocol):
    """One message of a chat, as any parser of one gives it (a :class:`Message`, a request's turn)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


class ChatError(ValueError):
    """A chat that is no (prompt, response); ``part`` names the argument of :func:`chat_item` at fault (``turns``,
    or ``prompt``: it has no user turn), for the caller's message."""

    def __init__(self, message: str, part: Literal["prompt", "turns"]) -> None:
        super().__init__(message)
        self.part = part


def chat_item(turns: Sequence[ChatTurn], prompt: Prompt | None = None) -> ScoreItem:
    """The (prompt, response) a chat is scored as: its last turn, the assistant's, is the response, and the turns
    before it are the prompt, after ``prompt`` when the chat's start comes apart (TRL's prompt and completion; a
    string prompt is one user turn, and stays a string when no turn follows it).

    :class:`ChatError` when there is no turn, the last is not the assistant's, a content is not text, or no user
    turn comes before the response. Other roles pass as they are (a tool turn, any role the template knows).
    """
    if not turns:
        raise ChatError("no turns: a chat to score must end with the assistant's turn", "turns")
    *before, last = turns
    if last.role != "assistant":
        raise ChatError(f"the last turn is '{last.role}': a chat to score must end with the assistant's turn", "turns")
    for i, turn in enumerate(turns):
        if not isinstance(turn.content, str):  # a parser let it through: the template would fail or print its repr
            raise ChatError(f"turn {i}'s content is {type(turn.content).__name__}, not text", "turns")
    if isinstance(prompt, str) and not before:
        return prompt, last.content
    head = [Message(role="user", content=prompt)] if isinstance(prompt, str) else list(prompt or [])
    context = [*head, *(Message(role=t.role, content=t.content) for t in before)]
    if not any(m.role == "user" for m in context):
        raise ChatError("no user turn before the assistant's: send the prompt as a user turn", "prompt")
    return context, last.content


def length_batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, longest first.

    Sorting makes padding nearly free; a batch holds at most ``batch_size`` items and at most
    ``max_tokens`` padded tokens, so long texts come in smaller batches (bounded memory). Longest
    first means an out-of-memory error shows up on the first batch, not after an hour.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < batch_size and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


# Progress reporting without widening the Scorer protocol: ``score_records`` installs a hook
# for the duration of one ``score`` call and model scorers call ``advance`` after each batch; the hook
# takes a float, as ``scaled_progress`` hands on a share of each batch.
_progress_hook: ContextVar[Callable[[float], None] | None] = ContextVar("cheems_progress_hook", default=None)


def advance(n: int) -> None:
    """Tell whoever is watching (a progress bar, maybe) that ``n`` more items are scored."""
    hook = _progress_hook.get()
    if hook is not None:
        hook(n)


@contextmanager
def _routed(var: ContextVar[T | None], hook: T) -> Iterator[None]:
    """``var`` set to ``hook`` for the duration of the block."""
    token = var.set(hook)
    try:
        yield
    finally:
        var.reset(token)


def progress_hook(hook: Callable[[float], None]) -> AbstractContextManager[None]:
    """Route ``advance`` calls made inside this block to ``hook``."""
    return _routed(_progress_hook, hook)


# Scores handed on before a ``score`` call returns: a scorer that gets them a reply at a time (an RM
# server) calls ``finished`` with each, and ``score_records`` caches them as they come, so a run that
# stops half-way (the server died) keeps what was scored. Only scorers that run on rank 0 alone call it.
_finished_hook: ContextVar[Callable[[Sequence[int], Sequence[float]], None] | None] = ContextVar(
    "cheems_finished_hook", default=None
)


def finished(indices: Sequence[int], scores: Sequence[float]) -> None:
    """Hand on the scores of the items at ``indices`` (of the ``score`` call running) as soon as they are
    known, to whoever keeps them (the score cache), and ``advance`` the progress by their number."""
    hook = _finished_hook.get()
    if hook is not None:
        hook(indices, scores)
    advance(len(indices))


def finished_hook(hook: Callable[[Sequence[int], Sequence[float]], None]) -> AbstractContextManager[None]:
    """Route ``finished`` calls made inside this block to ``hook``."""
    return _routed(_finished_hook, hook)


@contextmanager
def scaled_progress(factor: float) -> Iterator[None]:
    """Report each ``advance(n)`` made inside this block as ``n * factor`` (a process scoring 1/k of the work)."""
    hook = _progress_hook.get()
    if hook is None:
        yield
        return
    with progress_hook(lambda n: hook(n * factor)):
        yield
