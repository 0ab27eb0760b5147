"""``generate_records`` / ``cheems generate``: N seeded samples per prompt from the loopback fault server
(tests/fault_server.py: faults, a server killed mid-run, resume) and from a tiny random Qwen2 causal LM."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cheems.data.schema import Record, Response
from cheems.errors import InputError
from cheems.llm.sampling import GenerateSettings, SampleCache, generate_records, merge_sample, read_prompts
from fault_server import FakeJudgeServer, fake_sample, sample_key
from helpers import assert_user_error, run_main, write_jsonl
from tiny_models import build_tiny_qwen2


def seed_of(seed: int, prompt_id: str, index: int) -> int:
    """Sample ``index`` of ``prompt_id``'s seed, computed here by hand: sha256 of the compact JSON list, 31 bits."""
    text = json.dumps([seed, prompt_id, index], ensure_ascii=False, separators=(",", ":"))
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) >> 1


def prompts(n: int = 2, fault: str = "") -> list[Record]:
    """``n`` one-turn prompts p0..; a ``{{fault:...}}`` directive in p0's text schedules the server's faults."""
    return [
        Record.model_validate(
            {"id": f"p{k}", "input": f"问题{k}" + (fault if k == 0 else ""), "responses": [{"id": "-", "content": ""}]}
        ).model_copy(update={"responses": []})
        for k in range(n)
    ]


def settings(server: FakeJudgeServer, tmp_path: Path, **kw) -> GenerateSettings:
    base = dict(
        gen_model="org/fake-gen",
        base_url=server.url,
        api_key="test-key",
        cache=tmp_path / "gen.sqlite",
        backoff_base=0.001,
        backoff_max=0.01,
        timeout=5.0,
        concurrency=3,
        n=3,
    )
    return GenerateSettings(**{**base, **kw})


def contents(result) -> dict[str, list[tuple[str, str, str | None]]]:
    return {r.id: [(x.id, x.content, x.model) for x in r.responses] for r in result.records}


def expected(records: list[Record], n: int, seed: int = 0) -> dict[str, list[tuple[str, str, str]]]:
    """The fake server's samples, computed from its rule: the user turn and the seed of each sample."""
    return {
        r.id: [(f"fake-gen-{i}", fake_sample(r.input, seed_of(seed, r.id, i)), "org/fake-gen") for i in range(n)]
        for r in records
    }


@pytest.fixture
def server():
    with FakeJudgeServer() as s:
        yield s


def test_n_seeded_samples_per_prompt_and_the_input_is_kept(server, tmp_path):
    multi = Record.model_validate(
        {
            "id": "chat",
            "input": [
                {"role": "user", "content": "你好"},
                {"role": "assistant", "content": "你好！"},
                {"role": "user", "content": "讲个笑话"},
            ],
            "category": ["闲聊"],
            "reference": "参考答案",
            "baseline": "基线回答",
            "responses": [{"id": "old", "content": "旧回答", "model": "m0"}],
        }
    )
    result = generate_records([*prompts(1), multi], settings(server, tmp_path), progress=False)
    got = contents(result)
    assert got["p0"] == expected(prompts(1), 3)["p0"]
    assert got["chat"][0] == ("old", "旧回答", "m0")  # kept, first
    assert got["chat"][1:] == [
        (f"fake-gen-{i}", fake_sample("讲个笑话", seed_of(0, "chat", i)), "org/fake-gen") for i in range(3)
    ]
    chat = result.records[1]
    assert (chat.reference, chat.category, chat.model_extra["baseline"]) == ("参考答案", ["闲聊"], "基线回答")
    # what the server saw: the whole chat, the model name, the sampling settings and each sample's own seed
    bodies = sorted(
        (b["seed"], b["model"], b["temperature"], b["max_tokens"], len(b["messages"])) for b in server.bodies
    )
    assert bodies == sorted(
        [(seed_of(0, "p0", i), "org/fake-gen", 1.0, 1024, 1) for i in range(3)]
        + [(seed_of(0, "chat", i), "org/fake-gen", 1.0, 1024, 3) for i in range(3)]
    )
    s = result.stats
    assert (s.prompts, s.samples, s.generated, s.cached, s.failed_total, s.requests) == (2, 6, 6, 0, 0, 6)


