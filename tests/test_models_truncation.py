"""Truncation from the start, token by token, on a tiny BERT text-pair RM (m3e-small's tokenizer): the prompt
loses its start first; a response too long alone loses its start too (the prompt is then empty); [CLS] and both
[SEP]s always stay, and the response's last token, where the reward is read, is never cut."""

from __future__ import annotations

import pytest

from cheems.models import load_scorer
from tiny_models import build_tiny_bert

LIMIT = 16
ROOM = LIMIT - 3  # [CLS] prompt [SEP] response [SEP]
DIGITS = "零一二三四五六七八九"  # one token per character, so every cut is visible


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return load_scorer(str(build_tiny_bert(tmp_path_factory.mktemp("bert"))), max_length=LIMIT).encoder


def ids(encoder, text: str) -> list[int]:
    return encoder.tokenizer(text, add_special_tokens=False)["input_ids"]


def pair(encoder, prompt: list[int], response: list[int]) -> tuple[list[int], list[int]]:
    tok = encoder.tokenizer
    cls, sep = tok.cls_token_id, tok.sep_token_id
    return [cls, *prompt, sep, *response, sep], [0] * (len(prompt) + 2) + [1] * (len(response) + 1)


def test_a_long_prompt_loses_its_start(encoder):
    prompt, response = "问题" + DIGITS * 2, "答案是四。"
    (enc,) = encoder.encode([(prompt, response)])
    p, r = ids(encoder, prompt), ids(encoder, response)
    assert enc.features == pair(encoder, p[-(ROOM - len(r)) :], r)
    assert encoder.tokenizer.decode(enc.features[0][1:9]).replace(" ", "") == DIGITS[2:]  # the end of the prompt
    assert enc.full_length == len(p) + len(r) + 3 and not enc.response_too_long
    assert encoder.features([(prompt, response)]) == [enc.features]


def test_a_long_response_drops_the_prompt_and_loses_its_own_start(encoder):
    prompt, response = "问题", DIGITS * 2 + "。"
    (enc,) = encoder.encode([(prompt, response)])
    r = ids(encoder, response)
    assert enc.features == pair(encoder, [], r[-ROOM:])
    assert encoder.tokenizer.convert_ids_to_tokens(enc.features[0][-2:]) == ["。", "[SEP]"]  # the last token stays
    assert enc.full_length == 2 + len(r) + 3 and enc.response_too_long


def test_both_long(encoder):
    prompt, response = DIGITS * 3, "回答" + DIGITS * 2
    (enc,) = encoder.encode([(prompt, response)])
    assert enc.features == pair(encoder, [], ids(encoder, response)[-ROOM:])
    assert len(enc.features[0]) == LIMIT and enc.response_too_long


def test_a_response_that_just_fits_keeps_no_prompt(encoder):
    response = DIGITS + "一二。"  # 13 tokens: exactly the room, so no prompt token is left
    (enc,) = encoder.encode([("问题", response)])
    assert enc.features == pair(encoder, [], ids(encoder, response))
    assert enc.response_too_long  # its meaning: the response alone leaves the prompt no room


def test_inputs_that_fit_are_the_tokenizers_own_pair(encoder):
    items = [("中国的首都是哪里？", "北京。"), ("你好", "你好！")]
    for (prompt, response), enc in zip(items, encoder.encode(items)):
        expected = encoder.tokenizer(prompt, response)
        assert enc.features == (expected["input_ids"], expected["token_type_ids"])
        assert enc.full_length == len(expected["input_ids"]) and not enc.response_too_long
