"""``cheems validate``'s pool tables (responses per model, prompts per category) and ``--plot``'s sunburst of the
categories, on hand-made pools, the demo bench and (when it is there) Chinese SimpleQA's 99 subcategories."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cheems.analysis.distribution import MIN_SUB_SHARE, OTHER, category_sunburst, grouped_subcategories
from cheems.data.dataset_stats import NO_MODEL, PoolCounts, pool_counts
from cheems.data.schema import Record
from fault_server import FakeJudgeServer
from helpers import assert_user_error, run_main, write_jsonl

DEMO = Path(__file__).resolve().parents[1] / "src" / "cheems" / "assets" / "demo" / "open.jsonl"
SIMPLEQA = Path(__file__).resolve().parents[1] / "../shared/data/chinese_simpleqa/chinese_simpleqa.jsonl"
PNG = b"\x89PNG\r\n\x1a\n"


def test_pool_counts_count_a_merged_response_for_each_of_its_models():
    a = Record.model_validate(
        {
            "id": "a",
            "input": "问",
            "category": ["数学", "代数"],
            "responses": [
                {"id": "x-0", "content": "同", "model": "org/x", "models": ["org/x", "y"], "merged": ["y-0"]},
                {"id": "y-1", "content": "异", "model": "y"},
                {"id": "h", "content": "人写的"},
            ],
        }
    )
    b = Record.model_validate(
        {"id": "b", "input": "问", "category": "数学", "responses": [{"id": "r", "content": "答"}]}
    )
    c = Record.model_validate({"id": "c", "input": "问", "responses": [{"id": "r", "content": "答", "model": "y"}]})
    total = PoolCounts()
    for record in (a, b, c):
        total += pool_counts(record)
    assert total.responses == Counter({"y": 3, NO_MODEL: 2, "org/x": 1})
    assert total.prompts == Counter({"y": 2, NO_MODEL: 2, "org/x": 1})
    assert total.categories == Counter({("数学", "代数"): 1, ("数学", ""): 1, ("未分类", ""): 1})
    assert total.category_responses == Counter({"数学": 4, "未分类": 1})
    assert total.main_categories() == Counter({"数学": 2, "未分类": 1})


def test_small_subcategories_join_one_other_slice_and_a_lone_small_one_keeps_its_name():
    small = max(1, int(MIN_SUB_SHARE * 1000) - 1)  # under the share in a pool of about 1000 prompts
    categories = {("写作", "诗歌"): 500, ("写作", "对联"): small, ("写作", "谜语"): small, ("写作", "祝福语"): small}
    categories |= {("数学", "代数"): 400, ("数学", "几何"): small, ("安全", ""): 100 - 4 * small}
    groups = grouped_subcategories(categories)
    assert [(main, n) for main, n, _ in groups] == [
        ("写作", 500 + 3 * small),
        ("数学", 400 + small),
        ("安全", 100 - 4 * small),
    ]
    assert groups[0][2] == [("诗歌", 500), (f"{OTHER}(3)", 3 * small)]
    assert groups[1][2] == [("代数", 400), ("几何", small)]  # alone: kept
    assert groups[2][2] == [("", 100 - 4 * small)]  # a one-level path: an unnamed slice


def test_generate_two_models_then_validate_shows_them_and_plots_the_categories(tmp_path, monkeypatch, capsys):
    rows = [{"id": f"q{k}", "input": f"问题{k}", "category": ["数学", f"子类{k % 2}"]} for k in range(3)]
    src = write_jsonl(tmp_path / "prompts.jsonl", rows)
    env = {"OPENAI_API_KEY": "test-key"}
    with FakeJudgeServer() as server:
        common = ["--base-url", server.url, "--cache", tmp_path / "gen.sqlite", "--no-progress"]
        steps = [(src, "pool1.jsonl", "org/alpha", "0"), ("pool1.jsonl", "pool2.jsonl", "beta", "0")]
        steps += [("pool2.jsonl", "pool3.jsonl", "gamma", "7"), ("pool3.jsonl", "pool4.jsonl", "beta", "0")]
        for source, out, model, seed in steps:
            args = [
                "generate",
                tmp_path / source,
                "-n",
                "2",
                "-o",
                tmp_path / out,
                "--gen-model",
                model,
                "--seed",
                seed,
            ]
            proc = run_main(*args, *common, monkeypatch=monkeypatch, capsys=capsys, env=env)
            assert proc.returncode == 0, proc.stderr
        assert server.total == 6 + 6 + 6  # the rerun of beta asked nothing
    pool3, pool4 = ((tmp_path / f"pool{k}.jsonl").read_text(encoding="utf-8") for k in (3, 4))
    assert pool4 == pool3  # a rerun of a model adds nothing
    first = json.loads(pool4.splitlines()[0])["responses"]
    # beta's samples (same seed as alpha on the fake server: the same texts) are stored on alpha's
    assert [(r["id"], r.get("models"), r.get("merged")) for r in first] == [
        ("alpha-0", ["org/alpha", "beta"], ["beta-0"]),
        ("alpha-1", ["org/alpha", "beta"], ["beta-1"]),
        ("gamma-0", None, None),
        ("gamma-1", None, None),
    ]
    plot = tmp_path / "out" / "categories.png"
    proc = run_main("validate", tmp_path / "pool4.jsonl", "--plot", plot, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    table = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line.strip()}
    assert table["org/alpha"] == ["6", "33.3%", "3"] and table["beta"] == ["6", "33.3%", "3"]
    assert table["gamma"] == ["6", "33.3%", "3"]
    assert table["数学"] == ["3", "100.0%", "12", "2"]  # prompts, share, responses, subcategories
    assert plot.read_bytes().startswith(PNG) and f"wrote {plot}" in proc.stdout


def test_plot_refuses_what_is_not_a_png_and_never_replaces_an_input(tmp_path, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "input": "问", "responses": [{"id": "r", "content": "答"}]}])
    before = src.read_bytes()
    bad = run_main("validate", src, "--plot", tmp_path / "c.svg", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(bad, "--plot", "PNG")
    same = run_main("validate", src, "--plot", src, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(same, "--plot")
    assert src.read_bytes() == before and list(tmp_path.iterdir()) == [src]


@pytest.mark.parametrize("bad", [{"models": "org/x"}, {"merged": [3]}])
def test_a_pool_s_models_or_merged_that_is_no_list_of_names_is_one_line(tmp_path, monkeypatch, capsys, bad):
    response = {"id": "x-0", "content": "答", "model": "org/x"} | bad
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "input": "问", "responses": [response]}])
    proc = run_main("validate", src, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"{src}:1", next(iter(bad)))


def test_validate_without_models_or_categories_prints_only_the_statistics(tmp_path, monkeypatch, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "input": "问", "responses": [{"id": "r", "content": "答"}]}])
    proc = run_main("validate", src, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "dataset statistics" in proc.stdout
    assert "per model" not in proc.stdout and "per category" not in proc.stdout


def test_the_demo_bench_plot_is_a_png(tmp_path):
    categories = Counter()
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        main, sub = json.loads(line)["category"]
        categories[main, sub] += 1
    assert all(len(subs) == 3 for _, _, subs in grouped_subcategories(categories))  # every slice readable as is
    assert category_sunburst(categories).startswith(PNG)


@pytest.mark.skipif(not SIMPLEQA.exists(), reason="the shared Chinese SimpleQA copy is not here")
def test_simpleqa_s_99_subcategories_group_into_readable_slices():
    categories = Counter()
    for line in SIMPLEQA.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        categories[row["primary_category"], row["secondary_category"]] += 1
    total = sum(categories.values())
    groups = grouped_subcategories(categories)
    slices = [(sub, n) for _, _, subs in groups for sub, n in subs]
    assert len(groups) == 6 and sum(n for _, n in slices) == total
    # named slices are wide enough for their labels but a lone small one; the rest is one 其他 per main category
    for _, _, subs in groups:
        assert sum(n < MIN_SUB_SHARE * total for sub, n in subs if not sub.startswith(OTHER)) <= 1
        assert sum(sub.startswith(OTHER) for sub, _ in subs) <= 1
    assert sum(sub.startswith(OTHER) for sub, _ in slices) >= 1  # 99 subcategories do not all fit