def test_transient_faults_are_retried_and_each_sample_asked_until_answered(tmp_path):
    recs = prompts(2, fault="{{fault:429,500,reset}}")
    with FakeJudgeServer() as server:
        result = generate_records(recs, settings(server, tmp_path), progress=False)
        messages = [{"role": "user", "content": recs[0].input}]
        assert [server.counts[sample_key(messages, seed_of(0, "p0", i))] for i in range(3)] == [4, 4, 4]
        assert server.total == 3 * 4 + 3
    assert contents(result) == expected(recs, 3)
    assert result.stats.requests == 15 and result.stats.failed_total == 0


def test_persistent_faults_are_listed_not_cached_and_a_rerun_asks_only_those(tmp_path):
    recs = prompts(2, fault="{{fault:500*}}")
    with FakeJudgeServer() as server:
        result = generate_records(recs, settings(server, tmp_path, max_retries=1), progress=False)
        port = server.httpd.server_address[1]
    assert result.stats.failed == {"http_500": 3} and result.stats.prompts_left_out == 1
    assert [(f.prompt_id, f.sample, f.reason) for f in result.failures] == [("p0", i, "http_500") for i in range(3)]
    assert [r.id for r in result.records] == ["p1"]  # p0 has no response at all: left out
    with SampleCache(tmp_path / "gen.sqlite") as cache:
        assert cache.count() == 3
    # The server recovers (restarted at the same URL, without the fault schedule): only p0's samples are asked.
    with FakeJudgeServer(faults=lambda body, attempt: "ok", port=port) as server:
        again = generate_records(recs, settings(server, tmp_path), progress=False)
        assert server.total == 3 and {b["seed"] for b in server.bodies} == {seed_of(0, "p0", i) for i in range(3)}
    assert contents(again) == expected(recs, 3)
    assert (again.stats.generated, again.stats.cached) == (3, 3)


def test_replies_with_no_text_are_failures_never_samples_and_a_rerun_asks_again(server, tmp_path):
    # Each of p0's samples first gets content null, then reasoning only (reasoning_content beside an
    # empty content), then only a <think> block, then a real answer: one reply per run.
    recs = prompts(2, fault="{{fault:null,reasoning,think,ok*}}")
    for reason in ("empty", "reasoning_only", "reasoning_only"):
        result = generate_records(recs, settings(server, tmp_path), progress=False)
        assert result.stats.failed == {reason: 3} and result.stats.prompts_left_out == 1
        assert [(f.prompt_id, f.reason) for f in result.failures] == [("p0", reason)] * 3
        assert [r.id for r in result.records] == ["p1"]  # no empty sample anywhere
        with SampleCache(tmp_path / "gen.sqlite") as cache:
            assert cache.count() == 3  # p1's samples only: a failure is never cached
    again = generate_records(recs, settings(server, tmp_path), progress=False)
    assert contents(again) == expected(recs, 3) and (again.stats.generated, again.stats.cached) == (3, 3)
    assert server.total == 3 + 4 * 3  # p1 once; each of p0's samples once per run


