"""Verdict rewards for training a generative judge with RL (issue 34): the final ``[[A]]``/``[[B]]``/``[[C]]`` tag
outside reasoning against the expected verdict, +1/-1 or 1/0, a reply with no tag wrong, and the both-orders
consistency variant; called exactly as TRL's GRPO and verl's reward managers call them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cheems.rewards.judge_rewards
from cheems.errors import InputError
from cheems.judge.verdict import final_tag, parse_verdict
from cheems.rewards import trl_verdict_reward, verdict_score, verdict_scores
from cheems.rewards.judge_rewards import verdict_rewards
from helpers import grpo_step, load_as_verl_does, trl_keywords
from tiny_models import build_tiny_qwen2

# reply, expected verdict, reward under "signed", under "binary"
TABLE = [
    ("[[A]]", "A", 1.0, 1.0),  # clear A
    ("回答A有事实错误，回答B更准确。\n\n[[B]]", "B", 1.0, 1.0),  # clear B after reasons naming A
    ("两个回答质量相当。[[C]]", "C", 1.0, 1.0),  # a tie
    ("[[B]]", "A", -1.0, 0.0),  # clear, and wrong
    ("[[C]]", "A", -1.0, 0.0),  # a tie where the ranking has a winner
    ("我认为回答A更好。", "A", -1.0, 0.0),  # right in words, but no tag: no verdict
    ("A", "A", -1.0, 0.0),  # the bare letter is no tag either
    ("[[A]] 不对，再想想：[[B]]", "B", 1.0, 1.0),  # both tags: the final one counts
    ("[[A]] 不对，再想想：[[B]]", "A", -1.0, 0.0),
    ("", "A", -1.0, 0.0),  # none
    (None, "A", -1.0, 0.0),
    ("<think>显然是[[A]]</think>", "A", -1.0, 0.0),  # a tag inside reasoning is never the verdict
    ("<think>先看回答A……[[A]]？不对。</think>\n[[B]]", "B", 1.0, 1.0),
    ("<think>想了很久 [[A]]", "A", -1.0, 0.0),  # cut off mid-reasoning
    ("分析……</think>[[A]]", "A", 1.0, 1.0),  # the opening tag was in the prompt
    ("［［Ａ］］", "A", 1.0, 1.0),  # full-width brackets and letter: the same tag after NFKC, as the judge reads it
    ("【【A】】", "A", -1.0, 0.0),  # other brackets: no tag
    ("[[a]]", "A", -1.0, 0.0),
    ("[[ A ]]", "A", -1.0, 0.0),
    ("[[D]]", "A", -1.0, 0.0),
    ("[[B]]", "[[B]]", 1.0, 1.0),  # the expected verdict may be given as its tag (a judge-sft assistant turn)
]


@pytest.mark.parametrize(("reply", "expected", "signed", "binary"), TABLE)
def test_the_final_tag_against_the_expected_verdict_in_both_schemes(reply, expected, signed, binary):
    trl_signed, trl_binary = trl_verdict_reward(), trl_verdict_reward(scheme="binary")
    columns = {**trl_keywords(1), "verdict": [expected]}
    assert trl_signed(prompts=["问题"], completions=[reply or ""], **columns) == [signed]
    assert trl_binary(prompts=["问题"], completions=[reply or ""], **columns) == [binary]
    assert verdict_score("judge", reply, expected) == signed
    assert verdict_score("judge", reply, expected, scheme="binary") == binary


def test_the_rl_rule_differs_from_the_judges_on_purpose():
    """``parse_verdict`` reads words and refuses a reply that changes its mind; the RL reward reads the tag only and
    takes the last one, so a policy cannot be paid for a hedge nor for an untagged answer."""
    assert parse_verdict("[[A]] 不对，再想想：[[B]]").label is None  # refused (two labels)
    assert final_tag("[[A]] 不对，再想想：[[B]]") == "B"
    assert parse_verdict("我认为回答A更好。").label == "A"  # words the judge accepts; no tag, so no reward
    assert final_tag("我认为回答A更好。") is None


# ------------------------------------------------------------------------------------------------- both orders

PAIRS = [  # (reply in order AB, expected A; reply in order BA, expected B) -> both right?
    ("[[A]]", "[[B]]", True),  # right / right
    ("[[A]]", "[[A]]", False),  # right / wrong: a position bias
    ("[[B]]", "[[A]]", False),  # wrong / wrong
    ("[[A]]", "回答B更好", False),  # right / unparseable
]


@pytest.mark.parametrize(("ab", "ba", "both"), PAIRS)
@pytest.mark.parametrize("scheme", ["signed", "binary"])
def test_consistency_rewards_a_pair_only_when_right_in_both_orders(ab, ba, both, scheme):
    right, wrong = {"signed": (1.0, -1.0), "binary": (1.0, 0.0)}[scheme]
    reward = trl_verdict_reward(consistency=True, scheme=scheme)
    columns = {**trl_keywords(2), "verdict": ["A", "B"], "pair": ["p1", "p1"], "order": ["AB", "BA"]}
    want = [right, right] if both else [wrong, wrong]
    assert reward(prompts=["AB 顺序", "BA 顺序"], completions=[ab, ba], **columns) == want
    assert reward.__name__ == "cheems_verdict_consistency"


def test_a_batch_as_trl_hands_it_matches_the_kth_completion_of_each_order():
    """TRL's batch: each prompt row repeated num_generations times, a pair's two rows adjacent. Two pairs (one a
    tie, C in both orders) with two generations per order: completion k of one order meets completion k of the
    other; each pair's rewards are its own."""
    completions = ["[[A]]", "[[A]]", "[[B]]", "[[A]]", "[[C]]", "[[C]]", "[[C]]", "<think>[[C]]</think>"]
    prompts = [[{"role": "user", "content": f"第{i // 2}行"}] for i in range(8)]  # conversational form
    columns = {
        **trl_keywords(8),
        "verdict": ["A", "A", "B", "B", "C", "C", "C", "C"],
        "pair": [7, 7, 7, 7, 9, 9, 9, 9],
        "order": [0, 0, 1, 1, 0, 0, 1, 1],
    }
    conversational = [[{"role": "assistant", "content": c}] for c in completions]
    got = trl_verdict_reward(consistency=True)(prompts=prompts, completions=conversational, **columns)
    assert got == [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0]
    # without consistency each completion stands alone
    alone = trl_verdict_reward()(prompts=prompts, completions=conversational, **columns)
    assert alone == [1.0, 1.0, 1.0, -1.0, 1.0, 1.0, 1.0, -1.0]


