"""cheems.rewards: the reward functions RL trainers call, fed exactly as the trainers feed them (TRL's GRPO keywords
and both its forms, verl's custom-reward keywords and its loading by path), give the model's own scores
(``load_scorer(...).score``); TRL's own in-process feeding of the same encoder RM does not (issue 33)."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import cheems.rewards.verl_custom
from cheems.data.schema import Message
from cheems.errors import InputError
from cheems.models import load_scorer
from cheems.models.backbones import locate_model
from cheems.models.encoding import RewardEncoder
from cheems.rewards import compute_score, trl_reward
from cheems.train.model import load_reward_model, save_reward_model
from helpers import grpo_step, load_as_verl_does, trl_keywords
from tiny_models import RELEASED_HEAD, build_tiny_bert, build_tiny_qwen2

PROMPTS = ["长城的历史是什么？", "你好，请问你是谁？", "这道数学题等于几？请一步一步地计算。"]
COMPLETIONS = ["长城始建于春秋战国时期，后来不断修建。", "我是一个人工智能助手。", "等于四。"]
SYSTEM = "你是一个有帮助的助手。"


@pytest.fixture(scope="module")
def encoder_rm(tmp_path_factory) -> Path:
    """A tiny BERT reward model saved as ``cheems train`` saves one (text-pair format and length recorded)."""
    base = build_tiny_bert(tmp_path_factory.mktemp("bert"))
    model, tokenizer = load_reward_model(base)
    with torch.no_grad():  # a head of a trained model's size: rewards of a few units, not ~0
        model.hf.classifier.weight.copy_(RELEASED_HEAD)
    recorded = RewardEncoder(locate_model(str(base)), 512, tokenizer).recorded()
    return save_reward_model(model, tokenizer, tmp_path_factory.mktemp("encoder-rm") / "rm", recorded=recorded)


@pytest.fixture(scope="module")
def chat_rm(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    """A tiny Qwen2 reward model with its chat template (a released RM's layout)."""
    return build_tiny_qwen2(tmp_path_factory.mktemp("qwen-rm"), qwen2_tokenizer_dir, head=RELEASED_HEAD)


def trl_in_process(folder: Path, prompts: list[str], completions: list[str]) -> list[float]:
    """What TRL's GRPO computes for ``reward_funcs="folder"`` in the plain form (1.16's ``_calculate_rewards``):
    prompt + completion as one string, no special tokens, right padding, logit 0."""
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=1).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    texts = [p + c for p, c in zip(prompts, completions)]
    inputs = tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    with torch.inference_mode():
        return model(**inputs).logits[:, 0].tolist()


def own_scores(folder: Path, items) -> list[float]:
    return load_scorer(str(folder), dtype="fp32").score(items)


def close(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(math.isclose(g, w, abs_tol=1e-5) for g, w in zip(got, want))


# ---------------------------------------------------------------------------------------------- TRL, in process


def test_trl_feeding_moves_an_encoder_rms_rewards_and_the_cheems_function_keeps_them(encoder_rm):
    """The issue's point: an encoder RM trained on (prompt, response) pairs, fed as TRL feeds an in-process RM,
    gives other rewards than its own; ``trl_reward`` called as TRL calls it gives its own."""
    own = own_scores(encoder_rm, list(zip(PROMPTS, COMPLETIONS)))
    fed_by_trl = trl_in_process(encoder_rm, PROMPTS, COMPLETIONS)
    assert max(abs(a - b) for a, b in zip(own, fed_by_trl)) > 0.05, (own, fed_by_trl)
    reward = trl_reward(encoder_rm, dtype="fp32")  # a folder as a Path or a str
    got = reward(prompts=PROMPTS, completions=COMPLETIONS, **trl_keywords(len(PROMPTS)))
    assert close(got, own), (got, own)
    assert all(type(r) is float for r in got)


@pytest.mark.parametrize("rm", ["encoder_rm", "chat_rm"])
def test_conversational_form_scores_the_prompt_turns_and_the_assistant_turn(rm, request):
    """TRL's conversational form (a system turn, a user turn; the completion one assistant message) is the
    same (prompt, response) as cheems scores it: a text pair for the encoder, its chat template for Qwen2."""
    folder = request.getfixturevalue(rm)
    prompts = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": p}] for p in PROMPTS]
    completions = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    reward = trl_reward(str(folder), dtype="fp32")
    got = reward(prompts=prompts, completions=completions, **trl_keywords(len(PROMPTS)))
    turns = [[Message(role="system", content=SYSTEM), Message(role="user", content=p)] for p in PROMPTS]
    assert close(got, own_scores(folder, list(zip(turns, COMPLETIONS))))
    # the plain form of the same pairs (no system turn) scores the prompt as the user's turn
    plain = reward(prompts=PROMPTS, completions=COMPLETIONS, **trl_keywords(len(PROMPTS)))
    assert close(plain, own_scores(folder, list(zip(PROMPTS, COMPLETIONS))))


def test_a_completion_with_tool_turns_scores_its_last_assistant_turn_after_them(chat_rm):
    """A completion from TRL's tool loop (assistant call, tool result, assistant answer): the turns before the
    answer join the prompt, the answer is the response."""
    call = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "calc"}}]}
    completion = [call, {"role": "tool", "content": "4"}, {"role": "assistant", "content": "等于四。"}]
    got = trl_reward(str(chat_rm), dtype="fp32")(prompts=[PROMPTS[2]], completions=[completion], **trl_keywords(1))
    turns = [
        Message(role="user", content=PROMPTS[2]),
        Message(role="assistant", content=""),
        Message(role="tool", content="4"),
    ]
    assert close(got, own_scores(chat_rm, [(turns, "等于四。")]))