@pytest.mark.parametrize(
    ("fault", "args", "words"),
    [
        ("null*", [], ["--gen-model:", "no sample was generated: 4 of 4 sample(s) failed (empty: 4)"]),
        ("reasoning*", [], ["no sample was generated", "(reasoning_only: 4)", "--max-tokens?"]),
        ("400*", [], ["no sample was generated", "(http_400: 4)", "fault 400"]),
        ("ok", ["--max-requests", "0"], ["--max-requests:", "ran out before any of the 4 sample(s)"]),
    ],
)
def test_a_run_with_no_sample_at_all_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys, fault, args, words):
    src = write_jsonl(
        tmp_path / "prompts.jsonl", [{"id": f"p{k}", "input": f"问题{k}{{{{fault:{fault}}}}}"} for k in (0, 1)]
    )
    out, cache = tmp_path / "pool.jsonl", tmp_path / "gen.sqlite"
    with FakeJudgeServer() as server:
        run = ["generate", src, "-n", "2", "-o", out, "--base-url", server.url, "--gen-model", "m", "--no-progress"]
        proc = run_main(*run, "--cache", cache, "--max-retries", "0", *args, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, *words)
    assert not out.exists() and not failures_of(out).exists()
    with SampleCache(cache) as samples:
        assert samples.count() == 0


def failures_of(output: Path) -> Path:
    return output.with_name(output.stem + ".failures.jsonl")


def test_a_server_killed_mid_run_then_a_rerun_asks_only_the_missing_samples(tmp_path):
    recs = prompts(3)
    kw = dict(concurrency=1, max_retries=0, max_consecutive_failures=2)
    with FakeJudgeServer(die_after=4) as server:
        port = server.httpd.server_address[1]
        with pytest.raises(InputError) as e:
            generate_records(recs, settings(server, tmp_path, **kw), progress=False)
    assert "the generator at" in str(e.value) and "stopped answering" in str(e.value)
    assert "4 sample(s) of this run are saved in" in str(e.value)
    with SampleCache(tmp_path / "gen.sqlite") as cache:
        assert cache.count() == 4
    with FakeJudgeServer(port=port) as server:  # restarted at the same URL (the URL is part of the cache key)
        again = generate_records(recs, settings(server, tmp_path, **kw), progress=False)
        asked = {b["seed"] for b in server.bodies}
    assert server.total == 5 and len(asked) == 5  # 9 samples, 4 saved: each missing one asked once
    assert contents(again) == expected(recs, 3)  # the same pool as an uninterrupted run
    assert (again.stats.generated, again.stats.cached) == (5, 4)


def test_more_samples_asks_only_new_ones_and_other_settings_are_another_cache_key(server, tmp_path):
    recs = prompts(2)
    generate_records(recs, settings(server, tmp_path, n=2), progress=False)
    more = generate_records(recs, settings(server, tmp_path, n=4), progress=False)
    assert server.total == 4 + 4 and contents(more) == expected(recs, 4)
    assert (more.stats.generated, more.stats.cached) == (4, 4)
    generate_records(recs, settings(server, tmp_path, n=4, temperature=0.7), progress=False)
    assert server.total == 8 + 8  # another temperature: nothing reused
    reseeded = generate_records(recs, settings(server, tmp_path, n=2, seed=5), progress=False)
    assert contents(reseeded) == expected(recs, 2, seed=5) and server.total == 16 + 4


def test_budget_stops_the_run_and_a_rerun_resumes(server, tmp_path):
    recs = prompts(2)
    cut = generate_records(recs, settings(server, tmp_path, max_requests=4, concurrency=1), progress=False)
    assert (cut.stats.generated, cut.stats.not_attempted, cut.stats.budget_exhausted) == (4, 2, True)
    rest = generate_records(recs, settings(server, tmp_path), progress=False)
    assert (rest.stats.generated, rest.stats.cached) == (2, 4) and contents(rest) == expected(recs, 3)


def test_a_response_id_another_model_holds_is_a_user_error(server, tmp_path):
    for given in (
        {"id": "fake-gen-1", "content": "x"},
        {"id": "fake-gen-1", "content": "x", "model": "other/fake-gen"},
    ):
        record = Record.model_validate({"id": "p0", "input": "问", "responses": [given]})
        with pytest.raises(InputError, match="already has a response 'fake-gen-1' of another model"):
            generate_records([record], settings(server, tmp_path), progress=False)
    assert server.total == 0