def test_a_pair_not_whole_in_the_call_or_a_missing_column_is_one_clear_error():
    reward = trl_verdict_reward(consistency=True)
    base = {**trl_keywords(2), "verdict": ["A", "B"]}
    with pytest.raises(InputError, match="pair 'p1' comes in 1 order") as e:
        reward(prompts=["x", "y"], completions=["[[A]]", "[[B]]"], **base, pair=["p1", "p1"], order=["AB", "AB"])
    assert "shuffle_dataset=False" in (e.value.hint or "")
    with pytest.raises(InputError, match="has 2 and 1 completions"):
        reward(
            prompts=["x"] * 3, completions=["[[A]]"] * 3, **{**trl_keywords(3), "verdict": ["A"] * 3},
            pair=["p"] * 3, order=[0, 0, 1],
        )  # fmt: skip
    with pytest.raises(InputError, match="no 'pair' column") as e:
        reward(prompts=["x", "y"], completions=["[[A]]", "[[B]]"], **base)
    assert e.value.field == "pair"
    with pytest.raises(InputError, match=r"no 'verdict' column .*category") as e:
        trl_verdict_reward()(prompts=["x"], completions=["[[A]]"], **trl_keywords(1))
    assert e.value.field == "verdict"
    with pytest.raises(InputError, match="'D' is none of A, B, C") as e:
        trl_verdict_reward()(prompts=["x"], completions=["[[A]]"], verdict=["D"])
    assert e.value.field == "expected[0]"
    with pytest.raises(InputError, match="unknown reward scheme 'pm1'") as e:
        trl_verdict_reward(scheme="pm1")
    assert "signed, binary" in (e.value.hint or "")
    with pytest.raises(InputError, match="a pair's key and its order go together") as e:
        verdict_rewards(["[[A]]"], ["A"], pairs=["p"])
    assert e.value.field == "orders"
    assert trl_verdict_reward(label_column="label")(prompts=["x"], completions=["[[A]]"], label=["A"]) == [1.0]


# -------------------------------------------------------------------------------------------------------- verl