def test_malformed_trainer_input_is_one_clear_error(chat_rm):
    reward = trl_reward(str(chat_rm), dtype="fp32")
    with pytest.raises(InputError, match="must end with the assistant's turn") as e:
        reward(prompts=["问题"], completions=[[{"role": "user", "content": "x"}]])
    assert e.value.field == "completions[0]"
    with pytest.raises(InputError, match="2 prompts for 1 completions"):
        reward(prompts=["a", "b"], completions=["x"])
    with pytest.raises(InputError, match="needs a 'role'") as e:
        reward(prompts=[[{"content": "no role"}]], completions=["x"])
    assert e.value.field == "prompts[0][0]"


def test_under_a_launcher_each_process_scores_its_own_completions(encoder_rm, monkeypatch):
    """TRL under ``accelerate launch`` calls the reward function in each process with that process's completions:
    the scorer must not split them across processes (it would wait for collectives the others never make)."""
    want = own_scores(encoder_rm, list(zip(PROMPTS, COMPLETIONS)))
    reward = trl_reward(str(encoder_rm), dtype="fp32")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    assert close(reward(prompts=PROMPTS, completions=COMPLETIONS, **trl_keywords(3)), want)


def test_the_function_has_a_name_trl_logs_and_refuses_local_options_with_a_url(encoder_rm):
    assert trl_reward(str(encoder_rm)).__name__ == "cheems_reward"
    assert trl_reward(str(encoder_rm), name="rm_zh").__name__ == "rm_zh"
    with pytest.raises(InputError, match="max_length, dtype set the scoring of a local model") as e:
        trl_reward("http://127.0.0.1:8766", max_length=1024, dtype="fp32")
    assert e.value.field == "max_length"
    with pytest.raises(InputError, match="must be positive"):
        trl_reward("http://127.0.0.1:8766", timeout=0)
    with pytest.raises(InputError, match="served_name names a model at a server") as e:
        trl_reward(str(encoder_rm), served_name="rm")
    assert e.value.field == "served_name"


def test_a_server_spec_keeps_the_bound_on_its_wait(hanging_server):
    """``trl_reward("vllm:URL#MODEL")`` (a load_scorer spec) waits no longer than ``timeout`` either."""
    reward = trl_reward(f"vllm:{hanging_server}#rm", timeout=0.5)
    with pytest.raises(InputError, match="no answer from the reward model server"):
        reward(prompts=PROMPTS[:1], completions=COMPLETIONS[:1])


# ------------------------------------------------------------------------------------------------------- verl


def verl_call(fn, extra_info: dict | None, solution: str = COMPLETIONS[0]) -> float:
    """As verl's naive reward manager (reward loop) calls it, with the router keywords it adds."""
    return fn(
        data_source="cheems/zh",
        solution_str=solution,
        ground_truth=None,
        extra_info=extra_info,
        reward_router_address=None,
        reward_model_tokenizer=None,
    )


def test_verl_loads_the_file_by_path_and_a_missing_url_or_prompt_is_one_clear_error():
    configured = load_as_verl_does(cheems.rewards.verl_custom.__file__)
    with pytest.raises(InputError, match="needs the reward server's URL") as e:
        verl_call(configured({}), {"question": PROMPTS[0]})
    assert e.value.field == "url" and "reward_kwargs.url" in (e.value.hint or "")
    fn = configured({"url": "http://127.0.0.1:9", "prompt_key": "prompt_text"})
    with pytest.raises(
        InputError, match=r"no prompt at extra_info\['prompt_text'\] \(extra_info has: index, question\)"
    ):
        verl_call(fn, {"index": 0, "question": PROMPTS[0]})
    with pytest.raises(InputError, match="extra_info has: nothing"):
        verl_call(fn, None)


@pytest.fixture
def hanging_server():
    """A socket that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_server_that_never_answers_fails_after_the_timeout_not_never(hanging_server):
    """verl's own reward loop waits for ever (``ClientTimeout(total=None)``); these give up after ``timeout``."""
    with pytest.raises(InputError, match="no answer from the reward model server") as e:
        compute_score("d", "回答", None, {"question": "问题"}, url=hanging_server, timeout=0.5)
    assert "0.5 s" in str(e.value)
    reward = trl_reward(hanging_server, timeout=0.5)
    with pytest.raises(InputError, match="no answer from the reward model server"):
        reward(prompts=PROMPTS, completions=COMPLETIONS, **trl_keywords(3))