def pool_view(result) -> dict[str, list[tuple]]:
    """Each prompt's responses as (id, content, model, models, merged)."""
    return {r.id: [(x.id, x.content, x.model, x.models, x.merged) for x in r.responses] for r in result.records}


def test_models_grow_one_pool_identical_texts_stored_once_and_a_rerun_adds_nothing(server, tmp_path):
    recs = prompts(2)
    first = generate_records(recs, settings(server, tmp_path, n=2), progress=False)
    # the fake server's text depends on the prompt and the seed only: the same seed gives another model the
    # same texts (stored once, both names); another seed gives it texts of its own
    same = generate_records(first.records, settings(server, tmp_path, gen_model="other/twin", n=3), progress=False)
    pool = generate_records(same.records, settings(server, tmp_path, gen_model="third", n=1, seed=9), progress=False)
    text = {
        (pid, i, seed): fake_sample(f"问题{pid[1]}", seed_of(seed, pid, i))
        for pid in ("p0", "p1")
        for i in range(3)
        for seed in (0, 9)
    }
    for pid in ("p0", "p1"):
        assert pool_view(pool)[pid] == [
            (f"fake-gen-{i}", text[pid, i, 0], "org/fake-gen", ["org/fake-gen", "other/twin"], [f"twin-{i}"])
            for i in range(2)
        ] + [("twin-2", text[pid, 2, 0], "other/twin", None, None), ("third-0", text[pid, 0, 9], "third", None, None)]
    assert (same.stats.samples, same.stats.merged, pool.stats.merged) == (6, 4, 0)
    assert server.total == 4 + 6 + 2
    # rerunning any model on the pool adds nothing and asks nothing, with or without the cache
    for model, n, seed in (("org/fake-gen", 2, 0), ("other/twin", 3, 0), ("third", 1, 9)):
        kw = dict(gen_model=model, n=n, seed=seed, cache=tmp_path / "fresh.sqlite")
        again = generate_records(pool.records, settings(server, tmp_path, **kw), progress=False)
        assert pool_view(again) == pool_view(pool) and (again.stats.samples, again.stats.in_pool) == (0, 2 * n)
    assert server.total == 12
    # asking for more samples adds only the new ones, after what is there
    more = generate_records(pool.records, settings(server, tmp_path, gen_model="third", n=2, seed=9), progress=False)
    assert [r.id for r in more.records[0].responses][-2:] == ["third-0", "third-1"] and server.total == 14
    # the pool is valid canonical records, and its extra keys survive a round trip
    for record in more.records:
        assert Record.model_validate(record.to_json()).to_json() == record.to_json()


def test_one_pool_rule_for_every_model_its_own_samples_and_hand_written_answers():
    """A text is stored once whoever gave it: the first model of a text, a later one, the same model again,
    or no model (a hand-written answer) alike (before, a model's own repeat and a text with no model were kept
    twice, and only a model other than the response's first was merged)."""
    pool = [Response(id="a-0", content="T", model="a"), Response(id="mine", content="U")]
    merge_sample(pool, "b-0", "T", "b")  # another model: merged, as before
    merge_sample(pool, "a-1", "T", "a")  # the text's first model again
    merge_sample(pool, "b-1", "T", "b")  # the later model again
    merge_sample(pool, "a-2", "U", "a")  # a hand-written answer's text
    merge_sample(pool, "a-3", "V", "a")
    assert [(r.id, r.content, r.model, r.models, r.merged) for r in pool] == [
        ("a-0", "T", "a", ["a", "b"], ["b-0", "a-1", "b-1"]),
        ("mine", "U", None, ["a"], ["a-2"]),
        ("a-3", "V", "a", None, None),
    ]


