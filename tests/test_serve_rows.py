"""What ``cheems serve``'s scoring thread does with a batch of samples (``score_samples``): each input is tokenised
once, and the token counts it reports and the features the model reads come from that one encoding; the rewards
are those of ``cheems score`` (and ``score_texts``), bit for bit (issue 34)."""

from __future__ import annotations

from typing import Any

import pytest

from cheems.models import load_scorer
from cheems.serve.reward_rows import Sample, Scored, TooLong, score_samples
from tiny_models import build_tiny_bert, build_tiny_qwen2

PAIRS = [
    ("用一句话介绍长城。", "长城是中国古代的军事防御工程。"),
    ("1+1 等于几？", "等于 2。"),
    ("很长的问题" * 40, "回答。"),
]
TEXTS = ["中国的首都是北京。", "你好"]


class CountingTokenizer:
    """The model's real tokenizer, counting the texts it is asked to tokenise (everything else passes through)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.texts: list[str] = []

    def __call__(self, text: Any, *args: Any, **kwargs: Any) -> Any:
        self.texts.extend([text] if isinstance(text, str) else text)
        return self.tokenizer(text, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)


@pytest.fixture(scope="module", params=["bert", "qwen2"])
def rm(request, tmp_path_factory, qwen2_tokenizer_dir):
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "bert":
        return request.param, build_tiny_bert(folder, seed=3)
    return request.param, build_tiny_qwen2(folder, qwen2_tokenizer_dir, seed=3)


def test_each_input_is_tokenised_once_and_scores_as_cheems_score(rm):
    kind, folder = rm
    want_pairs = load_scorer(str(folder), dtype="fp32", device="cpu", max_length=64).score(PAIRS)
    scorer = load_scorer(str(folder), dtype="fp32", device="cpu", max_length=64)
    want_texts = scorer.score_texts(TEXTS)
    counting = CountingTokenizer(scorer.encoder.tokenizer)
    scorer.encoder.tokenizer = counting
    samples = [Sample(p, r) for p, r in PAIRS] + [Sample(None, t) for t in TEXTS]

    results = score_samples(scorer, samples, refuse_long=False)

    # a text pair tokenises its prompt and its response, a chat model the one text its template writes
    per_pair = 2 if kind == "bert" else 1
    assert len(counting.texts) == per_pair * len(PAIRS) + len(TEXTS), counting.texts
    assert all(isinstance(r, Scored) for r in results)
    scored = [r for r in results if isinstance(r, Scored)]
    assert [s.reward for s in scored] == want_pairs + want_texts  # bit for bit
    assert [s.truncated for s in scored] == [False, False, True, False, False]
    assert scored[2].tokens == 64


def test_a_refused_input_is_tokenised_once_and_not_scored(rm):
    kind, folder = rm
    scorer = load_scorer(str(folder), dtype="fp32", device="cpu", max_length=64)
    want = scorer.score(PAIRS[:2])
    counting = CountingTokenizer(scorer.encoder.tokenizer)
    scorer.encoder.tokenizer = counting

    results = score_samples(scorer, [Sample(p, r) for p, r in PAIRS], refuse_long=True)

    assert len(counting.texts) == (2 if kind == "bert" else 1) * len(PAIRS)
    assert isinstance(results[2], TooLong) and "over this server's limit of 64" in str(results[2])
    assert [r.reward for r in results[:2] if isinstance(r, Scored)] == want
