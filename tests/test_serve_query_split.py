"""How ``/get_reward`` reads OpenRLHF's query back into (prompt, response): the policy's ChatML prompt into its
turns (its template's default system prompt dropped, so the RM renders its own), its trailing end markers off."""

from __future__ import annotations

from cheems.data.schema import prompt_messages
from cheems.serve.protocols import RewardRequest, chatml_turns, reward_samples

QWEN = "<|im_start|>system\n{}<|im_end|>\n<|im_start|>user\n问题<|im_end|>\n<|im_start|>assistant\n"


def test_a_chatml_prompt_is_read_back_into_turns():
    assert prompt_messages(chatml_turns(QWEN.format("You are a helpful assistant."))) == [
        {"role": "user", "content": "问题"}
    ]
    own = prompt_messages(chatml_turns(QWEN.format("你是数学老师。")))
    assert own == [{"role": "system", "content": "你是数学老师。"}, {"role": "user", "content": "问题"}]


def test_a_prompt_that_is_not_chatml_stays_text():
    assert chatml_turns("问题：1+1=?") == "问题：1+1=?"
    assert chatml_turns("<|im_start|>user\n问题<|im_end|>\n") == "<|im_start|>user\n问题<|im_end|>\n"  # no opening


def test_the_response_loses_the_policys_end_markers_and_a_query_without_its_prompt_is_text():
    prompt = QWEN.format("You are a helpful assistant.")
    request = RewardRequest(query=[prompt + "回答<|im_end|>\n<|endoftext|>", "别的文本"], prompts=[prompt, prompt])
    first, second = reward_samples(request)
    assert first.text == "回答" and prompt_messages(first.prompt) == [{"role": "user", "content": "问题"}]
    assert second.prompt is None and second.text == "别的文本"
