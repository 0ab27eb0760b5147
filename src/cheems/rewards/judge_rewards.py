"""Rewards for training a generative judge with RL: did the judge name the verdict the ranking implies?

The verdict of a reply is its final ``[[A]]``/``[[B]]``/``[[C]]`` tag outside reasoning
(:func:`cheems.judge.verdict.final_tag`); a reply with no tag is wrong. ``scheme``: ``"signed"`` gives +1 for a
right verdict and -1 for a wrong one, ``"binary"`` 1 and 0. The expected verdict is ``A``, ``B`` or ``C`` (or
the tag itself, ``[[A]]``, as the assistant turn of a ``cheems export judge-sft`` row holds it).

The consistency variant (J1's): a judge is right on a pair only when it is right in both orders. Each row
carries ``pair`` (one key shared by the pair's two rows, the answers shown A-B and B-A) and ``order`` (which
of the two it is: any two values), and both orders' completions must reach the same call. Within a pair the
k-th completion of one order is matched with the k-th of the other (the rollouts of one prompt are
exchangeable, so any matching is as fair); both get the right reward when both are right, else the wrong one.

- TRL: ``GRPOTrainer(reward_funcs=[trl_verdict_reward()])``; the dataset's ``verdict`` column holds the
  expected verdict (``pair`` and ``order`` columns for ``consistency=True``).
- verl: ``custom_reward_function.path`` = this file with ``name=verdict_score`` (verl's per-sample signature,
  ``ground_truth`` = the expected verdict), or ``name=verdict_scores`` under ``reward_model.reward_manager=batch``
  for the consistency variant (``extra_info`` holds ``pair`` and ``order``). Options come from ``reward_kwargs``.

verl loads this file by path as a module of its own, so it imports only absolute ``cheems`` names.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from cheems.errors import InputError
from cheems.judge.verdict import final_tag
from cheems.rewards.rl_inputs import score_items

SCHEMES: dict[str, tuple[float, float]] = {"signed": (1.0, -1.0), "binary": (1.0, 0.0)}
"""Reward scheme -> (reward of a right verdict, reward of a wrong or missing one)."""

LABELS = ("A", "B", "C")

BATCH_HINT = (
    "both orders of a pair must be in one call: with TRL keep each pair's two rows adjacent (shuffle the pairs "
    "beforehand), set shuffle_dataset=False and make per_device_train_batch_size × steps_per_generation a multiple "
    "of 2 × num_generations; with verl keep them adjacent, set data.shuffle=False and an even data.train_batch_size"
)


def scheme_values(scheme: str) -> tuple[float, float]:
    """(right, wrong) rewards of ``scheme``; InputError naming the schemes for another value."""
    if scheme not in SCHEMES:
        raise InputError(f"unknown reward scheme {scheme!r}", field="scheme", hint=f"one of: {', '.join(SCHEMES)}")
    return SCHEMES[scheme]


def expected_label(value: Any, where: str) -> str:
    """The expected verdict ``A``, ``B`` or ``C`` (given bare or as its tag ``[[A]]``); InputError naming ``where``."""
    text = value.strip() if isinstance(value, str) else ""
    if text.startswith("[[") and text.endswith("]]"):
        text = text[2:-2]
    if text not in LABELS:
        raise InputError(
            f"the expected verdict {value!r} is none of A, B, C", field=where, hint="write A, B or C (or [[A]]...)"
        )
    return text


def _key(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else repr(value)


def both_orders_right(right: Sequence[bool], pairs: Sequence[Any], orders: Sequence[Any]) -> list[bool]:
    """Each completion's ``right``, made True only where it and its match in the pair's other order are right.

    InputError for a pair whose two orders are not both in the call, or not with as many completions each."""
    groups: dict[Hashable, dict[Hashable, list[int]]] = {}
    for i, (pair, order) in enumerate(zip(pairs, orders, strict=True)):
        groups.setdefault(_key(pair), {}).setdefault(_key(order), []).append(i)
    out = list(right)
    for pair, by_order in groups.items():
        if len(by_order) != 2:
            raise InputError(
                f"pair {pair!r} comes in {len(by_order)} order(s) in this call, not 2", field="pair", hint=BATCH_HINT
            )
        first, second = by_order.values()
        if len(first) != len(second):
            raise InputError(
                f"pair {pair!r} has {len(first)} and {len(second)} completions in its two orders",
                field="pair",
                hint=BATCH_HINT,
            )
        for i, j in zip(first, second):
            out[i] = out[j] = right[i] and right[j]
    return out


def verdict_rewards(
    replies: Sequence[str | None],
    expected: Sequence[Any],
    *,
    scheme: str = "signed",
    pairs: Sequence[Any] | None = None,
    orders: Sequence[Any] | None = None,
) -> list[float]:
    """One reward per reply: right when its final tag is the expected verdict (both orders right, given ``pairs``
    and ``orders``). InputError for a bad scheme or expected verdict, or a pair not whole in the call."""
    right_value, wrong_value = scheme_values(scheme)
    if (pairs is None) != (orders is None):
        raise InputError("a pair's key and its order go together", field="orders" if orders is None else "pairs")
    labels = [expected_label(value, f"expected[{i}]") for i, value in enumerate(expected)]
    right = [final_tag(reply) == label for reply, label in zip(replies, labels, strict=True)]
    if pairs is not None and orders is not None:
        right = both_orders_right(right, pairs, orders)
    return [right_value if r else wrong_value for r in right]


# ---------------------------------------------------------------------------------------------------------- TRL


class VerdictReward:
    """``reward(prompts=..., completions=..., **columns) -> list[float]``, as TRL's GRPO calls a reward function.

    The expected verdicts come from the dataset column ``label_column`` (and, with ``consistency``, the pair's key
    and the order from ``pair_column`` and ``order_column``); TRL's other keywords are accepted and unused.
    """

    __name__: str

    def __init__(
        self, *, scheme: str, consistency: bool, label_column: str, pair_column: str, order_column: str, name: str
    ) -> None:
        scheme_values(scheme)  # a bad scheme fails when the function is made, not at the first step
        self.scheme, self.consistency = scheme, consistency
        self.label_column, self.pair_column, self.order_column = label_column, pair_column, order_column
        self.__name__ = name

    def __repr__(self) -> str:
        return f"VerdictReward(scheme={self.scheme!r}, consistency={self.consistency}, name={self.__name__!r})"

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
        """One reward per completion, in order: plain (strings) or conversational (message lists) forms alike."""
        replies = [reply for _, reply in score_items(prompts, completions)]
        expected = _column(columns, self.label_column, len(replies))
        if not self.consistency:
            return verdict_rewards(replies, expected, scheme=self.scheme)
        pairs = _column(columns, self.pair_column, len(replies))
        orders = _column(columns, self.order_column, len(replies))
        return verdict_rewards(replies, expected, scheme=self.scheme, pairs=pairs, orders=orders)


def _column(columns: Mapping[str, Any], name: str, n: int) -> Sequence[Any]:
    """The dataset column ``name`` TRL passed, one value per completion; InputError naming it when absent."""
    values = columns.get(name)
    if values is None:
        raise InputError(
            f"no '{name}' column among the reward function's keywords (has: {', '.join(sorted(columns)) or 'none'})",
            field=name,
            hint=f"add a '{name}' column to the dataset (the expected verdict, A, B or C; pair and order for "
            "consistency=True), or name the column that holds it",
        )
    if len(values) != n:
        raise InputError(f"{len(values)} values in column '{name}' for {n} completions", field=name)
    return list(values)


def trl_verdict_reward(
    *,
    scheme: str = "signed",
    consistency: bool = False,
    label_column: str = "verdict",
    pair_column: str = "pair",
    order_column: str = "order",
    name: str | None = None,
) -> VerdictReward:
    """A TRL GRPO reward function for a judge being trained: ``GRPOTrainer(reward_funcs=[trl_verdict_reward()])``.

    Rewards each completion by its final ``[[A]]``/``[[B]]``/``[[C]]`` tag against the dataset's ``label_column``
    (``scheme``: ``"signed"`` +1/-1, ``"binary"`` 1/0; no tag is wrong). ``consistency``: right only when right in
    both orders, the pair's two rows told by ``pair_column`` and ``order_column`` (see the module docstring for how
    both orders reach one call). ``name`` (what TRL logs the rewards under): default ``cheems_verdict`` or
    ``cheems_verdict_consistency``. InputError for an unknown scheme.
    """
    return VerdictReward(
        scheme=scheme,
        consistency=consistency,
        label_column=label_column,
        pair_column=pair_column,
        order_column=order_column,
        name=name or ("cheems_verdict_consistency" if consistency else "cheems_verdict"),
    )


# --------------------------------------------------------------------------------------------------------- verl


def verdict_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    scheme: str = "signed",
    **kwargs: Any,
) -> float:
    """verl's per-sample custom reward: ``solution_str``'s final tag against ``ground_truth`` (the expected verdict).

    ``scheme`` comes from ``reward_kwargs``; ``data_source``, ``extra_info`` and verl's other keywords are unused."""
    return verdict_rewards([solution_str], [ground_truth], scheme=scheme)[0]


def verdict_scores(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    *,
    scheme: str = "signed",
    consistency: bool = True,
    pair_key: str = "pair",
    order_key: str = "order",
    **kwargs: Any,
) -> list[float]:
    """verl's batch custom reward (``reward_model.reward_manager=batch``): the consistency variant by default, the
    pair's key and order at ``extra_info[pair_key]`` and ``extra_info[order_key]`` of each row."""
    if not consistency:
        return verdict_rewards(solution_strs, ground_truths, scheme=scheme)
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    pairs = [_info(info, pair_key, i) for i, info in enumerate(infos)]
    orders = [_info(info, order_key, i) for i, info in enumerate(infos)]
    return verdict_rewards(solution_strs, ground_truths, scheme=scheme, pairs=pairs, orders=orders)


def _info(info: Mapping[str, Any] | None, key: str, i: int) -> Any:
    if not isinstance(info, Mapping) or info.get(key) is None:
        raise InputError(
            f"no '{key}' in extra_info of row {i}",
            field=f"extra_infos[{i}]",
            hint=f"store the pair's key and order in each row's extra_info ('{key}') when preprocessing",
        )
    return info[key]
