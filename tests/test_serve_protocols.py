"""``cheems serve`` speaks OpenRLHF's and vLLM's reward protocols, on a real server on loopback, and its rewards are
``cheems score``'s (1e-5, fp32) for a text-pair BERT RM and a chat Qwen2 RM: alone, and inside mixed concurrent
batches. The server is the one ``cheems serve`` runs, in a thread of this process (``reward_app``, one per model and
settings); the command as a process is tested in test_serve_faults.py."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from cheems.models import load_scorer
from serve_server import ServedApp
from tiny_models import build_tiny_bert, build_tiny_qwen2

PAIRS = [
    ("用一句话介绍长城。", "长城是中国古代的军事防御工程。"),
    ("1+1 等于几？", "等于 2。"),
    ("写一首关于春天的短诗。", "春风拂面，桃花映红了山岗，燕子归来，田野一片新绿。"),
    ("What is the capital of France?", "Paris."),
]
SYSTEM = "You are a helpful assistant."


def policy_prompt(prompt: str) -> str:
    """The prompt as a Qwen policy renders it (ChatML with the generation prompt), as OpenRLHF sends it."""
    return f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"


def chat(prompt: str, response: str) -> list[dict]:
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}]


@pytest.fixture(scope="module", params=["bert", "qwen2"])
def rm(request, tmp_path_factory, qwen2_tokenizer_dir):
    """(kind, model folder, cheems score's rewards of PAIRS in fp32)."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "bert":
        build_tiny_bert(folder, seed=3)
    else:
        build_tiny_qwen2(folder, qwen2_tokenizer_dir, seed=3)
    expected = load_scorer(str(folder), dtype="fp32", device="cpu").score(PAIRS)
    return request.param, folder, expected


@pytest.fixture
def server(rm, reward_app):
    return reward_app(rm[1])


def get_reward(url: str, prompt: str, response: str) -> dict:
    """One sample as OpenRLHF's executor sends it: the policy's prompt, and prompt + response + EOS as the query."""
    shown = policy_prompt(prompt)  # a Qwen policy's ChatML, whatever the RM's own format
    query = shown + response + "<|im_end|>"
    r = httpx.post(url + "/get_reward", json={"query": [query], "prompts": [shown], "labels": [""]}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_get_reward_gives_cheems_scores_reward(rm, server):
    kind, _, expected = rm
    for (prompt, response), want in zip(PAIRS, expected):
        reply = get_reward(server.url, prompt, response)
        assert reply["rewards"] == pytest.approx([want], abs=1e-5)
        assert reply["scores"] == reply["rewards"]
        assert reply["extra_logs"]["truncated"] == [0] and reply["extra_logs"]["tokens"][0] > 0


@pytest.mark.parametrize("path", ["/classify", "/v1/classify", "/pooling"])
def test_classify_and_pooling_render_messages_with_the_rms_own_format(rm, server, path):
    kind, folder, expected = rm
    for (prompt, response), want in zip(PAIRS, expected):
        r = httpx.post(server.url + path, json={"model": str(folder), "messages": chat(prompt, response)}, timeout=30)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "list" and body["model"] == str(folder) and len(body["data"]) == 1
        row = body["data"][0]
        value = row["data"] if path == "/pooling" else row["probs"]
        assert row["index"] == 0 and value == pytest.approx([want], abs=1e-5)  # raw: no sigmoid by default
        if path != "/pooling":
            assert row["num_classes"] == 1 and row["label"] == "LABEL_0"
        usage = body["usage"]
        assert usage["prompt_tokens"] == usage["total_tokens"] > 0 and usage["truncated_inputs"] == 0


@pytest.mark.parametrize("switch", ["use_activation", "activation", "softmax"])
def test_activation_and_its_old_names_give_the_sigmoid(rm, server, switch):
    _, _, expected = rm
    prompt, response = PAIRS[0]
    on = httpx.post(server.url + "/classify", json={"messages": chat(prompt, response), switch: True}, timeout=30)
    off = httpx.post(server.url + "/classify", json={"messages": chat(prompt, response), switch: False}, timeout=30)
    assert on.json()["data"][0]["probs"][0] == pytest.approx(1 / (1 + math.exp(-expected[0])), abs=1e-6)
    assert off.json()["data"][0]["probs"][0] == pytest.approx(expected[0], abs=1e-5)


def test_health_and_models_list_every_served_name(rm, reward_app):
    _, folder, _ = rm
    s = reward_app(folder, served_model_name="my-rm")
    assert httpx.get(s.url + "/health").status_code == 200
    names = [m["id"] for m in httpx.get(s.url + "/v1/models").json()["data"]]
    assert names[0] == "my-rm" and str(folder) in names
    for name in names:  # each name is served; the reply names the one asked for
        r = httpx.post(s.url + "/pooling", json={"model": name, "messages": chat(*PAIRS[0])}, timeout=30)
        assert r.status_code == 200 and r.json()["model"] == name


def test_same_rewards_inside_mixed_concurrent_batches(rm):
    """Both protocols at once, one batch: the batch fires only when all 2 x len(PAIRS) samples are in (max-batch),
    and a request not in it would time out (its wait is far longer than the request timeout). A server of its own:
    it counts the batches."""
    kind, folder, expected = rm
    n = 2 * len(PAIRS)
    with ServedApp(folder, max_batch=n, max_wait_ms=10000, request_timeout=60) as s:

        def one(i: int) -> float:
            prompt, response = PAIRS[i % len(PAIRS)]
            if i < len(PAIRS):
                return get_reward(s.url, prompt, response)["rewards"][0]
            r = httpx.post(s.url + "/classify", json={"messages": chat(prompt, response)}, timeout=60)
            return r.json()["data"][0]["probs"][0]

        with ThreadPoolExecutor(n) as pool:
            got = list(pool.map(one, range(n)))
        assert s.stats() == {"waiting": 0, "batches": 1, "scored": n, "left": 0}
    assert got == pytest.approx(expected + expected, abs=1e-5)


def test_a_long_input_loses_its_start_and_is_counted(rm, reward_app):
    """Past --max-length the prompt's start goes (the encoder's rule, as cheems score): the reply counts it, the
    reward is cheems score's at that length; --truncate error refuses it instead."""
    kind, folder, _ = rm
    prompt, response = "很长的问题" * 40, "回答。"
    want = load_scorer(str(folder), dtype="fp32", device="cpu", max_length=64).score([(prompt, response)])[0]
    s = reward_app(folder, max_length=64)
    reply = get_reward(s.url, prompt, response)
    assert reply["extra_logs"] == {"truncated": [1], "tokens": [64]}
    assert reply["rewards"][0] == pytest.approx(want, abs=1e-5)
    r = httpx.post(s.url + "/classify", json={"messages": chat(prompt, response)}, timeout=30)
    assert r.json()["usage"]["truncated_inputs"] == 1 and r.json()["usage"]["prompt_tokens"] == 64
    s = reward_app(folder, max_length=64, truncate="error")
    r = httpx.post(s.url + "/classify", json={"messages": chat(prompt, response)}, timeout=30)
    assert r.status_code == 400 and "over this server's limit of 64" in r.json()["detail"]
    short = httpx.post(s.url + "/classify", json={"messages": chat(*PAIRS[1])}, timeout=30)
    assert short.status_code == 200


def test_text_inputs_are_read_as_given(rm, server):
    """vLLM's ``input`` and a query without ``prompts`` are rendered texts, scored as they are (cut from the start):
    for the chat RM the text its template writes gives cheems score's reward; any RM gives ``score_texts``'."""
    kind, folder, expected = rm
    scorer = load_scorer(str(folder), dtype="fp32", device="cpu")
    if kind == "qwen2":
        texts = [scorer.tokenizer.apply_chat_template(chat(p, r), tokenize=False) for p, r in PAIRS]
        assert scorer.score_texts(texts) == pytest.approx(expected, abs=1e-5)
    else:
        texts = [p + r for p, r in PAIRS]
    want = scorer.score_texts(texts)
    r = httpx.post(server.url + "/classify", json={"input": texts}, timeout=30)
    assert [row["probs"][0] for row in r.json()["data"]] == pytest.approx(want, abs=1e-5)
    assert [row["index"] for row in r.json()["data"]] == list(range(len(texts)))
    r = httpx.post(server.url + "/get_reward", json={"query": texts}, timeout=30)
    assert r.json()["rewards"] == pytest.approx(want, abs=1e-5)
