"""Importers: real Chinese files from ../shared/data and small hand-written edge cases."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from cheems.data.importers import FORMATS, guess_format, import_file
from cheems.data.io import load_rows, write_records
from cheems.data.stream import read_records
from cheems.errors import InputError
from helpers import run_main


def write_json(path, rows):
    path.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def first_format(path):
    return guess_format(load_rows(path)[0][1])


# ---------------------------------------------------------------- real files


def test_oasst1_ranked(shared_data, tmp_path):
    path = shared_data("oasst1_zh") / "oaast_rm_zh.json"
    assert first_format(path) == "ranked"
    result = import_file(path)  # no flag: the real file imports
    recs = result.records
    # 6 prompts rank one reply twice (identical texts, e.g. at ranks 1 and 2): the text keeps its best place,
    # the copy below it goes (one impossible comparison), the rest of each ranking stays; one warning counts them
    assert not result.skipped and [str(w) for w in result.warnings] == [
        f"{path}: 6 row(s) judge two identical texts: 6 copy(ies) placed below their own text dropped, the rest of "
        "each ranking kept"
    ]
    # One record per row, in order; a prompt node's same instruction under other histories stays apart.
    rows = list(load_rows(path))
    assert len(recs) == len(rows) == 775 and len({r.id for r in recs}) == 775  # trees at "你好": p-…, p-…-2, …
    three = next(i for i, (line, _) in enumerate(rows) if line == 3797)  # the 4th of the 6
    output = rows[three][1]["output"]  # [answer, "…", "…"]: the second copy goes, answer > "…" stays
    assert output[1] == output[2] and [x.content for x in recs[three].responses] == output[:2]
    assert recs[three].ranked_pairs() == [("r1", "r2")]
    assert sum(len(r.responses) for r in recs) == 1987
    # [X, X] leaves X alone (no pair): 3 rows
    assert Counter(len(r.responses) for r in recs) == {1: 3, 2: 433, 3: 261, 4: 64, 5: 11, 6: 1, 8: 1, 10: 1}
    assert sum(len(r.ranked_pairs()) for r in recs) == 1798
    assert Counter(type(r.input).__name__ for r in recs) == {"str": 383, "list": 392}
    first = recs[0]
    assert first.input == "布洛芬和对乙酰氨基酚的区别是？"
    assert first.rank == {"r1": 1, "r2": 2, "r3": 3, "r4": 4}
    assert first.response("r4").content == "能吃"
    with_history = next(r for r in recs if not isinstance(r.input, str))
    roles = [m.role for m in with_history.input]
    assert roles[-1] == "user" and roles[:2] == ["user", "assistant"] and len(roles) % 2 == 1
    # Round trip through the canonical reader keeps every record.
    write_records(tmp_path / "o.jsonl", recs)
    assert len(read_records(tmp_path / "o.jsonl").records) == 775


def test_dpo_zh_demo_sharegpt(shared_data):
    path = shared_data("dpo_zh_demo") / "dpo_zh_demo.json"
    assert first_format(path) == "pairwise"
    recs = import_file(path, "pairwise").records
    # 300 rows, 289 distinct conversations: repeated prompts group into one record.
    assert len(recs) == 289
    assert sum(len(r.comparisons) for r in recs) == 300
    assert sum(len(r.responses) for r in recs) == 578  # repeated rows repeat the same pair
    assert all(c.label == "a" and c.source == "import" for r in recs for c in r.comparisons)
    chat = [r for r in recs if not isinstance(r.input, str)]
    assert len(chat) == 62 and all([m.role for m in r.input] == ["system", "user"] for r in chat)
    raw = json.loads(path.read_text(encoding="utf-8"))[0]
    assert recs[0].input == raw["conversations"][0]["value"]
    assert recs[0].response("r1").content == raw["chosen"]["value"]
    assert recs[0].response("r2").content == raw["rejected"]["value"]


def test_medicalgpt_files(shared_data):
    folder = shared_data("medicalgpt_dpo_zh")
    for name, prompts, chats in (("dpo_zh_500.jsonl", 500, 84), ("medical_reward_test_100.jsonl", 100, 0)):
        assert first_format(folder / name) == "pairwise"
        recs = import_file(folder / name).records
        assert len(recs) == prompts
        assert sum(len(r.responses) for r in recs) == 2 * prompts
        assert sum(not isinstance(r.input, str) for r in recs) == chats
    med = import_file(folder / "medical_reward_test_100.jsonl").records[0]
    assert med.input == "肛门病变可能是什么疾病的症状?"
    assert [r.content for r in med.responses] == ["食管克罗恩病", "肛门病变可能与多种不同类型的病症有关。"]


def test_gpt4_comparison_imports_without_its_pairs_of_one_text(shared_data):
    path = shared_data("gpt4_comparison_zh") / "comparison_gpt4_data_zh.first2403.json"
    assert first_format(path) == "pairwise"
    result = import_file(path)  # no flag: the 20 rows whose chosen == rejected claim nothing and are dropped
    assert not result.skipped and [str(w) for w in result.warnings] == [
        f"{path}: 20 row(s) judge two identical texts: dropped (chosen = rejected claims nothing)"
    ]
    assert len(result.records) == 2383
    assert result.records[0].input == "什么是三原色？"  # empty `input` adds nothing
    same = [row for _, row in load_rows(path) if row["chosen"] == row["rejected"]]
    assert len(same) == 20
    assert all(r.responses[0].content != r.responses[1].content for r in result.records)


def test_jade_csv(shared_data):
    for name, n in (("jade_alignment_hard_zh.csv", 150), ("jade_alignment_medium_zh.csv", 500)):
        path = shared_data("jade_safety_zh") / name
        assert first_format(path) == "pairwise"
        recs = import_file(path).records
        assert len(recs) == n
        assert all(r.id.startswith("p-") and r.category == [] for r in recs)
        with path.open(encoding="utf-8") as f:
            raw = next(csv.DictReader(f))
        first = recs[0]
        assert first.input == raw["问题"]
        assert first.response("r1").content == raw["安全有用回答"]  # the safe answer is chosen
        assert first.response("r2").content == raw["违规回答"]
        assert first.comparisons[0].model_dump(exclude_none=True) == {
            "a": "r1",
            "b": "r2",
            "label": "a",
            "source": "import",
            "ID": "1",
        }


# ---------------------------------------------------------------- pairwise, hand-written


def test_pairwise_grouping_and_prompt_shapes(tmp_path):
    rows = [
        {"instruction": "翻译", "input": "你好", "chosen": "Hello", "rejected": "Hi there", "category": "翻译"},
        {"prompt": "翻译\n你好", "chosen": "Hello", "rejected": "Yo"},  # same prompt -> same record
        {"question": "天为什么是蓝的？", "response_chosen": "瑞利散射。", "response_rejected": "不知道。"},
        {
            "messages": [{"role": "user", "content": "1+1=?"}],
            "chosen": {"role": "assistant", "content": "2"},
            "rejected": {"role": "assistant", "content": "3"},
        },
        {"instruction": "再说一遍", "history": [["你好", "你好！"]], "chosen": "你好！", "rejected": "不"},
    ]
    recs = import_file(write_jsonl(tmp_path / "p.jsonl", rows), "pairwise").records
    assert len(recs) == 4
    first = recs[0]
    assert first.input == "翻译\n你好" and first.category == ["翻译"]
    assert [(r.id, r.content) for r in first.responses] == [("r1", "Hello"), ("r2", "Hi there"), ("r3", "Yo")]
    assert [(c.a, c.b, c.label) for c in first.comparisons] == [("r1", "r2", "a"), ("r1", "r3", "a")]
    assert recs[1].input == "天为什么是蓝的？"
    assert recs[2].input == "1+1=?"  # a lone user message is plain text
    assert [m.model_dump() for m in recs[3].input] == [
        {"role": "user", "content": "你好"},
        {"role": "assistant", "content": "你好！"},
        {"role": "user", "content": "再说一遍"},
    ]


def test_pairwise_trl_conversational(tmp_path):
    implicit = {
        "chosen": [{"role": "user", "content": "你是谁？"}, {"role": "assistant", "content": "我是助手。"}],
        "rejected": [{"role": "user", "content": "你是谁？"}, {"role": "assistant", "content": "走开。"}],
    }
    explicit = {
        "prompt": [{"role": "system", "content": "简短"}, {"role": "user", "content": "你是谁？"}],
        "chosen": [{"role": "assistant", "content": "助手。"}],
        "rejected": [{"role": "assistant", "content": "人。"}],
    }
    recs = import_file(write_jsonl(tmp_path / "t.jsonl", [implicit, explicit])).records
    assert recs[0].input == "你是谁？" and recs[0].response("r2").content == "走开。"
    assert [m.role for m in recs[1].input] == ["system", "user"]


@pytest.mark.parametrize(
    "row, field",
    [
        ({"prompt": "问", "chosen": 3, "rejected": "b"}, "chosen"),
        ({"prompt": "问", "chosen": "a", "rejected": {"from": "gpt", "value": None}}, "rejected.value"),
        (
            {"conversations": [{"from": "human", "value": ["x"]}], "chosen": "a", "rejected": "b"},
            "conversations[0].value",
        ),
        ({"chosen": "a", "rejected": "b"}, "prompt"),
        ({"prompt": "问", "chosen": "a"}, "rejected"),
        ({"prompt": "  ", "chosen": "a", "rejected": "b"}, "prompt"),
        ({"instruction": "问", "history": [["只有一半"]], "chosen": "a", "rejected": "b"}, "history[0]"),
    ],
)
def test_pairwise_bad_rows_name_file_line_field(tmp_path, row, field):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "好", "chosen": "a", "rejected": "b"}, row])
    with pytest.raises(InputError) as e:
        import_file(path, "pairwise")
    assert str(e.value).startswith(f"{path}:2: field '{field}': ")


def test_skip_invalid_keeps_good_rows_and_lists_bad(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"prompt": "甲", "chosen": "好", "rejected": "坏"}, ensure_ascii=False),
                "{not json",
                json.dumps({"prompt": "乙", "chosen": 1, "rejected": "坏"}, ensure_ascii=False),
                json.dumps({"prompt": "甲", "chosen": "更好", "rejected": "坏"}, ensure_ascii=False),
                json.dumps({"prompt": "丙", "chosen": "同", "rejected": "同"}, ensure_ascii=False),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    result = import_file(path, "pairwise", skip_invalid=True)
    assert [r.input for r in result.records] == ["甲"]
    assert len(result.records[0].comparisons) == 2
    assert [e.line for e in result.skipped] == [2, 3]
    assert all(str(e).startswith(f"{path}:") for e in result.skipped)
    assert len(result.warnings) == 1  # line 5's chosen == rejected: dropped and counted, no bad row
    with pytest.raises(InputError):
        import_file(path, "pairwise")


def test_pairwise_conflicting_category(tmp_path):
    rows = [
        {"prompt": "问", "chosen": "a", "rejected": "b", "category": "数学"},
        {"prompt": "问", "chosen": "a", "rejected": "c", "category": "语文"},
    ]
    with pytest.raises(InputError, match=r":2: field 'category'"):
        import_file(write_jsonl(tmp_path / "c.jsonl", rows), "pairwise")


# ---------------------------------------------------------------- ranked


def test_ranked_tie_groups_and_responses_key(tmp_path):
    rows = [
        {
            "prompt": "选一个",
            "responses": ["最好", ["并列一", "并列二"], "最差"],
            "category": ["推理", "数学"],
            "id": "q1",
        },
        {"instruction": "说", "input": "", "output": ["甲", "乙"], "history": []},
    ]
    path = write_json(tmp_path / "r.json", rows)
    assert first_format(path) == "ranked"
    recs = import_file(path).records
    assert recs[0].id == "q1" and recs[0].category == ["推理", "数学"]
    assert recs[0].rank == {"r1": 1, "r2": 2, "r3": 2, "r4": 3}
    assert len(recs[0].ranked_pairs()) == 5  # 6 pairs minus the tie
    assert recs[1].input == "说" and recs[1].rank == {"r1": 1, "r2": 2}


@pytest.mark.parametrize(
    "row, field",
    [
        ({"prompt": "问", "responses": []}, "responses"),
        ({"prompt": "问", "responses": ["a", []]}, "responses[1]"),
        ({"prompt": "问", "responses": ["a", ["b", 2]]}, "responses[1][1]"),
        ({"instruction": "问", "output": "只有一个字符串"}, "output"),
    ],
)
def test_ranked_bad_rows(tmp_path, row, field):
    path = write_jsonl(tmp_path / "bad.jsonl", [row])
    with pytest.raises(InputError) as e:
        import_file(path, "ranked")
    assert str(e.value).startswith(f"{path}:1: field '{field}': ")


def test_ranked_duplicate_explicit_id(tmp_path):
    rows = [{"id": "x", "prompt": "一", "responses": ["a"]}, {"id": "x", "prompt": "二", "responses": ["b"]}]
    with pytest.raises(InputError, match=r":2: field 'id': duplicate prompt id 'x'"):
        import_file(write_jsonl(tmp_path / "d.jsonl", rows), "ranked")


# ---------------------------------------------------------------- ratings


def test_ratings_dense_ranks_with_ties(tmp_path):
    row = {
        "prompt": "写诗",
        "responses": [
            {"content": "甲", "score": 7, "model": "m1"},
            {"text": "乙", "rating": 9.5, "id": "b"},
            {"response": "丙", "score": 7},
            {"content": "丁", "score": 1},
        ],
    }
    path = write_jsonl(tmp_path / "s.jsonl", [row])
    assert first_format(path) == "ratings"
    rec = import_file(path).records[0]
    assert [r.id for r in rec.responses] == ["r1", "b", "r3", "r4"]
    assert rec.rank == {"b": 1, "r1": 2, "r3": 2, "r4": 3}
    assert rec.response("r1").model == "m1"
    low = import_file(path, "ratings", lower_is_better=True).records[0]
    assert low.rank == {"r4": 1, "r1": 2, "r3": 2, "b": 3}


def test_ratings_parallel_lists(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{"input": "问", "responses": ["x", "y", "z"], "scores": [2, 2, 3]}])
    rec = import_file(path).records[0]
    assert rec.rank == {"r3": 1, "r1": 2, "r2": 2}


@pytest.mark.parametrize(
    "row, field",
    [
        ({"prompt": "问", "responses": ["x", "y"], "scores": [1]}, "scores"),
        ({"prompt": "问", "responses": ["x", "y"], "scores": [1, "高"]}, "scores[1]"),
        ({"prompt": "问", "responses": [{"content": "x", "score": float("nan")}]}, "responses[0].score"),
        ({"prompt": "问", "responses": [{"content": "x", "rating": True}]}, "responses[0].rating"),
        ({"prompt": "问", "responses": [{"content": "x"}]}, "responses[0].score"),
        ({"prompt": "问", "responses": [{"content": 5, "score": 1}]}, "responses[0].content"),
    ],
)
def test_ratings_bad_rows(tmp_path, row, field):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")  # NaN is written as NaN
    with pytest.raises(InputError) as e:
        import_file(path, "ratings")
    assert str(e.value).startswith(f"{path}:1: field '{field}': ")


# ---------------------------------------------------------------- every format: one text is not better than itself

SAME = "好答案"


@pytest.mark.parametrize(
    "row, expected",
    [
        ({"input": "问", "answer1": SAME, "answer2": SAME, "preference": 1}, "with itself"),
        (
            {
                "input": "问",
                "responses": [{"id": "x", "content": SAME}, {"id": "y", "content": SAME}],
                "comparisons": [{"a": "x", "b": "y", "label": "b"}],
            },
            "field 'comparisons[0]': responses 'x' and 'y' are the same text",
        ),
    ],
)
def test_official_records_refuse_a_pair_of_one_text_naming_the_fix(tmp_path, row, expected):
    """Canonical records are written, not converted: one located error that names its fix (--skip-invalid drops
    the row), or with skip_invalid the row is skipped and counted, and the good rows are kept."""
    good = {"input": "好", "answer1": "a", "answer2": "b", "preference": 2}
    path = write_jsonl(tmp_path / "in.jsonl", [row, good])
    with pytest.raises(InputError) as e:
        import_file(path, "official")
    assert str(e.value).startswith(f"{path}:1: ") and expected in str(e.value)
    assert str(e.value).endswith("give the row two different responses, or pass --skip-invalid to drop it")
    kept = import_file(path, "official", skip_invalid=True)
    assert [r.input for r in kept.records] == ["好"] and [x.line for x in kept.skipped] == [1]


@pytest.mark.parametrize(
    "fmt, row, kept",
    [
        ("pairwise", {"prompt": "问", "chosen": SAME, "rejected": SAME}, []),  # the row claims nothing
        ("ranked", {"prompt": "问", "responses": [SAME, "次", SAME]}, [SAME, "次"]),
        ("ranked", {"prompt": "问", "responses": ["次", [SAME, SAME], SAME]}, ["次", SAME, SAME]),
        ("ratings", {"prompt": "问", "responses": [SAME, "次", SAME], "scores": [1, 3, 2]}, ["次", SAME]),
    ],
)
def test_training_formats_drop_only_the_copy_judged_below_itself(tmp_path, fmt, row, kept):
    """A text ranked twice keeps its best place (copies tied with it stay); the rest of the row is imported and
    one warning counts the rows, whatever their number."""
    good = {
        "pairwise": {"prompt": "好", "chosen": "a", "rejected": "b"},
        "ranked": {"prompt": "好", "responses": ["a", "b"]},
        "ratings": {"prompt": "好", "responses": ["a", "b"], "scores": [2, 1]},
    }[fmt]
    path = write_jsonl(tmp_path / "in.jsonl", [good, row, row])
    result = import_file(path, fmt)
    assert (
        not result.skipped
        and len(result.warnings) == 1
        and "2 row(s) judge two identical texts" in str(result.warnings[0])
    )
    records = result.records
    assert records[0].input == "好" and len(records) == (1 if fmt == "pairwise" else 3)
    for record in records[1:]:
        assert [r.content for r in record.responses] == kept
        assert all(record.response(a).content != record.response(b).content for a, b in record.ranked_pairs())


def test_a_tie_between_copies_of_one_text_is_kept(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "问", "responses": ["甲", [SAME, SAME]]}])
    result = import_file(path, "ranked")
    assert result.records[0].rank == {"r1": 1, "r2": 2, "r3": 2} and not result.warnings


def test_cli_import_keeps_the_ranking_and_warns_once(tmp_path, monkeypatch, capsys):
    rows = [{"prompt": "好", "responses": ["a", "b"]}, {"prompt": "问", "responses": [SAME, SAME, "c"]}]
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    proc = run_main("import", "ranked", path, "-o", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0 and proc.stderr.splitlines() == [
        f"warning {path}: 1 row(s) judge two identical texts: 1 copy(ies) placed below their own text dropped, "
        "the rest of each ranking kept"
    ]
    second = json.loads(out.read_text(encoding="utf-8").splitlines()[1])
    assert [r["content"] for r in second["responses"]] == [SAME, "c"] and second["rank"] == {"r1": 1, "r3": 3}


def test_chat_turns_of_unknown_roles_are_refused(tmp_path):
    row = {"conversations": [{"from": "human", "value": "问"}, {"from": "observation", "value": "42"}]}
    path = write_jsonl(tmp_path / "in.jsonl", [row | {"chosen": "a", "rejected": "b"}])
    with pytest.raises(InputError, match=r"in.jsonl:1: field 'conversations\[1\].from': unknown role 'observation'"):
        import_file(path, "pairwise")


# ---------------------------------------------------------------- official, guessing, file errors


def test_official_rows(tmp_path):
    rows = [
        {"input": "问", "answer1": "甲", "answer2": "乙", "preference": 1},
        {"input": "问", "answer1": "乙", "answer2": "丙", "preference": "tie"},
    ]
    path = write_jsonl(tmp_path / "off.jsonl", rows)
    assert first_format(path) == "official"
    recs = import_file(path).records
    assert len(recs) == 1 and len(recs[0].responses) == 3
    assert [c.label for c in recs[0].comparisons] == ["a", "tie"]
    canon = write_jsonl(
        tmp_path / "canon.jsonl", [{"input": "问", "responses": [{"id": "a", "content": "x"}], "rank": {"a": 1}}]
    )
    assert import_file(canon).records[0].rank == {"a": 1}


def test_guess_format_failures(tmp_path):
    with pytest.raises(InputError) as e:
        guess_format({"foo": 1})
    assert all(f in e.value.hint for f in FORMATS)
    path = write_jsonl(tmp_path / "x.jsonl", [{"foo": 1}])
    with pytest.raises(InputError, match=r"x\.jsonl:1: cannot tell the format"):
        import_file(path)


def test_unknown_format_empty_and_missing_file(tmp_path):
    good = write_jsonl(tmp_path / "g.jsonl", [{"prompt": "问", "chosen": "a", "rejected": "b"}])
    with pytest.raises(InputError, match="unknown format 'dpo'") as e:
        import_file(good, "dpo")
    assert "pairwise" in e.value.hint
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match=r"empty\.jsonl:1: file is empty"):
        import_file(empty, "pairwise")
    with pytest.raises(InputError, match="no such file"):
        import_file(tmp_path / "missing.json")


def test_csv_pairwise_with_multiline_cells(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text('ID,问题,违规回答,安全有用回答\n7,"多行\n问题",坏,好\n8,问题二,同,同\n', encoding="utf-8")
    result = import_file(path)  # row 8's two answers are one text: dropped and counted, the file imports
    assert result.records[0].input == "多行\n问题" and len(result.records) == 1
    assert not result.skipped and len(result.warnings) == 1
