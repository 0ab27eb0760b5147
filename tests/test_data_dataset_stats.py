"""Dataset statistics (the paper's Table 1 shape)."""

from __future__ import annotations

import pytest

from cheems.data.dataset_stats import DatasetStats, dataset_stats
from cheems.data.importers import import_file
from cheems.data.schema import Record


def test_hand_computed_example():
    with_comparisons = Record.model_validate(
        {
            "input": [
                {"role": "user", "content": "abc"},
                {"role": "assistant", "content": "de"},
                {"role": "user", "content": "f"},
            ],
            "responses": [{"id": "x", "content": "1234"}, {"id": "y", "content": "12"}, {"id": "z", "content": "1"}],
            "comparisons": [
                {"a": "x", "b": "y", "label": "a"},
                {"a": "y", "b": "z", "label": "tie"},
                {"a": "x", "b": "z", "label": "b"},
            ],
            "rank": {"x": 1, "y": 1, "z": 1},  # ignored: the record has non-tie comparisons
        }
    )
    ranked_only = Record.model_validate(
        {
            "input": "问题",
            "responses": [
                {"id": "r1", "content": "aaaaaa"},
                {"id": "r2", "content": "bb"},
                {"id": "r3", "content": "cc"},
            ],
            "comparisons": [{"a": "r2", "b": "r3", "label": "tie"}],  # ties only -> the rank's pairs count
            "rank": {"r1": 1, "r2": 2, "r3": 2},
        }
    )
    s = dataset_stats([with_comparisons, ranked_only])
    # pairs: x>y (4,2), z>x (1,4), r1>r2 (6,2), r1>r3 (6,2)
    assert s == DatasetStats(
        prompts=2,
        responses=6,
        responses_per_prompt=3.0,
        comparisons=4,
        avg_prompt_chars=(6 + 2) / 2,
        avg_chosen_chars=(4 + 1 + 6 + 6) / 4,
        avg_rejected_chars=(2 + 4 + 2 + 2) / 4,
    )
    assert s.to_dict()["comparisons"] == 4 and set(s.to_dict()) == {
        "prompts",
        "responses",
        "responses_per_prompt",
        "comparisons",
        "avg_prompt_chars",
        "avg_chosen_chars",
        "avg_rejected_chars",
    }


def test_empty_and_no_pairs():
    assert dataset_stats([]).to_dict() == {
        "prompts": 0,
        "responses": 0,
        "responses_per_prompt": 0.0,
        "comparisons": 0,
        "avg_prompt_chars": 0.0,
        "avg_chosen_chars": 0.0,
        "avg_rejected_chars": 0.0,
    }
    lone = Record.model_validate({"input": "问", "responses": [{"id": "a", "content": "x"}]})
    s = dataset_stats([lone])
    assert (s.prompts, s.responses, s.comparisons, s.avg_chosen_chars) == (1, 1, 0, 0.0)


def test_oasst1_numbers(shared_data):
    # PROVENANCE.md's 775 prompts, 1993 responses and 1809 pairs, less the 6 copies that 6 prompts rank below their
    # own text (and the 11 pairs they made: the copy above itself, and the kept text's pairs made again)
    recs = import_file(shared_data("oasst1_zh") / "oaast_rm_zh.json", "ranked").records
    s = dataset_stats(recs)
    assert (s.prompts, s.responses, s.comparisons) == (775, 1987, 1798)
    assert s.responses_per_prompt == pytest.approx(1987 / 775)
    # Without those 6 prompts (skip_invalid before issue 31) these were checked against a direct computation on
    # the raw JSON (history turns counted in the prompt): 176.6294, 316.5866, 170.1737.
    assert s.avg_prompt_chars == pytest.approx(176.1316, abs=1e-3)
    assert s.avg_chosen_chars == pytest.approx(315.6974, abs=1e-3)
    assert s.avg_rejected_chars == pytest.approx(169.4494, abs=1e-3)


def test_jade_hard_numbers(shared_data):
    s = dataset_stats(import_file(shared_data("jade_safety_zh") / "jade_alignment_hard_zh.csv").records)
    assert (s.prompts, s.responses, s.comparisons) == (150, 300, 150)
    assert s.avg_prompt_chars == pytest.approx(32.54)
    assert s.avg_chosen_chars > s.avg_rejected_chars  # safe answers explain their refusal
