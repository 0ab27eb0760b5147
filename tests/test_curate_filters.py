"""Response quality filters: each check by hand, the record surgery, the config file, real data."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cheems.curate.filters import (
    EMPTY,
    NON_CHINESE,
    REPETITIVE,
    TOO_LONG,
    TOO_LONG_RELATIVE,
    TRUNCATED,
    FilterConfig,
    check_non_chinese,
    check_relative_length,
    check_repetitive,
    check_truncated,
    dense_rank,
    filter_records,
    is_code_line,
    language_units,
    non_chinese_share,
    response_reason,
    strip_non_prose,
)
from cheems.data.importers import import_file
from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.yamlfile import load_yaml_model

CFG = FilterConfig()
PROSE = "深度学习是机器学习的一个分支，它使用多层神经网络从数据中自动学习特征表示。"  # 38 chars, ends with 。


def rec(contents: list[str], prompt: str = "请解释一下深度学习。", comparisons=(), rank=None, pid: str = "p") -> Record:
    return Record.model_validate(
        {
            "id": pid,
            "input": prompt,
            "responses": [{"id": f"r{i}", "content": c} for i, c in enumerate(contents, start=1)],
            "comparisons": [{"a": a, "b": b, "label": lab, "source": "judge"} for a, b, lab in comparisons],
            "rank": rank,
        }
    )


# ---------------------------------------------------------------- single checks


def test_empty_and_whitespace_only():
    assert response_reason("", [10], CFG) == EMPTY
    assert response_reason(" \n\t ", [10], CFG) == EMPTY
    assert response_reason("好。", [10], CFG) is None


def test_absolute_cap():
    cfg = FilterConfig(max_chars=100, max_length_ratio=None)
    assert response_reason(PROSE * 2, [], cfg) is None  # 76 chars
    assert response_reason(PROSE * 3, [], cfg) == TOO_LONG  # 114 chars
    assert response_reason(PROSE * 3, [], FilterConfig(max_chars=None, max_length_ratio=None)) is None


def test_relative_length_needs_both_the_ratio_and_the_floor():
    cfg = FilterConfig(max_length_ratio=3.0, long_min_chars=1000)
    assert check_relative_length("字" * 1200, [400, 300, 500], cfg) is None  # 1200 = 3 × 400: not over
    assert check_relative_length("字" * 1201, [400, 300, 350], cfg) == TOO_LONG_RELATIVE  # > 3 × 350 and > 1000
    assert check_relative_length("字" * 900, [10, 20], cfg) is None  # 45× the median but under the floor
    assert check_relative_length("字" * 5000, [], cfg) is None  # no sibling to compare with


def test_language_units_count_words_not_letters():
    assert language_units("使用 Python 的 requests 库") == (4, 2)
    assert language_units("3 + 4 = 7，") == (0, 0)
    assert language_units("こんにちは世界") == (2, 5)  # kana one unit per character
    assert non_chinese_share("Hello world, this is English.")[0] == 1.0


ENGLISH = (
    "Deep learning is a branch of machine learning that uses neural networks with many layers to learn features. "
    "It powers image recognition and speech recognition."
)  # 26 words


def test_english_answer_to_chinese_prompt_is_dropped():
    assert check_non_chinese(ENGLISH, CFG) == NON_CHINESE
    assert filter_records([rec([ENGLISH, PROSE])])[1].dropped[NON_CHINESE] == 1


def test_chinese_with_english_terms_is_kept():
    text = "可以用 Python 的 requests 库发送 HTTP 请求，再用 BeautifulSoup 解析 HTML 页面，最后把结果写入 CSV 文件。"
    assert check_non_chinese(text, CFG) is None


def test_short_answers_are_not_judged():
    assert check_non_chinese("The answer is B.", CFG) is None  # 4 units < non_chinese_min_units


def test_fenced_code_answer_is_kept():
    code = "```python\n" + "\n".join(f"def f{i}(x):\n    return x * {i}  # multiply" for i in range(30)) + "\n```"
    assert check_non_chinese("下面是代码：\n" + code + "\n以上。", CFG) is None
    assert response_reason("下面是代码：\n" + code + "\n以上。", [500], CFG) is None


def test_unfenced_code_answer_is_kept():
    code = """#include <stdio.h>