def test_a_model_sampling_a_text_it_gave_before_stores_it_once_and_a_rerun_asks_nothing(server, tmp_path):
    recs = prompts(1)
    own = fake_sample("问题0", seed_of(0, "p0", 0))  # what sample 0 will say
    pool = [recs[0].model_copy(update={"responses": [Response(id="old", content=own, model="org/fake-gen")]})]
    first = generate_records(pool, settings(server, tmp_path, n=2), progress=False)
    assert pool_view(first)["p0"] == [
        ("old", own, "org/fake-gen", None, ["fake-gen-0"]),
        ("fake-gen-1", fake_sample("问题0", seed_of(0, "p0", 1)), "org/fake-gen", None, None),
    ]
    assert first.stats.merged == 1
    again = generate_records(first.records, settings(server, tmp_path, n=2), progress=False)
    assert pool_view(again) == pool_view(first) and again.stats.samples == 0


# ------------------------------------------------------------------------------ the command


def test_cli_writes_the_pool_and_stats_and_refuses_bad_input(server, tmp_path, monkeypatch, capsys):
    src = write_jsonl(
        tmp_path / "prompts.jsonl", [{"id": "a", "input": "问题甲"}, {"id": "b", "prompt": "问题乙", "responses": []}]
    )
    out, stats = tmp_path / "pool.jsonl", tmp_path / "stats.json"
    args = ["generate", src, "-n", "2", "-o", out, "--base-url", server.url, "--gen-model", "org/fake-gen"]
    args += ["--cache", tmp_path / "gen.sqlite", "--no-progress", "--stats-json", stats]
    env = {"OPENAI_API_KEY": "test-key"}
    proc = run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [[x["content"] for x in r["responses"]] for r in rows] == [
        [fake_sample(text, seed_of(0, pid, i)) for i in range(2)] for pid, text in (("a", "问题甲"), ("b", "问题乙"))
    ]
    assert json.loads(stats.read_text())["generated"] == 4
    # the output may never replace the input
    same = ["generate", src, "-n", "2", "-o", src, "--base-url", server.url, "--gen-model", "m", "--no-progress"]
    assert_user_error(run_main(*same, monkeypatch=monkeypatch, capsys=capsys, env=env), "--output")
    # a bad line: one line naming file, line and field
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "input": "问题"}, {"id": "b", "input": 3}])
    bad_args = ["generate", bad, "-o", tmp_path / "o.jsonl", "--base-url", server.url, "--gen-model", "m"]
    assert_user_error(run_main(*bad_args, monkeypatch=monkeypatch, capsys=capsys, env=env), "bad.jsonl:2", "input")
    dup = write_jsonl(tmp_path / "dup.jsonl", [{"id": "a", "input": "问题"}, {"id": "a", "input": "别的问题"}])
    dup_args = ["generate", dup, "-o", tmp_path / "o.jsonl", "--base-url", server.url, "--gen-model", "m"]
    assert_user_error(run_main(*dup_args, monkeypatch=monkeypatch, capsys=capsys, env=env), "duplicate prompt id 'a'")
    zero = [*dup_args[:1], src, *dup_args[2:], "-n", "0"]
    assert_user_error(run_main(*zero, monkeypatch=monkeypatch, capsys=capsys, env=env), "-n", "at least 1")
    assert server.total == 4


def test_a_second_run_onto_the_same_pool_is_refused_while_one_runs(server, tmp_path):
    """Two runs growing one pool with two models: the second wrote the file without the first one's samples.
    This test process holds the run lock on the output as a running ``cheems generate`` does; a real second
    process is refused at once (one line, nothing written, nothing asked), and runs once the lock is let go."""
    import os

    from cheems.outputs import run_lock
    from helpers import run_cheems

    src = write_jsonl(tmp_path / "prompts.jsonl", [{"id": "a", "input": "问题甲"}])
    out = tmp_path / "pool.jsonl"
    args = ["generate", src, "-o", out, "--base-url", server.url, "--gen-model", "b", "--no-progress"]
    args += ["--cache", tmp_path / "gen.sqlite"]
    env = {"OPENAI_API_KEY": "test-key"}
    with run_lock(out, "samples"):
        proc = run_cheems(*args, env=env)
        assert_user_error(proc, f"{out}: another run is writing its samples to this file (pid {os.getpid()})")
        assert not out.exists() and server.total == 0
    proc = run_cheems(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and server.total == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen.sqlite", "pool.jsonl", "prompts.jsonl"]  # no lock left


def test_read_prompts_keeps_given_responses(tmp_path):
    src = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "input": "问", "responses": [{"id": "r1", "content": "答"}]}])
    (record,) = read_prompts(src)
    assert [r.id for r in record.responses] == ["r1"]


