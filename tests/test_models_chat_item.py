"""``chat_item``: the one rule that splits a chat into the (prompt, response) a reward model scores, used by
``cheems serve``'s ``messages`` (HTTP 422) and ``cheems.rewards``' conversational completions (InputError); each
maps its :class:`ChatError` to its own error shape (issue 34)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from cheems.data.schema import Message
from cheems.errors import InputError
from cheems.models.base import ChatError, chat_item
from cheems.rewards.rl_inputs import score_item
from cheems.serve.protocols import PoolingRequest, RequestError, chat_sample


def turns(*pairs: tuple[str, Any]) -> list[Any]:
    """Turns as a parser hands them over (a namespace lets a non-text content through, as no parser here does)."""
    return [SimpleNamespace(role=r, content=c) for r, c in pairs]


def msgs(*pairs: tuple[str, str]) -> list[Message]:
    return [Message(role=r, content=c) for r, c in pairs]


@dataclass(frozen=True)
class Refused:
    """A row's expected ChatError: the argument at fault and what its message says."""

    part: str
    says: str


# case -> (turns, prompt given apart, the item or how it is refused)
TABLE: dict[str, tuple[list[Any], Any, Any]] = {
    "system, user, assistant": (
        turns(("system", "s"), ("user", "q"), ("assistant", "a")),
        None,
        (msgs(("system", "s"), ("user", "q")), "a"),
    ),
    "multi-turn": (
        turns(("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2")),
        None,
        (msgs(("user", "q1"), ("assistant", "a1"), ("user", "q2")), "a2"),
    ),
    "no assistant last": (turns(("user", "q")), None, Refused("turns", "the last turn is 'user'")),
    "assistant then user": (
        turns(("assistant", "a"), ("user", "q")),
        None,
        Refused("turns", "must end with the assistant"),
    ),
    "no turns": ([], "q", Refused("turns", "no turns")),
    "no user turn": (turns(("system", "s"), ("assistant", "a")), None, Refused("prompt", "no user turn")),
    "only the assistant": (turns(("assistant", "a")), None, Refused("prompt", "no user turn")),
    "empty response": (turns(("user", "q"), ("assistant", "")), None, (msgs(("user", "q")), "")),
    "empty prompt content": (turns(("user", ""), ("assistant", "a")), None, (msgs(("user", "")), "a")),
    "non-string content": (turns(("user", 5), ("assistant", "a")), None, Refused("turns", "turn 0's content is int")),
    "non-string response": (
        turns(("user", "q"), ("assistant", None)),
        None,
        Refused("turns", "turn 1's content is NoneType"),
    ),
    "unknown role kept": (
        turns(("user", "q"), ("narrator", "n"), ("assistant", "a")),
        None,
        (msgs(("user", "q"), ("narrator", "n")), "a"),
    ),
    "unknown role last": (
        turns(("user", "q"), ("narrator", "n")),
        None,
        Refused("turns", "the last turn is 'narrator'"),
    ),
    # the chat's start given apart (TRL's prompt, then the completion's turns)
    "string prompt, one turn": (turns(("assistant", "a")), "q", ("q", "a")),
    "string prompt, tool turns": (
        turns(("assistant", ""), ("tool", "4"), ("assistant", "a")),
        "q",
        (msgs(("user", "q"), ("assistant", ""), ("tool", "4")), "a"),
    ),
    "chat prompt, one turn": (
        turns(("assistant", "a")),
        msgs(("system", "s"), ("user", "q")),
        (msgs(("system", "s"), ("user", "q")), "a"),
    ),
    "chat prompt without a user turn": (
        turns(("assistant", "a")),
        msgs(("system", "s")),
        Refused("prompt", "no user turn"),
    ),
}


@pytest.mark.parametrize("case", list(TABLE))
def test_chat_item(case):
    given, prompt, want = TABLE[case]
    if isinstance(want, Refused):
        with pytest.raises(ChatError, match=want.says) as e:
            chat_item(given, prompt)
        assert e.value.part == want.part
    else:
        assert chat_item(given, prompt) == want


def test_serve_maps_a_chat_error_to_one_422_line_naming_messages():
    request = PoolingRequest.model_validate({"messages": [{"role": "user", "content": "q"}]})
    with pytest.raises(RequestError, match="^messages: the last turn is 'user'") as e:
        request.samples()
    assert e.value.status == 422 and "\n" not in str(e.value)
    with pytest.raises(RequestError, match="^messages: no user turn"):
        chat_sample(turns(("system", "s"), ("assistant", "a")))


def test_rewards_map_a_chat_error_to_an_input_error_naming_the_field():
    with pytest.raises(InputError, match="must end with the assistant's turn") as e:
        score_item("q", [{"role": "user", "content": "x"}], "0")
    assert e.value.field == "completions[0]"
    # stricter than before issue 34 (as serve): a chat prompt needs a user turn
    with pytest.raises(InputError, match="no user turn") as e:
        score_item([{"role": "system", "content": "s"}], [{"role": "assistant", "content": "a"}], "1")
    assert e.value.field == "prompts[1]"
