"""RM-Bench, RMB, RewardBench 2 and JudgeBench: importers, metrics and ``cheems eval --metric``.

The fixtures under tests/data are small files written by hand in each benchmark's public layout. Their
responses have chosen lengths, and the scorer is the length baseline (score = characters), so every
number below is worked out by hand from the lengths (``test_fixture_lengths`` pins them):

RM-Bench (styles concise / detailed plain / detailed markdown; M[i][j] = chosen style i beats rejected style j)
- chat 8: chosen 4 10 16, rejected 3 9 15 -> [[1,0,0],[1,1,0],[1,1,1]]
- chat 9: chosen 5 11 17, rejected 5 12 18 -> [[0,0,0],[1,0,0],[1,1,0]] (5 vs 5 is a tie: wrong)
- safety-refuse 8: chosen 6 12 20, rejected 2 13 19 -> [[1,0,0],[1,0,0],[1,1,1]]
chat = [[.5,0,0],[1,.5,0],[1,1,.5]]: hard 0, normal 1/2, easy 1, accuracy 1/2;
safety: hard 0, normal 2/3, easy 1, accuracy 5/9; the file: hard 0, normal 7/12, easy 1, accuracy 19/36.

RMB pairwise: Helpfulness 20>10 right, 10=10 wrong; Harmlessness 30>8 right -> categories 1/2 and 1,
mean 3/4, pooled 2/3. RMB best-of-N: best 25 vs losers 10 30 5 (wrong, 2 of 3 pairs right), best 40 vs
39 1 (right) -> bon 1/2; pairwise 4/5.

RewardBench 2 (correct vs incorrect): Factuality 30 vs 10 20 29 right, 20 vs 20 5 1 wrong (tie at the
top); Math 15 vs 3 4 5 right; Ties 12 14 vs 11 2 right -> bon: categories 1/2, 1, 1, mean 5/6, pooled 3/4;
pairwise: Factuality 5/6, Math 1, Ties 1 -> mean 17/18, pooled 12/13.

JudgeBench (A vs B, label names the better): mmlu-pro-law 20>10 A>B right; livebench-math 15 vs 7 B>A
wrong; livebench-reasoning 5 vs 9 B>A right; mmlu-pro-biology 12 vs 11 A>B right -> categories
livebench-math 0, livebench-reasoning 1, mmlu-pro 1; mean 2/3, pooled 3/4.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cheems.analysis.leaderboard import read_eval_json
from cheems.data.importers import FORMATS, import_file
from cheems.errors import InputError
from cheems.evaluate import evaluate_scores, load_bench, score
from cheems.evaluate.benchmark_report import benchmark_report
from cheems.metrics.metric_registry import pair_right
from cheems.metrics.outcomes import PairOutcome, ShownVerdict
from cheems.models import load_scorer
from fault_server import ANSWER, FakeJudgeServer
from helpers import assert_user_error, run_main

DATA = Path(__file__).parent / "data"
RMBENCH, RMB = DATA / "rmbench", DATA / "rmb"
RB2, JUDGEBENCH = DATA / "rewardbench2.jsonl", DATA / "judgebench.jsonl"


def records_by_id(path: Path, fmt: str) -> dict:
    return {r.id: r for r in import_file(path, fmt).records}


def lengths(record, ids=None) -> list[int]:
    return [len(r.content) for r in record.responses if ids is None or r.id in ids]


# ---------------------------------------------------------------- importers


def test_fixture_lengths():
    """The lengths the hand computations above start from."""
    rm = records_by_id(RMBENCH, "rmbench")
    assert [lengths(rm[k]) for k in ("chat-8", "chat-9", "safety-refuse-8")] == [
        [4, 10, 16, 3, 9, 15],
        [5, 11, 17, 5, 12, 18],
        [6, 12, 20, 2, 13, 19],
    ]
    rmb = records_by_id(RMB, "rmb")
    assert {k: lengths(r) for k, r in rmb.items()} == {
        "bon-101": [25, 10, 30, 5],
        "bon-102": [40, 39, 1],
        "pair-201": [30, 8],
        "pair-101": [20, 10],
        "pair-102": [10, 10],
    }
    rb2 = records_by_id(RB2, "rewardbench2")
    assert {k: lengths(r) for k, r in rb2.items()} == {
        "1": [30, 10, 20, 29],
        "2": [20, 20, 5, 1],
        "3": [15, 3, 4, 5],
        "tied:4": [12, 14, 11, 2],
    }
    jb = records_by_id(JUDGEBENCH, "judgebench")
    assert {k: lengths(r) for k, r in jb.items()} == {"u1": [20, 10], "u2": [15, 7], "u3": [5, 9], "u4": [12, 11]}


def test_rmbench_import_a_folder_of_domain_files():
    rm = records_by_id(RMBENCH, "rmbench")
    assert list(rm) == ["chat-8", "chat-9", "safety-refuse-8"]  # the same upstream id in two domains stays apart
    record = rm["safety-refuse-8"]
    assert record.input == "How do I pick a lock?" and record.category == ["safety", "safety-refuse"]
    assert rm["chat-8"].category == ["chat"]
    assert [(r.id, r.style) for r in record.responses] == [
        ("chosen-concise", "concise"),
        ("chosen-detailed_plain", "detailed_plain"),
        ("chosen-detailed_markdown", "detailed_markdown"),
        ("rejected-concise", "concise"),
        ("rejected-detailed_plain", "detailed_plain"),
        ("rejected-detailed_markdown", "detailed_markdown"),
    ]
    assert record.rank == {r.id: 1 if r.id.startswith("chosen") else 2 for r in record.responses}
    assert len(record.ranked_pairs()) == 9


def test_rmbench_folder_holding_total_dataset_reads_it_alone(tmp_path):
    """Upstream's data/ holds total_dataset.json beside the per-domain files it joins: every prompt twice."""
    rows = []
    for name in ("chat_filtered.json", "safety-refuse_filtered.json"):
        (tmp_path / name).write_bytes((RMBENCH / name).read_bytes())
        domain = name.removesuffix("_filtered.json")
        rows += [row | {"domain": domain} for row in json.loads((RMBENCH / name).read_text(encoding="utf-8"))]
    (tmp_path / "total_dataset.json").write_text(json.dumps(rows), encoding="utf-8")
    assert [r.id for r in import_file(tmp_path, "rmbench").records] == ["chat-8", "chat-9", "safety-refuse-8"]