# ------------------------------------------------------------------------------ a local model


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, qwen2_tokenizer_dir) -> Path:
    """A random Qwen2ForCausalLM (hidden 64, 2 layers) with a Qwen2-style tokenizer and chat template."""
    return build_tiny_qwen2(tmp_path_factory.mktemp("gen-model") / "tiny-lm", qwen2_tokenizer_dir, causal_lm=True)


def hf(model: Path, tmp_path: Path, cache: str = "gen.sqlite", **kw) -> GenerateSettings:
    base = dict(
        gen_model=str(model), backend="hf", device="cpu", max_tokens=6, n=3, batch_size=4, cache=tmp_path / cache
    )
    return GenerateSettings(**{**base, **kw})


def test_local_samples_depend_on_their_seed_only_not_on_the_batch(tmp_path, tiny_lm):
    recs = prompts(2)
    batched = generate_records(recs, hf(tiny_lm, tmp_path, "a.sqlite"), progress=False)
    alone = generate_records(recs, hf(tiny_lm, tmp_path, "b.sqlite", batch_size=1), progress=False)
    got = contents(batched)
    assert got == contents(alone)
    assert [x[0] for x in got["p0"]] == ["tiny-lm-0", "tiny-lm-1", "tiny-lm-2"]
    assert {x[2] for xs in got.values() for x in xs} == {str(tiny_lm)}
    texts = [x[1] for xs in got.values() for x in xs]
    assert len(set(texts)) == 6  # a random model over 151,936 tokens: six seeds, six different samples
    assert batched.stats.requests == 6 and 0 < batched.stats.completion_tokens <= 36
    reseeded = generate_records(recs, hf(tiny_lm, tmp_path, "c.sqlite", seed=1), progress=False)
    assert not set(texts) & {x[1] for xs in contents(reseeded).values() for x in xs}
    greedy = generate_records(recs[:1], hf(tiny_lm, tmp_path, "d.sqlite", temperature=0.0, n=2), progress=False)
    assert all(len({x[1] for x in xs}) == 1 for xs in contents(greedy).values())  # greedy: one answer per prompt


def test_local_run_cut_by_the_budget_resumes_to_the_same_pool(tmp_path, tiny_lm):
    recs = prompts(2)
    whole = generate_records(recs, hf(tiny_lm, tmp_path, "whole.sqlite"), progress=False)
    cut = generate_records(recs, hf(tiny_lm, tmp_path, max_requests=2), progress=False)
    assert (cut.stats.generated, cut.stats.not_attempted, cut.stats.budget_exhausted) == (2, 4, True)
    rest = generate_records(recs, hf(tiny_lm, tmp_path), progress=False)
    assert (rest.stats.generated, rest.stats.cached) == (4, 2)
    assert contents(rest) == contents(whole)


def test_seeded_sampling_draws_from_the_softmax():
    """The Gumbel-max processor samples softmax(logits / T): frequencies over 20,000 draws within 0.01."""
    import torch

    from cheems.llm.local import _seeded_sampling

    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    processor = _seeded_sampling(2.0, [torch.Generator().manual_seed(0)])
    draws = torch.tensor([int(processor(None, logits).argmax()) for _ in range(20000)])
    freq = torch.bincount(draws, minlength=4).double() / len(draws)
    target = torch.softmax(logits[0].double() / 2.0, dim=0)
    assert torch.allclose(freq, target, atol=0.01), (freq, target)