def test_verl_loads_the_file_by_path_and_calls_the_per_sample_function():
    """The naive reward manager's call: keywords, the router keywords it adds, ``reward_kwargs`` merged in."""
    configured = load_as_verl_does(cheems.rewards.judge_rewards.__file__, "verdict_score")
    for kwargs, wrong in (({}, -1.0), ({"scheme": "binary"}, 0.0)):
        fn = configured(kwargs)
        for reply, expected, right in (("[[B]]", "B", True), ("[[B]]", "A", False), ("没有标签", "A", False)):
            got = fn(
                data_source="cheems/judge",
                solution_str=reply,
                ground_truth=expected,
                extra_info={"index": 0, "pair": "p1", "order": "AB"},
                reward_router_address=None,
                reward_model_tokenizer=None,
            )
            assert got == (1.0 if right else wrong)


def test_verl_batch_manager_gets_the_consistency_variant_from_extra_info():
    """The batch reward manager's call: numpy arrays of the batch's columns, extra_info dicts carrying the pair."""
    fn = load_as_verl_does(cheems.rewards.judge_rewards.__file__, "verdict_scores")({"scheme": "binary"})
    infos = np.array([{"pair": "p1", "order": "AB"}, {"pair": "p1", "order": "BA"}] * 2, dtype=object)
    replies = ["[[A]]", "[[B]]", "[[A]]", "[[A]]"]  # rollout 1 right in both orders; rollout 2 biased to A
    got = fn(
        data_sources=np.array(["cheems/judge"] * 4, dtype=object),
        solution_strs=replies,
        ground_truths=["A", "B", "A", "B"],
        extra_infos=infos,
    )
    assert got == [1.0, 1.0, 0.0, 0.0]
    plain = verdict_scores(["d"] * 4, replies, ["A", "B", "A", "B"], infos, consistency=False)
    assert plain == [1.0, 1.0, 1.0, -1.0]
    with pytest.raises(InputError, match="no 'pair' in extra_info of row 1") as e:
        verdict_scores(["d"] * 2, ["[[A]]", "[[B]]"], ["A", "B"], [{"pair": 1, "order": 0}, {"order": 1}])
    assert e.value.field == "extra_infos[1]"


# ------------------------------------------------------------------------------------------ a real GRPOTrainer


def test_one_real_grpo_step_with_the_verdict_rewards(qwen2_tokenizer_dir, tmp_path):
    """TRL's GRPOTrainer, one step on the CPU with a tiny random Qwen2 policy and a pair's two orders as adjacent
    rows (``shuffle_dataset=False``, 2 orders × 2 generations per process): both orders reach one call of the
    consistency reward with their columns, and TRL logs what the functions return under their names."""
    pytest.importorskip("trl")
    policy = build_tiny_qwen2(tmp_path / "policy", qwen2_tokenizer_dir, causal_lm=True)
    consistency = trl_verdict_reward(consistency=True, scheme="binary")
    seen: list[tuple[list, dict]] = []

    def cheems_verdict_consistency(prompts, completions, **kwargs):
        assert {"completion_ids", "trainer_state", "log_extra", "log_metric"} <= set(kwargs)
        seen.append((list(completions), {k: list(kwargs[k]) for k in ("verdict", "pair", "order")}))
        return consistency(prompts=prompts, completions=completions, **kwargs)

    columns = {
        "prompt": ["问题：1+1=?\n回答A：2\n回答B：3", "问题：1+1=?\n回答A：3\n回答B：2"],
        "verdict": ["A", "B"],
        "pair": ["p1", "p1"],
        "order": ["AB", "BA"],
    }
    trainer = grpo_step(
        policy,
        [cheems_verdict_consistency, trl_verdict_reward()],
        columns,
        tmp_path,
        num_generations=2,
        shuffle_dataset=False,
    )
    completions, kw = seen[0]
    assert kw == {"verdict": ["A", "A", "B", "B"], "pair": ["p1"] * 4, "order": ["AB", "AB", "BA", "BA"]}
    logged = next(entry for entry in trainer.state.log_history if "rewards/cheems_verdict/mean" in entry)
    plain = [verdict_score("judge", c, v) for c, v in zip(completions, kw["verdict"])]
    assert math.isclose(logged["rewards/cheems_verdict/mean"], sum(plain) / 4, abs_tol=1e-6)
    both = consistency(prompts=["p"] * 4, completions=completions, **kw)
    assert math.isclose(logged["rewards/cheems_verdict_consistency/mean"], sum(both) / 4, abs_tol=1e-6)