int main() {
    for (int i = 1; i <= 9; i++) {
        for (int j = 1; j <= i; j++) {
            printf("%d*%d=%2d ", j, i, i * j);
        }
        printf("\\n");
    }
    return 0;
}"""
    assert is_code_line("    return 0;") and is_code_line("import numpy as np") and is_code_line("print(x)  # 输出结果")
    assert not is_code_line("The answer uses a loop over the rows and columns of the table")
    assert not is_code_line("我们使用 for 循环。")
    assert response_reason(code, [300], CFG) is None


def test_math_answer_is_kept():
    math = (
        r"解：由 $a^{2}-b^{2}=4 c^{2}$ 可得"
        "\n\n$$\n\\cos A=\\frac{b^{2}+c^{2}-a^{2}}{2 b c}, \\therefore \\frac{b}{c}=6\n$$\n"
        r"又 \(\sin B = \frac{4\sqrt{5}}{9}\)，\[ \tan B = 4 \sqrt{5} \]"
        "\n故选: C"
    )
    prose = strip_non_prose(math)
    assert "\\" not in prose and "$" not in prose and "frac" not in prose  # every formula is gone
    assert check_non_chinese(math, FilterConfig(non_chinese_min_units=1)) is None  # 1 Latin unit (C) of 8
    assert response_reason(math, [300], CFG) is None


def test_urls_do_not_count_as_english():
    text = (
        "参考资料：\n"
        + "\n".join(f"https://example.com/deep/learning/tutorial/part-{i}" for i in range(20))
        + "\n希望对你有帮助。"
    )
    assert check_non_chinese(text, CFG) is None


def test_prompts_asking_for_another_language_are_exempt():
    r = rec([ENGLISH, ENGLISH + " Really."], prompt="请把这句话翻译成英文：深度学习是机器学习的一个分支。")
    assert filter_records([r])[1].dropped[NON_CHINESE] == 0
    r = rec([ENGLISH, ENGLISH + " Really."], prompt="What is deep learning? Please explain it briefly.")
    assert filter_records([r])[1].dropped[NON_CHINESE] == 0
    cfg = FilterConfig(exempt_prompt_pattern=None)
    r = rec([ENGLISH, PROSE], prompt="请用英文解释深度学习。")
    assert filter_records([r], cfg)[1].dropped[NON_CHINESE] == 1


@pytest.mark.parametrize(
    "text,expected",
    [
        (PROSE * 6 + "\n而且它在图像识别和", TRUNCATED),  # stops mid-sentence after 200+ chars
        (PROSE * 6 + "\n它的应用包括，", TRUNCATED),  # ends on a comma
        ("而且它在图像识别和", None),  # too short to judge
        (PROSE * 6, None),  # ends with 。
        (PROSE * 6 + "\n故选: C", None),  # an answer letter is a proper end
        (PROSE * 6 + "\n- 图像识别\n- 语音识别", None),  # a list item needs no full stop
        (PROSE * 6 + "\n来源：https://zh.wikipedia.org/wiki/深度学习", None),  # ends with a link
        ("代码如下：\n```python\nprint('hi')\n", TRUNCATED),  # unclosed fence, however short
        ("代码如下：\n```python\nprint('hi')\n```\n以上。", None),
    ],
)
def test_truncated(text, expected):
    assert check_truncated(text, CFG) == expected


def test_repetitive_line_and_ngrams():
    looping = PROSE + "\n" + "\n".join(["这个问题的答案是不确定的。"] * 6)
    assert check_repetitive(looping, CFG) == REPETITIVE
    assert check_repetitive(PROSE + "\n" + "\n".join(["这个问题的答案是不确定的。"] * 5), CFG) is None
    degenerate = PROSE + "它通过多层神经网络学习特征并且表现很好" * 15
    assert check_repetitive(degenerate, CFG) == REPETITIVE
    varied = "".join(f"第{i}点：{PROSE[i:]}{PROSE[:i]}\n" for i in range(8))
    assert check_repetitive(varied, FilterConfig(max_line_repeats=None)) is None


def test_repeated_code_lines_are_not_repetition():
    code = "```python\n" + "\n".join(["    print('-' * 40)"] * 12) + "\n```"
    assert check_repetitive("输出分隔线：\n" + code + "\n完成。", CFG) is None


def test_every_check_can_be_switched_off():
    off = FilterConfig(
        max_chars=None,
        max_length_ratio=None,
        max_non_chinese_share=None,
        truncation_min_chars=None,
        check_unclosed_fence=False,
        max_line_repeats=None,
        max_repeated_ngram_share=None,
    )
    for text in (ENGLISH * 100, "```\nx", PROSE * 6 + "和", "重复的一行内容在这里。\n" * 20):
        assert response_reason(text, [10], off) is None


# ---------------------------------------------------------------- records


def test_dropped_response_takes_its_comparisons_and_rank_entry_with_it():
    r = rec(
        [PROSE, "", PROSE + "补充。"],
        comparisons=[("r1", "r2", "a"), ("r2", "r3", "b"), ("r1", "r3", "tie")],
        rank={"r1": 1, "r2": 2, "r3": 3},
    )
    out, report = filter_records([r])
    assert [x.id for x in out[0].responses] == ["r1", "r3"]
    assert [(c.a, c.b) for c in out[0].comparisons] == [("r1", "r3")]
    assert out[0].rank == {"r1": 1, "r3": 2}  # renumbered densely, order kept
    assert report.dropped[EMPTY] == 1 and report.comparisons_removed == 2
    assert report.responses_in == 3 and report.responses_out == 2


def test_record_left_with_one_response_is_dropped_and_counted():
    out, report = filter_records([rec([PROSE, "   "], pid="a"), rec([PROSE, PROSE + "。"], pid="b")])
    assert [r.id for r in out] == ["b"]
    assert report.records_dropped == 1 and report.records_dropped_examples == ["a"]
    assert report.records_in == 2 and report.records_out == 1


def test_report_examples_are_short_and_located():
    long_english = " ".join([ENGLISH] * 5)
    records = [rec([long_english, PROSE], pid=f"p{i}") for i in range(5)]
    _, report = filter_records(records, max_examples=3)
    examples = report.examples[NON_CHINESE]
    assert len(examples) == 3 and report.dropped[NON_CHINESE] == 5
    assert (examples[0].prompt_id, examples[0].response_id) == ("p0", "r1")
    assert len(examples[0].excerpt) <= 80 and examples[0].excerpt.endswith("…")
    assert json.loads(json.dumps(report.to_dict()))["dropped_by_reason"][NON_CHINESE] == 5


def test_dense_rank_keeps_ties_and_order():
    assert dense_rank({"a": 1, "b": 2, "c": 2, "d": 4}, {"a", "c", "d"}) == {"a": 1, "c": 2, "d": 3}
    assert dense_rank({"a": 1, "b": 2}, set()) == {}


texts = st.sampled_from(["", PROSE, PROSE * 3, ENGLISH * 3, PROSE * 6 + "而且", "好的。"])


@settings(max_examples=60, deadline=None)
@given(st.lists(texts, min_size=1, max_size=5), st.data())
def test_property_filtered_records_stay_consistent(contents, data):
    ids = [f"r{i}" for i in range(1, len(contents) + 1)]
    rank = dense_rank({rid: data.draw(st.integers(1, 3)) for rid in ids}, set(ids))  # valid: consecutive
    pairs = [(a, b, data.draw(st.sampled_from(["a", "b", "tie"]))) for i, a in enumerate(ids) for b in ids[i + 1 :]]
    r = rec(contents, comparisons=pairs, rank=rank)
    out, report = filter_records([r])
    if not out:
        assert report.records_dropped == 1 and len(contents) - sum(report.dropped.values()) < 2
        return
    assert report.responses_in - report.responses_out == sum(report.dropped.values())
    new = out[0]
    kept = {x.id for x in new.responses}
    assert len(kept) >= 2 and kept <= set(ids)
    assert all(c.a in kept and c.b in kept for c in new.comparisons)
    assert set(new.rank) == kept and sorted(set(new.rank.values())) == list(range(1, max(new.rank.values()) + 1))
    for a in kept:  # every relation among survivors is unchanged
        for b in kept:
            assert (rank[a] < rank[b]) == (new.rank[a] < new.rank[b])


# ---------------------------------------------------------------- config file


def test_config_from_yaml_and_unknown_key_is_located(tmp_path):
    good = tmp_path / "f.yaml"
    good.write_text("max_length_ratio: 4\nmax_chars: null\n", encoding="utf-8")
    cfg, _ = load_yaml_model(good, FilterConfig)
    assert cfg.max_length_ratio == 4 and cfg.max_chars is None
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_length_ratio: 4\nmax_lenght: 2\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_yaml_model(bad, FilterConfig)
    assert str(e.value).startswith(f"{bad}:2: field 'max_lenght': unknown key 'max_lenght'")
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("max_non_chinese_share: 2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"wrong.yaml:1: field 'max_non_chinese_share'"):
        load_yaml_model(wrong, FilterConfig)
    wrong.write_text("max_chars: 10\nexempt_prompt_pattern: '翻译('\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"wrong.yaml:2: field 'exempt_prompt_pattern': not a valid regular expression"
    ):
        load_yaml_model(wrong, FilterConfig)


# ---------------------------------------------------------------- real data


def _has_code(text: str) -> bool:
    return "```" in text or sum(is_code_line(line) for line in text.splitlines()) >= 3


def test_real_code_answers_survive(shared_data: Callable[[str], Path]):
    records = import_file(shared_data("oasst1_zh") / "oaast_rm_zh.json").records
    code = {(r.id, x.id) for r in records for x in r.responses if _has_code(x.content)}
    assert len(code) >= 60  # the test means something: oasst1_zh has many code answers
    _, report = filter_records(records, max_examples=10**6)
    for reason in (NON_CHINESE, REPETITIVE):
        hit = {(e.prompt_id, e.response_id) for e in report.examples.get(reason, [])}
        assert not hit & code, f"code answers dropped as {reason}: {sorted(hit & code)}"
    assert sum(report.dropped.values()) < 0.05 * report.responses_in  # tuned to keep good answers


def test_real_math_answers_survive(shared_data: Callable[[str], Path]):
    analyses = []
    for path in sorted(shared_data("gaokao_bench").glob("*/*Math*.json")):
        analyses += [
            q["analysis"]
            for q in json.loads(path.read_text(encoding="utf-8"))["example"]
            if q.get("analysis", "").strip()
        ]
    assert len(analyses) >= 500
    dropped = [a for a in analyses if check_non_chinese(a, CFG) or check_repetitive(a, CFG)]
    assert dropped == []
    truncated = [a for a in analyses if check_truncated(a, CFG)]
    assert len(truncated) <= 0.005 * len(analyses)  # one stray source artifact ("…=2+√3$. 解")


# ---------------------------------------------------------------- CLI


def test_cli_filter_with_config_override_report_and_skip_invalid(tmp_path):
    from typer.testing import CliRunner

    from cheems.cli.main import app
    from cheems.data.stream import read_records

    src = tmp_path / "in.jsonl"
    good = rec([PROSE, PROSE * 4, ""], comparisons=[("r1", "r3", "a")], pid="p1").to_json()
    src.write_text(json.dumps(good, ensure_ascii=False) + "\n{not json\n", encoding="utf-8")
    (tmp_path / "f.yaml").write_text("max_chars: 100\nmax_length_ratio: null\n", encoding="utf-8")
    out, rep = tmp_path / "out.jsonl", tmp_path / "rep.json"
    args = [
        "curate",
        "filter",
        str(src),
        "-o",
        str(out),
        "--config",
        str(tmp_path / "f.yaml"),
        "--report-json",
        str(rep),
    ]
    result = CliRunner().invoke(app, [*args, "--skip-invalid"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "responses dropped" in result.output
    report = json.loads(rep.read_text(encoding="utf-8"))
    assert report["dropped_by_reason"]["empty"] == 1 and report["dropped_by_reason"]["too_long"] == 1  # 152 > 100
    assert report["records_dropped_fewer_than_2_responses"] == 1 and not out.read_text(encoding="utf-8").strip()
    result = CliRunner().invoke(app, [*args, "--skip-invalid", "--max-chars", "200"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert [x.id for x in read_records(out).records[0].responses] == ["r1", "r2"]
    result = CliRunner().invoke(app, args)  # without --skip-invalid the bad line stops the run
    assert isinstance(result.exception, InputError) and ":2" in str(result.exception)