# ------------------------------------------------------------------------------------- over a real cheems serve


@pytest.fixture(scope="module")
def served(encoder_rm, chat_rm, reward_app):
    """Both RMs behind real ``cheems serve`` servers on loopback (``--dtype fp32``, in threads of this process)."""
    return {name: reward_app(folder).url for name, folder in (("encoder", encoder_rm), ("chat", chat_rm))}


@pytest.mark.parametrize("rm", ["encoder", "chat"])
def test_trl_reward_over_cheems_serve_gives_the_models_own_scores(rm, served, encoder_rm, chat_rm):
    folder = {"encoder": encoder_rm, "chat": chat_rm}[rm]
    reward = trl_reward(served[rm], timeout=30)
    plain = reward(prompts=PROMPTS, completions=COMPLETIONS, **trl_keywords(3))
    assert close(plain, own_scores(folder, list(zip(PROMPTS, COMPLETIONS))))
    prompts = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": p}] for p in PROMPTS]
    completions = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    chat = reward(prompts=prompts, completions=completions, **trl_keywords(3))
    turns = [[Message(role="system", content=SYSTEM), Message(role="user", content=p)] for p in PROMPTS]
    assert close(chat, own_scores(folder, list(zip(turns, COMPLETIONS))))


def test_verl_compute_score_over_cheems_serve_gives_the_models_own_score(served, encoder_rm):
    fn = load_as_verl_does(cheems.rewards.verl_custom.__file__)({"url": served["encoder"], "timeout": 30})
    got = [verl_call(fn, {"question": p, "index": i}, c) for i, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS))]
    assert close(got, own_scores(encoder_rm, list(zip(PROMPTS, COMPLETIONS))))
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPTS[0]}]
    fn = load_as_verl_does(cheems.rewards.verl_custom.__file__)({"url": served["encoder"], "prompt_key": "chat"})
    turns = [Message(role="system", content=SYSTEM), Message(role="user", content=PROMPTS[0])]
    want = own_scores(encoder_rm, [(turns, COMPLETIONS[0])])
    assert close([verl_call(fn, {"chat": messages})], want)
    assert close([verl_call(fn, {"chat": np.array(messages, dtype=object)})], want)  # as a parquet column gives it


# ------------------------------------------------------------------------------------------ a real GRPOTrainer


@pytest.mark.parametrize("form", ["plain", "conversational"])
def test_one_real_grpo_step_with_the_cheems_reward(form, encoder_rm, qwen2_tokenizer_dir, tmp_path):
    """TRL's GRPOTrainer, one step on the CPU with a tiny random Qwen2 policy, in either form: it calls the cheems
    reward with its own keywords and logs the rewards it returned (the model's own) under the function's name. The
    same folder given to TRL as an in-process RM (``reward_funcs="folder"``, plain form: an encoder has no chat
    template for the other) logs the concatenated text's rewards (:func:`trl_in_process`), not the model's."""
    pytest.importorskip("trl")
    policy = build_tiny_qwen2(tmp_path / "policy", qwen2_tokenizer_dir, causal_lm=True)
    reward = trl_reward(str(encoder_rm), dtype="fp32")
    seen: list[tuple[list, list]] = []

    def cheems_reward(prompts, completions, **kwargs):
        assert {"completion_ids", "trainer_state", "log_extra", "log_metric", "category"} <= set(kwargs)
        seen.append((list(prompts), list(completions)))
        return reward(prompts=prompts, completions=completions, **kwargs)

    plain = form == "plain"
    prompts = PROMPTS[:2] if plain else [[{"role": "user", "content": p}] for p in PROMPTS[:2]]
    funcs = [cheems_reward, str(encoder_rm)] if plain else [cheems_reward]
    trainer = grpo_step(policy, funcs, {"prompt": prompts, "category": ["历史"] * len(prompts)}, tmp_path)
    assert seen
    prompts, completions = seen[0]
    if not plain:  # TRL's conversational form: message lists, the completion one assistant turn
        assert all(len(c) == 1 and c[0]["role"] == "assistant" for c in completions)
        prompts, completions = [p[-1]["content"] for p in prompts], [c[0]["content"] for c in completions]
    logged = next(entry for entry in trainer.state.log_history if "rewards/cheems_reward/mean" in entry)
    own = own_scores(encoder_rm, list(zip(prompts, completions)))
    assert math.isclose(logged["rewards/cheems_reward/mean"], sum(own) / len(own), abs_tol=1e-4)
    if plain:
        fed_by_trl = trl_in_process(encoder_rm, prompts, completions)
        assert math.isclose(logged[f"rewards/{encoder_rm.name}/mean"], sum(fed_by_trl) / len(fed_by_trl), abs_tol=1e-4)
        assert not close(fed_by_trl, own)