def test_rmbench_total_dataset_row_names_its_domain(tmp_path):
    path = tmp_path / "total_dataset.json"
    row = json.loads((RMBENCH / "chat_filtered.json").read_text(encoding="utf-8"))[0] | {"domain": "math"}
    path.write_text(json.dumps([row]), encoding="utf-8")
    (record,) = import_file(path, "rmbench").records
    assert record.id == "math-8" and record.category == ["math"]


def test_rmbench_file_named_after_no_domain_is_refused(tmp_path):
    """A file's name is a domain only when it is one of RM-Bench's: my_data.json does not make a domain."""
    path = tmp_path / "my_data.json"
    path.write_text((RMBENCH / "chat_filtered.json").read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_file(path, "rmbench")
    assert str(caught.value).startswith(
        f"{path}:2: field 'domain': 'my_data' (from the file name my_data.json) is not an RM-Bench domain — use chat, "
        "math, code, safety or one of them with a suffix (safety-refuse)"
    )


def test_rmb_pairwise_and_best_of_n_rows():
    rmb = records_by_id(RMB, "rmb")
    pair = rmb["pair-201"]
    assert [m.role for m in pair.input] == ["user", "assistant", "user"]  # a multi-turn conversation_input
    assert pair.category == ["Harmlessness", "S1"]
    assert [(r.id, r.model) for r in pair.responses] == [
        ("chosen", "Llama-2-7b-chat-hf"),
        ("rejected", "vicuna-7b-v1.5"),
    ]
    assert pair.rank == {"chosen": 1, "rejected": 2}
    assert rmb["pair-101"].input == "What is your opinion on GPT-3.5?"  # one user turn is plain text
    bon = rmb["bon-101"]
    assert bon.category == ["Helpfulness", "Chat", "Discussion"]
    assert bon.rank == {"best": 1, "loser-1": 2, "loser-2": 2, "loser-3": 2}
    assert [r.model for r in bon.responses] == ["gemini-1.5-pro", "Llama-2-70b", "qwen2-7b", "mistral-7b"]


def test_rewardbench2_and_judgebench_rows():
    rb2 = records_by_id(RB2, "rewardbench2")
    assert rb2["1"].rank == {"chosen-1": 1, "rejected-1": 2, "rejected-2": 2, "rejected-3": 2}
    assert rb2["1"].category == ["Factuality"] and rb2["1"].responses[3].model == "model-3"
    assert rb2["tied:4"].rank == {"chosen-1": 1, "chosen-2": 1, "rejected-1": 2, "rejected-2": 2}
    jb = records_by_id(JUDGEBENCH, "judgebench")
    assert jb["u2"].rank == {"A": 2, "B": 1} and jb["u1"].rank == {"A": 1, "B": 2}
    assert jb["u1"].category == ["mmlu-pro", "mmlu-pro-law"] and jb["u2"].category == ["livebench-math"]
    assert jb["u1"].responses[0].model == "gpt-4o-2024-05-13"


@pytest.mark.parametrize(
    ("fmt", "name", "change", "expected"),
    [
        ("rmbench", "chat.json", {"chosen": ["a", "b"]}, "field 'chosen': must be a list of 3 strings"),
        ("rmbench", "chat.json", {"prompt": None}, "field 'prompt': is missing"),
        ("rmbench", "chat.json", {"domain": "chit-chat"}, "field 'domain': 'chit-chat' is not an RM-Bench domain"),
        ("rmb", "x.json", {"loser_list": []}, "field 'loser_list': must be a non-empty list"),
        ("rmb", "x.json", {"bon_best": "text"}, "field 'bon_best': must be an {llm_name, answer} object"),
        ("rmb", "x.json", {"conversation_input": []}, "field 'conversation_input': is empty"),
        (
            "rmb",
            "x.json",
            {"conversation_input": [{"role": "system", "content": ""}]},
            "field 'conversation_input': is empty",
        ),
        (
            "rmb",
            "x.json",
            {"conversation_input": [{"role": "tool", "content": "42"}]},
            "field 'conversation_input[0].role': unknown role 'tool' — use one of human, user, gpt, assistant, system",
        ),
        ("judgebench", "x.jsonl", {"label": "A=B"}, "field 'label': must be 'A>B' or 'B>A', got 'A=B'"),
        ("rewardbench2", "x.jsonl", {"id": "1"}, "field 'id': duplicate prompt id '1'"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path, fmt, name, change, expected):
    """Each bad row is one located error, or with skip_invalid one skipped and counted row (a pair of one text is
    no bad row of a benchmark: see test_benchmark_rows_of_one_text_are_kept_with_one_warning)."""
    source = {
        "rmbench": RMBENCH / "chat_filtered.json",
        "rmb": RMB / "BoN_set/Helpfulness/Chat/Discussion.json",
        "judgebench": JUDGEBENCH,
        "rewardbench2": RB2,
    }[fmt]
    rows = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines()] if name.endswith("l") else None
    rows = rows or json.loads(source.read_text(encoding="utf-8"))
    rows[1] = rows[1] | (change(rows[1]) if callable(change) else change)
    path = tmp_path / name
    text = "".join(json.dumps(r) + "\n" for r in rows) if name.endswith("l") else json.dumps(rows, indent=1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        import_file(path, fmt)
    line = 2 if name.endswith("l") else text.splitlines().index(" {", 2) + 1  # where the second item opens
    assert str(caught.value).startswith(f"{path}:{line}: {expected}")
    skipped = import_file(path, fmt, skip_invalid=True)
    assert len(skipped.records) == len(rows) - 1 and len(skipped.skipped) == 1


# ---------------------------------------------------------------- rows of one text: kept, as upstream scores them

SAME = "I'm sorry, but I can't help with that."
# One row of every benchmark whose better and worse responses are one text (two models gave one refusal).
ONE_TEXT_ROWS = {
    "rmbench": {"domain": "chat", "prompt": "p", "chosen": [SAME, "b", "c"], "rejected": [SAME, "y", "z"]},
    "rmb": {
        "conversation_input": [{"role": "user", "content": "p", "language": "English"}],
        "chosen": {"llm_name": "m1", "answer": SAME},
        "reject": {"llm_name": "m2", "answer": SAME},
        "category_path": "Pairwise_set/Harmlessness/S2",
    },
    "rewardbench2": {"prompt": "p", "chosen": [SAME], "rejected": [SAME, "b", "c"], "subset": "Safety"},
    "judgebench": {"question": "q", "response_model": "m", "response_A": SAME, "response_B": SAME, "label": "A>B"},
    "rewardbench": {"prompt": "p", "chosen": SAME, "rejected": SAME, "subset": "refusals-dangerous"},
    "ppe-preference": {"prompt": "p", "response_1": SAME, "response_2": SAME, "winner": "model_b"},
    "ppe-correctness": {
        "model_name": "m",
        "prompt": "p",
        "response_1": SAME,
        "response_2": SAME,
        "response_3": "c",
        "scores": [True, False, False],
    },
}
_ID_KEY = {"rmb": "pair_uid", "judgebench": "pair_id", "ppe-preference": "question_id"}
_ID_KEY["ppe-correctness"] = "question_id"


def test_every_benchmark_importer_is_covered():
    assert set(ONE_TEXT_ROWS) == set(FORMATS) - {"pairwise", "ranked", "ratings", "official"}


@pytest.mark.parametrize("fmt", sorted(ONE_TEXT_ROWS))
def test_benchmark_rows_of_one_text_are_kept_with_one_warning(tmp_path, fmt):
    """Upstream scores a row whose two texts are one (RMB: chosen > reject is false, the row stays in the
    denominator): every benchmark importer keeps it, no flag needed, and one warning gives the count."""
    row = ONE_TEXT_ROWS[fmt]
    worse = {"rmb": "reject", "judgebench": "response_B", "ppe-preference": "response_1"}.get(fmt, "rejected")
    worse = "response_2" if fmt == "ppe-correctness" else worse
    value = row[worse]
    other = ["x", *value[1:]] if isinstance(value, list) else "x"
    other = {**value, "answer": "x"} if isinstance(value, dict) else other
    distinct = row | {worse: other}
    key = _ID_KEY.get(fmt, "id")
    rows = [{key: str(i), **r} for i, r in enumerate([row, distinct, row], start=1)]
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = import_file(path, fmt)
    assert len(result.records) == 3 and not result.skipped
    assert [str(w) for w in result.warnings] == [
        f"{path}: 2 row(s) judge two identical texts: kept, as upstream scores them (a tie is not a win); "
        "the eval's 'degenerate' check counts them"
    ]


def write_rmb_release(root: Path) -> Path:
    """RMB_dataset/Pairwise_set as the release lays it out (a JSON array per scenario, indented), with the
    real release's case: Harmlessness/S2.json has a pair where two models gave the identical refusal."""
    pairs = root / "RMB_dataset" / "Pairwise_set"
    (pairs / "Helpfulness" / "Chat").mkdir(parents=True)
    shutil.copy(RMB / "Pairwise_set/Helpfulness/Chat/Discussion.json", pairs / "Helpfulness/Chat/Discussion.json")
    (pairs / "Harmlessness").mkdir()
    shutil.copy(RMB / "Pairwise_set/Harmlessness/S1.json", pairs / "Harmlessness/S1.json")
    refusal = {"pair_uid": "s2-1", **ONE_TEXT_ROWS["rmb"]}
    other = refusal | {"pair_uid": "s2-2", "reject": {"llm_name": "m2", "answer": "Sure."}}
    (pairs / "Harmlessness/S2.json").write_text(json.dumps([other, refusal], indent=4), encoding="utf-8")
    return pairs


def test_rmb_release_with_an_identical_refusal_imports_and_scores_as_upstream(tmp_path, monkeypatch, capsys):
    """``cheems import rmb RMB_dataset/Pairwise_set`` no longer stops at S2.json; the pair of one refusal is
    scored as RMB scores it (``chosen > reject``: a tie is wrong and counted), in strict and upstream rules alike,
    and the degenerate check counts it."""
    bench = tmp_path / "rmb.jsonl"
    proc = run_main("import", "rmb", write_rmb_release(tmp_path), "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("warning") == 1 and "1 row(s) judge two identical texts: kept" in proc.stderr
    got = {}
    for compat in ("strict", "upstream"):
        out = tmp_path / f"{compat}.json"
        args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "pairwise"]
        proc = run_main(*args, "--compat", compat, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        got[compat] = json.loads(out.read_text(encoding="utf-8"))
    for report in got.values():
        sub = report["subsets"]["rmb"]
        # 2 Helpfulness pairs (1 right), S1's pair (right), S2: "Sure." loses on length (right), the tie is wrong
        assert sub["n_pairs"] == 5 and sub["pooled_accuracy"] == pytest.approx(3 / 5)
        degenerate = next(c for c in report["checks"] if c["name"] == "degenerate")
        assert degenerate["value"]["identical_pairs"] == 1 and degenerate["level"] == "warning"
    assert got["strict"]["subsets"]["rmb"]["n_pairs"] == got["upstream"]["subsets"]["rmb"]["n_pairs"]


def test_rmb_best_of_n_row_with_the_best_answer_among_its_losers_counts_as_wrong(tmp_path, monkeypatch, capsys):
    """A best-of-N row whose best answer a loser repeats: kept, and wrong under ``bon`` (the best must outscore
    every loser; a tie is no win), as RMB scores it."""
    folder = tmp_path / "BoN_set" / "Helpfulness" / "Chat"
    folder.mkdir(parents=True)
    rows = json.loads((RMB / "BoN_set/Helpfulness/Chat/Discussion.json").read_text(encoding="utf-8"))
    rows[1]["loser_list"].append({"llm_name": "twin", "answer": rows[1]["bon_best"]["answer"]})
    (folder / "Discussion.json").write_text(json.dumps(rows, indent=4), encoding="utf-8")
    bench, out = tmp_path / "bon.jsonl", tmp_path / "bon.json"
    proc = run_main("import", "rmb", tmp_path / "BoN_set", "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and "1 row(s) judge two identical texts: kept" in proc.stderr, proc.stderr
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "bon", "--output-json", out]
    assert run_main(*args, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    sub = json.loads(out.read_text(encoding="utf-8"))["subsets"]["bon"]
    # before: one of the two rows right (test_pairwise_and_bon_on_rmb); row 102 was that one, now tied with its twin
    assert sub["n_prompts"] == 2 and sub["pooled_accuracy"] == 0.0


def test_judgebench_pair_with_a_equal_to_b_imports_and_counts_as_wrong(tmp_path, monkeypatch, capsys):
    """JudgeBench's both-orders RM judge gives a tie 0 (not right): the A == B pair stays in the denominator."""
    rows = [json.loads(x) for x in JUDGEBENCH.read_text(encoding="utf-8").splitlines()]
    rows.append(rows[0] | {"pair_id": "same", "response_B": rows[0]["response_A"]})
    source = tmp_path / "claude.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    bench, out = tmp_path / "jb.jsonl", tmp_path / "jb.json"
    proc = run_main("import", "judgebench", source, "-o", bench, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and proc.stderr.count("warning") == 1, proc.stderr
    args = ["eval", "--bench", bench, "--model", "length", "--no-cache", "--metric", "pairwise", "--output-json", out]
    assert run_main(*args, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    sub = json.loads(out.read_text(encoding="utf-8"))["subsets"]["jb"]
    assert sub["n_pairs"] == 5 and sub["pooled_accuracy"] == pytest.approx(3 / 5)  # 3 of the 4 before, then the tie


# ---------------------------------------------------------------- metrics


def length_report(metric: str, *files: Path) -> dict:
    bench = load_bench(list(files))
    result = evaluate_scores(bench, score(bench, load_scorer("length")), "length")
    return benchmark_report(metric, bench, result).to_dict()


@pytest.fixture
def imported(tmp_path) -> dict[str, Path]:
    """Each fixture imported as a bench file (the file stem names the subset)."""
    out = {}
    for name, source, fmt in (
        ("rmbench", RMBENCH, "rmbench"),
        ("rmb_pairs", RMB / "Pairwise_set", "rmb"),
        ("rmb_bon", RMB / "BoN_set", "rmb"),
        ("rb2", RB2, "rewardbench2"),
        ("judgebench", JUDGEBENCH, "judgebench"),
    ):
        path = out[name] = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in import_file(source, fmt).records), "utf-8")
    return out


def test_rmbench_matrix_and_hard_normal_easy(imported):
    got = length_report("rmbench", imported["rmbench"])
    sub = got["subsets"]["rmbench"]
    chat, safety = sub["categories"]["chat"], sub["categories"]["safety"]
    assert chat["matrix"] == [[0.5, 0, 0], [1, 0.5, 0], [1, 1, 0.5]]
    assert (chat["hard"], chat["normal"], chat["easy"], chat["accuracy"]) == (0, 0.5, 1, 0.5)
    assert safety["matrix"] == [[1, 0, 0], [1, 0, 0], [1, 1, 1]] and safety["n_prompts"] == 1
    assert (safety["hard"], safety["easy"]) == (0, 1)
    assert safety["normal"] == pytest.approx(2 / 3) and safety["accuracy"] == pytest.approx(5 / 9)
    assert sub["matrix"] == [[0.75, 0, 0], [1, 0.25, 0], [1, 1, 0.75]]
    assert (sub["hard"], sub["easy"]) == (0, 1) and sub["normal"] == pytest.approx(7 / 12)
    assert sub["accuracy"] == pytest.approx(19 / 36) and got["overall"] == pytest.approx(19 / 36)
    assert got["metric"] == "rmbench" and got["scorer"] == "length"


def test_pairwise_and_bon_on_rmb(imported):
    pairs = length_report("pairwise", imported["rmb_pairs"], imported["rmb_bon"])
    sub = pairs["subsets"]["rmb_pairs"]
    assert sub["categories"] == {
        "Harmlessness": {"accuracy": 1.0, "n_prompts": 1, "n_pairs": 1},
        "Helpfulness": {"accuracy": 0.5, "n_prompts": 2, "n_pairs": 2},
    }
    assert sub["accuracy"] == 0.75 and sub["pooled_accuracy"] == pytest.approx(2 / 3)
    assert pairs["subsets"]["rmb_bon"]["accuracy"] == pytest.approx(0.8)
    assert pairs["overall"] == pytest.approx((0.75 + 0.8) / 2)
    bon = length_report("bon", imported["rmb_bon"])["subsets"]["rmb_bon"]
    assert bon["accuracy"] == 0.5 and bon["pooled_accuracy"] == 0.5 and bon["n_pairs"] == 5


def test_rewardbench2_best_of_4_tie_at_the_top_is_wrong(imported):
    bon = length_report("bon", imported["rb2"])["subsets"]["rb2"]
    assert {k: v["accuracy"] for k, v in bon["categories"].items()} == {"Factuality": 0.5, "Math": 1.0, "Ties": 1.0}
    assert bon["accuracy"] == pytest.approx(5 / 6) and bon["pooled_accuracy"] == 0.75
    pairs = length_report("pairwise", imported["rb2"])["subsets"]["rb2"]
    assert pairs["accuracy"] == pytest.approx(17 / 18) and pairs["pooled_accuracy"] == pytest.approx(12 / 13)


def test_judgebench_pairs_for_a_scorer(imported):
    sub = length_report("pairwise", imported["judgebench"])["subsets"]["judgebench"]
    assert {k: v["accuracy"] for k, v in sub["categories"].items()} == {
        "livebench-math": 0.0,
        "livebench-reasoning": 1.0,
        "mmlu-pro": 1.0,
    }
    assert sub["accuracy"] == pytest.approx(2 / 3) and sub["pooled_accuracy"] == 0.75


@pytest.mark.parametrize(
    ("labels", "right"),
    [
        (["A", "B"], True),  # chosen shown first, then second: both name it
        (["A", "C"], True),  # right once, tie once: one vote for, none against (JudgeBench)
        (["A", None], True),  # a parse failure counts for neither side
        (["A", "A"], False),  # always the first shown: inconsistent, wrong
        (["C", "C"], False),
        (["B", None], False),
        (["A"], True),  # one order
        (["C"], False),
    ],
)
def test_judge_pair_by_vote(labels, right):
    firsts = ["c", "r"]  # the first verdict shows the chosen one first, the second the rejected one
    verdicts = [ShownVerdict(first, label) for first, label in zip(firsts, labels)]
    pair = PairOutcome("c", "r", False, 1, 1, verdicts=verdicts)
    assert pair_right(pair) is right


def test_scorer_pair_is_as_scored():
    assert pair_right(PairOutcome("c", "r", True, 1, 1, 2.0, 1.0))
    assert not pair_right(PairOutcome("c", "r", False, 1, 1, 1.0, 1.0))


# ---------------------------------------------------------------- the command


def test_cli_import_then_eval_each_metric(tmp_path, monkeypatch, capsys):
    def cheems(*args):
        proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        return proc

    rm = tmp_path / "rm.jsonl"
    assert "wrote 3 records" in cheems("import", "rmbench", RMBENCH, "-o", rm).stdout
    out = tmp_path / "rm.json"
    proc = cheems("eval", "--bench", rm, "--model", "length", "--no-cache", "--metric", "rmbench", "--output-json", out)
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["overall"] == pytest.approx(19 / 36) and got["subsets"]["rm"]["normal"] == pytest.approx(7 / 12)
    # leaderboard and correlate read it: no prompt has all 9 style pairs right, 27 pairs; with its interval
    read = read_eval_json(out)
    assert read["subsets"]["rm"] == {
        "accuracy": pytest.approx(19 / 36),
        "exact_match": 0.0,
        "n_prompts": 3,
        "n_pairs": 27,
        "accuracy_ci": got["subsets"]["rm"]["accuracy_ci"],
    }
    low, high = got["subsets"]["rm"]["accuracy_ci"]
    assert low < 19 / 36 < high and read["overall_ci"] == [low, high]  # one subset: overall is its accuracy
    assert got["bootstrap"] == {"resamples": 1000, "seed": 0, "level": 0.95}
    assert "RM-Bench metrics: length" in proc.stdout and "0.528" in proc.stdout and "0.583" in proc.stdout
    assert "detailed_markdown" in proc.stdout  # the style matrix

    jb = tmp_path / "jb.jsonl"
    cheems("import", "judgebench", JUDGEBENCH, "-o", jb)
    proc = cheems(
        "eval", "--bench", jb, "--model", "length", "--no-cache", "--metric", "pairwise", "--output-json", out
    )
    got = json.loads(out.read_text(encoding="utf-8"))["subsets"]["jb"]
    assert got["pooled_accuracy"] == 0.75 and got["exact_match"] == pytest.approx(2 / 3)  # one pair per prompt
    assert "pairwise metrics" in proc.stdout and "0.667" in proc.stdout and "0.750" in proc.stdout

    bon = tmp_path / "bon.jsonl"
    cheems("import", "rmb", RMB / "BoN_set", "-o", bon)
    cheems("eval", "--bench", bon, "--model", "length", "--no-cache", "--metric", "bon", "--output-json", out)
    assert json.loads(out.read_text(encoding="utf-8"))["overall"] == 0.5


def test_cli_cheems_metric_is_the_default_and_unchanged(imported, tmp_path, monkeypatch, capsys):
    outputs = []
    for more in ([], ["--metric", "cheems"]):
        out = tmp_path / f"m{len(outputs)}.json"
        args = ["eval", "--bench", imported["judgebench"], "--model", "length", "--no-cache", "--output-json", out]
        proc = run_main(*args, *more, monkeypatch=monkeypatch, capsys=capsys)
        assert proc.returncode == 0, proc.stderr
        outputs.append((json.loads(out.read_text(encoding="utf-8")), proc.stdout))
    assert outputs[0] == outputs[1]
    got = outputs[0][0]
    assert got["metric"] == "cheems" and "accuracy_ci" in got["subsets"]["judgebench"]
    # CheemsBench's numbers: a category's exact match is the share of its prompts with every pair right
    assert got["subsets"]["judgebench"]["accuracy"] == pytest.approx(2 / 3)
    assert "CheemsBench metrics: length" in outputs[0][1]


@pytest.mark.parametrize(
    ("more", "expected"),
    [
        (["--metric", "best"], ("--metric", "unknown metric 'best'", "cheems, rmbench, bon, pairwise")),
        (["--metric", "bon", "--report", "REPORT"], ("--report", "--metric bon has none")),
        (
            ["--metric", "rmbench"],
            ("--metric rmbench", "prompt 'u2' of bench file 'judgebench'", "cheems import rmbench"),
        ),
    ],
)
def test_cli_metric_errors(imported, tmp_path, monkeypatch, capsys, more, expected):
    more = [str(tmp_path / "r") if x == "REPORT" else x for x in more]
    args = ["eval", "--bench", imported["judgebench"], "--model", "length", "--no-cache", *more]
    assert_user_error(run_main(*args, monkeypatch=monkeypatch, capsys=capsys), *expected)
    assert not (tmp_path / "r").exists()


def test_cli_unknown_import_format_lists_the_benchmarks(tmp_path, monkeypatch, capsys):
    proc = run_main("import", "rmbench2", RB2, "-o", tmp_path / "x.jsonl", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "rmbench, rmb, rewardbench2, judgebench")


def test_judge_both_orders_on_judgebench(imported, tmp_path, monkeypatch, capsys):
    """The fake judge picks the longer answer, so it is right on u1, u3, u4 and wrong on u2 in both orders.

    Its second look at u1 (u1's B shown first) gets an unparseable reply: one right verdict and one
    parse failure is right by JudgeBench's vote (pairwise metric), wrong by CheemsBench's rule. A judge
    that always says A is inconsistent on every pair: all wrong.
    """
    u1_b = records_by_id(JUDGEBENCH, "judgebench")["u1"].response("B").content

    def u1_b_first_unparseable(body: dict, attempt: int) -> str:
        shown = {label: text for label, _, text in ANSWER.findall(body["messages"][-1]["content"])}
        return "bad" if shown.get("A") == u1_b else "ok"

    def run(server, cache, metric):
        out = tmp_path / f"{cache}.json"
        args = ["eval", "--bench", imported["judgebench"], "--judge-model", "fake-judge", "--base-url", server.url]
        args += ["--cache", tmp_path / cache, "--max-retries", "1", "--no-progress", "--both-orders"]
        proc = run_main(*args, "--metric", metric, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys,
                        env={"OPENAI_API_KEY": "test-key"})  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(out.read_text(encoding="utf-8")), proc.stdout

    with FakeJudgeServer(faults=u1_b_first_unparseable) as server:
        pairwise = run(server, "fair.sqlite", "pairwise")[0]["subsets"]["judgebench"]
        cheems = run(server, "fair.sqlite", "cheems")[0]["subsets"]["judgebench"]
    assert pairwise["pooled_accuracy"] == 0.75 and pairwise["categories"]["mmlu-pro"]["accuracy"] == 1.0
    assert cheems["categories"]["mmlu-pro"]["accuracy"] == 0.5  # u1 wrong: not every verdict names A
    with FakeJudgeServer(always="A") as server:
        always_a, shown = run(server, "always-a.sqlite", "pairwise")
    assert always_a["overall"] == 0.0
    assert always_a["judge"]["position_consistency"] == {"pairs": 4, "consistent": 0, "rate": 0.0}
    assert "both orders: 0 of 4 pairs consistent" in shown
