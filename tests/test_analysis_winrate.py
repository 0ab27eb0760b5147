"""``cheems winrate``: picks against a baseline, with a real loopback judge and a real annotation project.

The fake judge (tests/fault_server.py) picks the answer with ★, else the longer one, else says C.
The pool below is built so each prompt's outcome is known in advance (baseline field ``gpt4``):

- p1: the pick has ★ -> win in any order;
- p2: the baseline is longer -> loss;
- p3: same length, no ★ -> C -> tie;
- p4: every reply to its question is unparseable -> tie, and a parse failure counted;
- p5: the pick is longer -> win.

So wins 2, losses 1, ties 2, n 5, win rate (2 + 2/2) / 5 = 0.6.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import multinomial

from cheems.annotate.answer import KEYS, Answer
from cheems.annotate.store import Project
from cheems.judge.prompt import JUDGE_TEMPLATE
from fault_server import FakeJudgeServer
from helpers import assert_user_error, run_main, write_jsonl

KEY_ENV = {"OPENAI_API_KEY": "test-key"}
UNPARSEABLE = "{{fault:bad*}}"
# prompt id -> (picked response, the other pool response, baseline)
POOL = {
    "p1": ("★好", "另一个候选回答", "很长很长的基线回答"),
    "p2": ("短", "另一个候选回答", "很长很长的基线回答"),
    "p3": ("甲乙", "另一个候选回答", "丙丁"),
    "p4": (f"甲{UNPARSEABLE}", "另一个候选回答", f"乙乙{UNPARSEABLE}"),
    "p5": ("很长很长很长的回答", "另", "短基线"),
}


def pool_rows(field: str = "gpt4", ids=POOL) -> list[dict]:
    rows = []
    for pid in ids:
        pick, other, baseline = POOL[pid]
        row = {
            "id": pid,
            "input": f"{pid}的问题",
            "category": ["数学"],
            "responses": [
                {"id": "qwen-0", "content": other, "model": "qwen"},
                {"id": "qwen-1", "content": pick, "model": "qwen"},
            ],
        }
        row[field] = baseline
        rows.append(row)
    return rows


def write_inputs(tmp_path: Path, field: str = "gpt4", ids=POOL) -> tuple[Path, Path]:
    pool = write_jsonl(tmp_path / "pool.jsonl", pool_rows(field, ids))
    picks = write_jsonl(
        tmp_path / "picks.jsonl", [{"prompt_id": pid, "response_id": "qwen-1", "score": 1.5} for pid in ids]
    )
    return picks, pool


def winrate_args(picks: Path, pool: Path, server: FakeJudgeServer, cache: Path, *more: object) -> list[object]:
    return [
        "winrate",
        picks,
        "--pool",
        pool,
        "--baseline-field",
        "gpt4",
        "--judge-model",
        "fake-judge",
        "--base-url",
        server.url,
        "--cache",
        cache,
        "--max-retries",
        "1",
        "--no-progress",
        *more,
    ]


def run_winrate(args: list[object], monkeypatch, capsys):
    return run_main(*args, monkeypatch=monkeypatch, capsys=capsys, env=KEY_ENV)


def exact_bootstrap_interval(wins: int, ties: int, losses: int) -> tuple[float, float]:
    """The 2.5% and 97.5% quantiles of the bootstrap distribution of the win rate, by enumerating every resample."""
    n = wins + ties + losses
    p = [wins / n, ties / n, losses / n]
    dist: dict[float, float] = {}
    for w, t in itertools.product(range(n + 1), repeat=2):
        if w + t <= n:
            rate = (w + t / 2) / n
            dist[rate] = dist.get(rate, 0.0) + multinomial.pmf([w, t, n - w - t], n, p)
    values = sorted(dist)
    cdf = np.cumsum([dist[v] for v in values])
    return values[int(np.searchsorted(cdf, 0.025))], values[int(np.searchsorted(cdf, 0.975))]


def test_known_truth_one_order(tmp_path, monkeypatch, capsys):
    picks, pool = write_inputs(tmp_path)
    out = tmp_path / "w.json"
    with FakeJudgeServer() as server:
        args = winrate_args(picks, pool, server, tmp_path / "c.sqlite", "--output-json", out, "--resamples", 20000)
        proc = run_winrate(args, monkeypatch, capsys)
        assert proc.returncode == 0, proc.stderr
        assert server.total == 4 + 2  # the unparseable question is asked once and re-asked once
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["n"], got["wins"], got["losses"], got["ties"]) == (5, 2, 1, 2)
    assert got["win_rate"] == pytest.approx(0.6)
    assert got["parse_failures"] == 1 and got["prompts_with_parse_failure"] == 1
    outcomes = {p["prompt_id"]: (p["outcome"], p["votes"]) for p in got["prompts"]}
    assert outcomes == {
        "p1": ("win", ["pick"]),
        "p2": ("loss", ["baseline"]),
        "p3": ("tie", ["tie"]),
        "p4": ("tie", [None]),
        "p5": ("win", ["pick"]),
    }
    assert all(p["response_id"] == "qwen-1" for p in got["prompts"])
    interval = got["interval"]
    assert (interval["low"], interval["high"]) == pytest.approx(exact_bootstrap_interval(2, 2, 1))
    assert interval["level"] == 0.95 and interval["resamples"] == 20000
    assert got["judged_by"]["judge"]["template"] == JUDGE_TEMPLATE.name  # the A/B/C prompt: a tie is an answer here
    assert "0.600" in proc.stdout and "fake-judge" in proc.stdout


def test_both_orders_win_only_when_both_say_so(tmp_path, monkeypatch, capsys):
    picks, pool = write_inputs(tmp_path)
    out = tmp_path / "w.json"
    with FakeJudgeServer() as server:  # the fair judge agrees with itself in both orders
        args = winrate_args(picks, pool, server, tmp_path / "c.sqlite", "--both-orders", "--output-json", out)
        assert run_winrate(args, monkeypatch, capsys).returncode == 0
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["wins"], got["losses"], got["ties"], got["parse_failures"]) == (2, 1, 2, 2)
    assert {p["prompt_id"]: p["votes"] for p in got["prompts"]}["p1"] == ["pick", "pick"]

    with FakeJudgeServer(always="A") as server:  # total position bias: the two orders always disagree
        args = winrate_args(picks, pool, server, tmp_path / "c2.sqlite", "--both-orders", "--output-json", out)
        assert run_winrate(args, monkeypatch, capsys).returncode == 0
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["wins"], got["losses"], got["ties"], got["win_rate"]) == (0, 0, 5, 0.5)
    assert got["judged_by"]["judge"]["consistency"] == {"pairs": 4, "consistent": 0, "rate": 0.0}


def test_one_order_follows_the_seed(tmp_path, monkeypatch, capsys):
    """The always-A judge makes the pick win exactly where the seed shows it first."""
    from cheems.judge.questions import shown_order

    ids = ["p1", "p2", "p3", "p5"]
    picks, pool = write_inputs(tmp_path, ids=ids)
    for seed in (3, 4):
        out = tmp_path / f"w{seed}.json"
        with FakeJudgeServer(always="A") as server:
            args = winrate_args(picks, pool, server, tmp_path / f"c{seed}.sqlite", "--seed", seed, "--output-json", out)
            assert run_winrate(args, monkeypatch, capsys).returncode == 0
        got = json.loads(out.read_text(encoding="utf-8"))
        first = [shown_order(seed, pid, "pick", "baseline") == "ab" for pid in ids]
        assert (got["wins"], got["losses"], got["ties"]) == (sum(first), len(ids) - sum(first), 0)


def test_reference_as_baseline_is_not_shown_as_the_reference(tmp_path, monkeypatch, capsys):
    picks, pool = write_inputs(tmp_path, field="reference", ids=["p1", "p2"])
    out = tmp_path / "w.json"
    with FakeJudgeServer() as server:
        args = winrate_args(picks, pool, server, tmp_path / "c.sqlite", "--output-json", out)
        args[args.index("gpt4")] = "reference"
        assert run_winrate(args, monkeypatch, capsys).returncode == 0
        users = [m["content"] for b in server.bodies for m in b["messages"] if m["role"] == "user"]
    assert len(users) == 2 and not any("[参考答案开始" in u for u in users)
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["wins"], got["losses"]) == (1, 1)


def test_server_fault_stops_the_run_and_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    picks, pool = write_inputs(tmp_path, ids=["p1", "p2", "p3", "p5"])
    cache, out = tmp_path / "c.sqlite", tmp_path / "w.json"

    def broken_for_p3(body: dict, attempt: int) -> str:
        return "500" if "p3的问题" in body["messages"][1]["content"] else "ok"

    with FakeJudgeServer(faults=broken_for_p3) as server:
        proc = run_winrate(winrate_args(picks, pool, server, cache, "--output-json", out), monkeypatch, capsys)
        port = server.httpd.server_address[1]
    assert_user_error(proc, "1 of 4 questions", "have no verdict", "HTTP 500", "rerun the same command")
    assert not out.exists()

    with FakeJudgeServer(port=port) as server:  # the same endpoint (part of the judge's identity)
        proc = run_winrate(winrate_args(picks, pool, server, cache, "--output-json", out), monkeypatch, capsys)
        assert proc.returncode == 0, proc.stderr
        assert server.total == 1  # only p3's question is asked again
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["wins"], got["losses"], got["ties"]) == (2, 1, 1)
    assert got["judged_by"]["judge"]["cached"] == 3 and got["judged_by"]["judge"]["judged"] == 1


def test_missing_pieces_are_one_line_errors_or_skipped_and_listed(tmp_path, monkeypatch, capsys):
    picks, pool = write_inputs(tmp_path, ids=["p1", "p2", "p5"])
    rows = pool_rows(ids=["p1", "p2", "p5"])
    del rows[1]["gpt4"]
    write_jsonl(pool, rows)
    with FakeJudgeServer() as server:
        args = winrate_args(picks, pool, server, tmp_path / "c.sqlite")
        proc = run_winrate(args, monkeypatch, capsys)
        assert_user_error(proc, f"{picks}:2", "prompt 'p2'", "no baseline text in field 'gpt4'", "--skip-missing")
        write_jsonl(picks, [{"prompt_id": "p1", "response_id": "nope", "score": 1}])
        assert_user_error(run_winrate(args, monkeypatch, capsys), f"{picks}:1", "response 'nope'")
        write_jsonl(picks, [{"prompt_id": "p9", "response_id": "qwen-1", "score": 1}])
        assert_user_error(run_winrate(args, monkeypatch, capsys), f"{picks}:1", "prompt 'p9' is not in")
        write_jsonl(picks, [{"prompt_id": pid, "response_id": "qwen-1", "score": 1} for pid in ("p1", "p2", "p5")])
        out = tmp_path / "w.json"
        proc = run_winrate([*args, "--skip-missing", "--output-json", out], monkeypatch, capsys)
        assert proc.returncode == 0, proc.stderr
        assert f"skipped {picks}:2" in proc.stderr and "1 line(s) skipped" in proc.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["n"], got["wins"]) == (2, 2)
    proc = run_main(
        "winrate", picks, "--pool", pool, "--baseline-field", "gpt4", monkeypatch=monkeypatch, capsys=capsys
    )
    assert_user_error(proc, "exactly one of --judge-model, --annotate or --from-export")
    proc = run_main(
        "winrate",
        picks,
        "--pool",
        pool,
        "--baseline-field",
        "gpt4",
        "--annotate",
        tmp_path / "project",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert_user_error(proc, "--people: is needed with --annotate")
    assert not (tmp_path / "project").exists()


# ---------------------------------------------------------------------------- people


def people_file(tmp_path: Path, annotators: int) -> Path:
    path = tmp_path / "people.yaml"
    lines = ["people:"] + [f"  - name: ann-{i}\n    role: annotator" for i in range(1, annotators + 1)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def answer_all(folder: Path, wants: dict[tuple[str, str], str]) -> int:
    """Every annotator answers every open task through the store: ``wants[(person, prompt)]`` is
    ``pick``, ``baseline`` or ``tie`` (the pick better, the baseline better, or equal)."""
    project = Project.open(folder)
    answered = 0
    for person in sorted({p for p, _ in wants}):
        while (item := project.next_item(person)) is not None:
            key = {rid: KEYS[i] for i, rid in enumerate(item.shown)}
            want = wants[(person, item.prompt_id)]
            pick, base = key["pick"], key["baseline"]
            ranking = {"pick": f"{pick}>{base}", "baseline": f"{base}>{pick}", "tie": f"{pick}={base}"}[want]
            scores = {pick: 4 if want != "baseline" else 2, base: 4 if want != "pick" else 2}
            project.submit(item.item_id, person, Answer(scores=scores, ranking=ranking))
            answered += 1
    project.close()
    return answered


def test_annotate_round_trip_one_annotator_per_prompt(tmp_path, monkeypatch, capsys):
    picks, pool = write_inputs(tmp_path, ids=["p1", "p2", "p3"])
    folder, exported, out = tmp_path / "project", tmp_path / "exported.jsonl", tmp_path / "w.json"
    base = ["winrate", picks, "--pool", pool, "--baseline-field", "gpt4"]
    proc = run_main(
        *base, "--annotate", folder, "--people", people_file(tmp_path, 1), monkeypatch=monkeypatch, capsys=capsys
    )
    assert proc.returncode == 0, proc.stderr
    assert "planned 3 pairwise tasks" in proc.stdout and f"cheems annotate serve {folder}" in proc.stdout
    assert "--from-export exported.jsonl" in proc.stdout

    snapshot = Project.open(folder).snapshot()
    record = snapshot.prompts["p1"]
    assert [(r.id, r.content, r.model) for r in record.responses] == [
        ("pick", "★好", "qwen"),
        ("baseline", "很长很长的基线回答", "baseline:gpt4"),
    ]
    assert (record.responses[0].model_extra or {})["pool_id"] == "qwen-1"

    wants = {("ann-1", "p1"): "pick", ("ann-1", "p2"): "baseline", ("ann-1", "p3"): "tie"}
    assert answer_all(folder, wants) == 3
    assert (
        run_main("annotate", "export", folder, "-o", exported, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    )
    proc = run_main(*base, "--from-export", exported, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["n"], got["wins"], got["losses"], got["ties"], got["win_rate"]) == (3, 1, 1, 1, 0.5)
    assert {p["prompt_id"]: p["votes"] for p in got["prompts"]} == {"p1": ["pick"], "p2": ["baseline"], "p3": ["tie"]}
    assert got["judged_by"]["people"] == ["ann-1"]


def test_annotate_round_trip_majority_of_two_and_unfinished_export(tmp_path, monkeypatch, capsys):
    picks, pool = write_inputs(tmp_path, ids=["p1", "p2", "p3"])
    folder, exported, out = tmp_path / "project", tmp_path / "exported.jsonl", tmp_path / "w.json"
    base = ["winrate", picks, "--pool", pool, "--baseline-field", "gpt4"]
    people = people_file(tmp_path, 2)
    args = [*base, "--annotate", folder, "--people", people, "--overlap", 2]
    assert run_main(*args, monkeypatch=monkeypatch, capsys=capsys).returncode == 0

    # only ann-1 has answered, and the export has lost p3: reading back stops
    assert answer_all(folder, {("ann-1", "p1"): "pick", ("ann-1", "p2"): "pick", ("ann-1", "p3"): "pick"}) == 3
    assert (
        run_main("annotate", "export", folder, "-o", exported, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    )
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    write_jsonl(exported, [r for r in records if r["id"] != "p3"])
    proc = run_main(*base, "--from-export", exported, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "1 of 3 prompts have no human answer yet", "'p3'", "cheems annotate export")

    # ann-2: p1 pick (2-0 win), p2 baseline (1-1 tie), p3 tie (1-0 win)
    assert answer_all(folder, {("ann-2", "p1"): "pick", ("ann-2", "p2"): "baseline", ("ann-2", "p3"): "tie"}) == 3
    assert (
        run_main("annotate", "export", folder, "-o", exported, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    )
    proc = run_main(*base, "--from-export", exported, "--output-json", out, monkeypatch=monkeypatch, capsys=capsys)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(out.read_text(encoding="utf-8"))
    assert (got["wins"], got["losses"], got["ties"]) == (2, 0, 1)
    assert got["win_rate"] == pytest.approx(2.5 / 3)
    assert sorted({p["prompt_id"]: p["votes"] for p in got["prompts"]}["p2"], key=str) == ["baseline", "pick"]

    # an export of other picks is refused
    write_jsonl(pool, [{**r, "gpt4": "别的基线"} for r in pool_rows(ids=["p1", "p2", "p3"])])
    proc = run_main(*base, "--from-export", exported, monkeypatch=monkeypatch, capsys=capsys)
    assert_user_error(proc, "prompt 'p1'", "not this pick and baseline")
