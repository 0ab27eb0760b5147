"""The taxonomy file and ``categorize_records`` / ``cheems categorize apply`` against the loopback fake server
(tests/fault_server.py with ``reply=``: the fake categoriser answers whatever follows ``答：`` in the prompt)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cheems.data.schema import Record
from cheems.errors import InputError
from cheems.llm.sampling import SampleCache
from cheems.prompts.categorize import CategorizeSettings, categorize_records, parse_path
from cheems.prompts.taxonomy import default_taxonomy_path, load_taxonomy
from cheems.workflows.demo import demo_files
from fault_server import FakeJudgeServer
from helpers import assert_user_error, run_main, write_jsonl

PAPER_MAIN = ["理解", "知识", "推理", "数学", "代码", "写作", "安全", "复杂指令"]


def fake_answer(body: dict) -> str:
    """The fake categoriser: the text after ``答：`` in the prompt, up to the fence that closes it."""
    user = body["messages"][-1]["content"]
    found = re.search(r"答：(.*?)\n>>>", user, re.DOTALL)
    return found.group(1) if found else "不知道"


def prompt(pid: str, text: str, category: list[str] | None = None) -> Record:
    row = {"id": pid, "input": text, "responses": [{"id": "-", "content": ""}], "category": category}
    return Record.model_validate(row).model_copy(update={"responses": []})


def settings(server: FakeJudgeServer, tmp_path: Path, **kw) -> CategorizeSettings:
    base = dict(
        judge_model="fake-cat",
        base_url=server.url,
        api_key="test-key",
        cache=tmp_path / "cat.sqlite",
        backoff_base=0.001,
        backoff_max=0.01,
        timeout=5.0,
        concurrency=2,
    )
    return CategorizeSettings(**{**base, **kw})


def categories(result) -> dict[str, list[str]]:
    return {r.id: r.category for r in result.records}


@pytest.fixture
def server():
    with FakeJudgeServer(reply=fake_answer) as s:
        yield s


# ------------------------------------------------------------------------------ the taxonomy


def test_the_shipped_taxonomy_has_the_papers_main_categories_and_every_demo_bench_path():
    taxonomy = load_taxonomy()
    assert [main.name for main in taxonomy.categories] == PAPER_MAIN
    assert len(taxonomy.paths()) >= 50  # the paper: 50+ subcategories
    for path in (p for p in demo_files() if p.suffix == ".jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            main, sub = json.loads(line)["category"]
            assert taxonomy.find(f"{main}/{sub}") == (main, sub), (path.name, main, sub)
    # every subcategory list names its source in a comment just above its entry
    text = default_taxonomy_path().read_text(encoding="utf-8")
    for main in PAPER_MAIN:
        assert re.search(rf"# Subcategories: [^\n]*\n(  #[^\n]*\n)*  - name: {main}\n", text), main


BAD_TAXONOMIES = [
    ("categories:\n  - name: 数学\n    subcategories: [代数, 代数]\n", 3, "'代数' of '数学' is listed twice"),
    ("categories:\n  - name: 数学\n    subcategories: [代数]\n  - name: 数学\n    subcategories: [几何]\n", 4, "twice"),
    ("categories:\n  - name: 数学/代码\n    subcategories: [代数]\n", 2, "may not hold '/'"),
    # no answer can name these (issue 31): a full-width slash, a line break, an invisible character, look-alikes
    ("categories:\n  - name: 数学／代码\n    subcategories: [代数]\n", 2, "may not hold '/' (or '／')"),
    ('categories:\n  - name: 数学\n    subcategories: ["代\\n数"]\n', 3, "a line break"),
    ('categories:\n  - name: "数\\u200b学"\n    subcategories: [代数]\n', 2, "invisible"),
    ('categories:\n  - name: 数学\n    subcategories: [代数, "代\\u200d数"]\n', 3, "invisible"),
    ("categories:\n  - name: 数学\n    subcategories: [AI, ＡＩ]\n", 3, "'ＡＩ' of '数学' is listed twice"),
    ("categories:\n  - name: 数学\n    subcategories: []\n", 3, "subcategories"),
    ("categories:\n  - name: 数学\n    subcategories: [代数]\n    note: x\n", 4, "unknown key 'note'"),
    ("categories:\n  - name: 数学\n", 2, "is missing"),
]


@pytest.mark.parametrize(("text", "line", "words"), BAD_TAXONOMIES)
def test_a_bad_taxonomy_is_one_located_line_before_anything_is_asked(
    server, tmp_path, monkeypatch, capsys, text, line, words
):
    bad = tmp_path / "tax.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(words)) as e:
        load_taxonomy(bad)
    assert e.value.line == line
    src = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "input": "问题"}])
    out = tmp_path / "out.jsonl"
    args = ["categorize", "apply", src, "-o", out, "--base-url", server.url, "--judge-model", "m", "--taxonomy", bad]
    proc = run_main(*args, "--cache", tmp_path / "c.sqlite", monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, f"tax.yaml:{line}", words)
    assert server.total == 0 and not out.exists()


# ------------------------------------------------------------------------------ parsing the answer


@pytest.mark.parametrize(
    ("reply", "path"),
    [
        ("数学/代数", ("数学", "代数")),
        ("  数学 / 代数 \n", ("数学", "代数")),
        ("**数学/代数**", ("数学", "代数")),
        ("`代码/调试`。", ("代码", "调试")),
        ("「写作／诗歌」", ("写作", "诗歌")),
        ("<think>像是代数，也可能是几何</think>数学/代数", ("数学", "代数")),
        ("数学/不存在", None),  # not in the taxonomy: never the nearest one
        ("代数", None),  # a subcategory alone
        ("数学", None),  # a main category alone
        ("数学/代数\n推理/逻辑推理", None),  # two answers
        ("我认为属于 数学/代数", None),  # a sentence around the path
        ("数学/代数/初中", None),
        ("<think>数学/代数</think>", None),  # reasoning only
        ("", None),
    ],
)
def test_the_answer_is_parsed_strictly(reply, path):
    assert parse_path(reply, load_taxonomy()) == path


# ------------------------------------------------------------------------------ the run


def test_paths_are_assigned_existing_categories_kept_and_parse_failures_counted(server, tmp_path):
    multi = Record.model_validate(
        {
            "id": "chat",
            "input": [
                {"role": "user", "content": "这段代码报错了"},
                {"role": "assistant", "content": "请贴出代码。"},
                {"role": "user", "content": "答：「代码/调试」。"},
            ],
            "responses": [{"id": "r1", "content": "好的"}],
            "reference": "参考",
        }
    )
    records = [
        prompt("a", "解方程 x+1=2 答：数学/代数"),
        prompt("b", "明朝哪年建立？答：写作/诗歌", ["知识", "历史"]),
        multi,
        prompt("d", "答：数学/不存在"),
        prompt("e", "答：我觉得是 数学/代数"),
        prompt("f", "答：数学/代数", ["数学"]),  # kept, though only a main category
    ]
    result = categorize_records(records, settings(server, tmp_path), progress=False)
    assert categories(result) == {
        "a": ["数学", "代数"],
        "b": ["知识", "历史"],  # kept, not asked
        "chat": ["代码", "调试"],
        "d": [],
        "e": [],
        "f": ["数学"],
    }
    assert result.records[2].responses == multi.responses and result.records[2].reference == "参考"
    stats = result.stats
    assert (stats.assigned, stats.kept, stats.kept_outside, dict(stats.failed)) == (2, 2, 1, {"unparsed": 2})
    assert stats.cached == 0
    assert dict(stats.by_category) == {"数学": 1, "代码": 1}
    assert [(f.prompt_id, f.reason, f.reply) for f in result.failures] == [
        ("d", "unparsed", "数学/不存在"),
        ("e", "unparsed", "我觉得是 数学/代数"),
    ]
    assert server.total == 4  # b and f were not asked
    seeds = [body["seed"] for body in server.bodies]
    assert len(set(seeds)) == 4  # each prompt its own seed
    assert "数学/代数" in server.bodies[0]["messages"][0]["content"]  # the taxonomy's paths are shown

    # --overwrite: b is asked now; the others come from the cache (parse failures included: same question, same answer)
    again = categorize_records(records, settings(server, tmp_path, overwrite=True), progress=False)
    assert categories(again)["b"] == ["写作", "诗歌"] and categories(again)["f"] == ["数学", "代数"]
    assert (again.stats.assigned, again.stats.kept, again.stats.cached) == (4, 0, 4)
    assert server.total == 6
    # another seed is another question
    categorize_records(records, settings(server, tmp_path, seed=1), progress=False)
    assert server.total == 10


def test_transport_failures_are_listed_not_cached_and_a_rerun_asks_only_those(tmp_path):
    records = [prompt("a", "答：数学/代数"), prompt("b", "甲 答：推理/智力题")]

    def fail_b(body: dict, attempt: int) -> str:
        return "500" if "甲" in body["messages"][-1]["content"] else "ok"

    with FakeJudgeServer(reply=fake_answer, faults=fail_b) as server:
        first = categorize_records(records, settings(server, tmp_path, max_retries=0), progress=False)
    assert categories(first) == {"a": ["数学", "代数"], "b": []}
    assert dict(first.stats.failed) == {"http_500": 1} and first.failures[0].prompt_id == "b"
    with SampleCache(tmp_path / "cat.sqlite") as cache:
        assert cache.count() == 1
    with FakeJudgeServer(reply=fake_answer, port=server.httpd.server_address[1]) as server:  # same URL: same key
        rerun = categorize_records(records, settings(server, tmp_path), progress=False)
    assert server.total == 1 and categories(rerun) == {"a": ["数学", "代数"], "b": ["推理", "智力题"]}
    assert (rerun.stats.assigned, rerun.stats.cached, rerun.stats.failed_total) == (2, 1, 0)


def test_budget_stops_the_run_and_a_rerun_resumes(server, tmp_path):
    records = [prompt(f"p{k}", "答：知识/地理") for k in range(3)]
    cut = categorize_records(records, settings(server, tmp_path, max_requests=1, concurrency=1), progress=False)
    assert (cut.stats.assigned, cut.stats.not_attempted, cut.stats.budget_exhausted) == (1, 2, True)
    assert sum(bool(c) for c in categories(cut).values()) == 1
    rest = categorize_records(records, settings(server, tmp_path), progress=False)
    assert (rest.stats.assigned, rest.stats.cached) == (3, 1) and server.total == 3


def test_a_server_killed_mid_run_keeps_the_finished_replies(tmp_path):
    records = [prompt(f"p{k}", "答：安全/诈骗") for k in range(3)]
    kw = dict(concurrency=1, max_retries=0, max_consecutive_failures=1)
    with FakeJudgeServer(reply=fake_answer, die_after=2) as server:
        port = server.httpd.server_address[1]
        with pytest.raises(InputError) as e:
            categorize_records(records, settings(server, tmp_path, **kw), progress=False)
    assert "the categoriser at" in str(e.value) and "2 reply(ies) of this run are saved in" in str(e.value)
    with FakeJudgeServer(reply=fake_answer, port=port) as server:
        again = categorize_records(records, settings(server, tmp_path, **kw), progress=False)
    assert server.total == 1 and again.stats.assigned == 3


def test_the_output_is_the_same_bytes_for_any_number_of_workers(server, tmp_path):
    from cheems.data.io import write_records

    answers = ["数学/代数", "写作/诗歌", "不知道", "代码/调试", "安全/诈骗", "知识/历史"]
    records = [prompt(f"p{k}", f"问题{k} 答：{answers[k % len(answers)]}") for k in range(24)]
    outputs = []
    for workers in (1, 7):
        cache = tmp_path / f"cat{workers}.sqlite"  # each run asks every prompt itself
        result = categorize_records(records, settings(server, tmp_path, concurrency=workers, cache=cache), False)
        write_records(tmp_path / f"out{workers}.jsonl", result.records)
        outputs.append((tmp_path / f"out{workers}.jsonl").read_bytes())
    assert outputs[0] == outputs[1] and server.total == 48


# ------------------------------------------------------------------------------ the command


def test_cli_writes_records_stats_and_failures_and_refuses_bad_input(server, tmp_path, monkeypatch, capsys):
    src = write_jsonl(
        tmp_path / "prompts.jsonl",
        [
            {"id": "a", "input": "答：数学/代数"},
            {"id": "b", "input": "答：数学/代数", "category": ["写作", "诗歌"]},
            {"id": "c", "input": "答：随便"},
        ],
    )
    out, stats = tmp_path / "out.jsonl", tmp_path / "stats.json"
    base = ["categorize", "apply", src, "--base-url", server.url, "--judge-model", "fake-cat", "--no-progress"]
    args = [*base, "-o", out, "--cache", tmp_path / "cat.sqlite", "--stats-json", stats]
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], r.get("category")) for r in rows] == [("a", ["数学", "代数"]), ("b", ["写作", "诗歌"]), ("c", [])]
    assert json.loads(stats.read_text())["assigned"] == 1 and json.loads(stats.read_text())["kept"] == 1
    failures = [json.loads(line) for line in (tmp_path / "out.failures.jsonl").read_text().splitlines()]
    assert [(f["prompt_id"], f["reason"], f["reply"]) for f in failures] == [("c", "unparsed", "随便")]
    words = " ".join(re.sub("[│┃┌┐└┘├┤┬┴┼─━┏┓┗┛┡┩╇]", " ", proc.stdout).split())  # the table's cells, in order
    assert "assigned 1" in words and "kept (had a category) 1 of them not in the taxonomy 0" in words
    assert "failed 1" in words
    assert "1 record(s) got no category" in words
    assert server.total == 2

    def refused(*more: object) -> str:
        return assert_user_error(run_main(*more, monkeypatch=monkeypatch, capsys=capsys))

    before = out.read_bytes()
    assert "--output" in refused(*base, "-o", src)  # never replace the prompts
    assert "--output" in refused(*base[:-3], "--no-progress")
    assert "--judge-model" in refused(*base[:-3], "-o", out)
    missing = refused(*base, "-o", out, "--taxonomy", tmp_path / "none.yaml")
    assert "none.yaml" in missing and "no such taxonomy file" in missing
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "input": "问题"}, {"id": "b", "input": 3}])
    line = refused(*base[:2], bad, *base[3:], "-o", tmp_path / "o.jsonl")
    assert "bad.jsonl:2" in line and "input" in line
    assert "--concurrency" in refused(*base, "-o", tmp_path / "o.jsonl", "--concurrency", "0")
    assert out.read_bytes() == before and server.total == 2 and not (tmp_path / "o.jsonl").exists()


def test_the_taxonomy_example_in_the_docs_loads(tmp_path):
    text = (Path(__file__).parents[1] / "docs" / "formats.md").read_text(encoding="utf-8")
    example = re.search(r"<!-- taxonomy example -->\n```yaml\n(.*?)```", text, re.DOTALL)
    assert example is not None
    (tmp_path / "tax.yaml").write_text(example.group(1), encoding="utf-8")
    taxonomy = load_taxonomy(tmp_path / "tax.yaml")
    assert taxonomy.paths() == [
        ("数学", "应用题"),
        ("数学", "代数"),
        ("数学", "几何"),
        ("代码", "代码生成"),
        ("代码", "调试"),
    ]
