"""The annotation app through its JSON API, against a real server on loopback (``cheems annotate serve``)."""

from __future__ import annotations

import json

import pytest

from annotate_server import Server, answer, ids_of, make_project, prompt, team
from cheems.annotate.store import Project
from helpers import run_cheems


def test_auth_roles_and_every_422(serve_project):
    s, tokens = serve_project([prompt("p1", 3)], team(annotators=2), review_rate=0.0)
    assert s.client(None).get("/api/next").status_code == 401
    assert s.client("not-a-token").get("/api/next").status_code == 401
    ann, other = s.client(tokens["ann-01"]), s.client(tokens["ann-02"])
    if ann.get("/api/next").status_code == 204:  # one task, one annotator: whoever the plan chose
        ann, other = other, ann
    task = ann.get("/api/next").json()
    assert [r["key"] for r in task["responses"]] == ["A", "B", "C"] and task["kind"] == "annotate"
    assert other.get("/api/next").status_code == 204
    assert other.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r2>r3")).status_code == 403
    assert ann.post("/api/tasks/nope/submit", json=answer(task, "r1>r2>r3")).status_code == 404
    assert ann.get("/api/status").status_code == 403
    url = f"/api/tasks/{task['item_id']}/submit"
    bad = {
        "unknown key": {"scores": {"A": 4, "B": 2, "D": 1}, "ranking": "A>B>D"},
        "score above 5": {"scores": {"A": 6, "B": 2, "C": 1}, "ranking": "A>B>C"},
        "negative score": {"scores": {"A": -1, "B": 2, "C": 1}, "ranking": "B>C>A"},
        "key missing from ranking": {"scores": {"A": 4, "B": 2, "C": 1}, "ranking": "A>B"},
        "key named twice": {"scores": {"A": 4, "B": 2, "C": 1}, "ranking": "A>B>C=A"},
        "ranking contradicts scores": {"scores": {"A": 4, "B": 2, "C": 4}, "ranking": "B>A>C"},
        "not a number": {"scores": {"A": "4", "B": 2, "C": 1}, "ranking": "A>B>C"},
        "unknown field": {"scores": {"A": 4, "B": 2, "C": 1}, "ranking": "A>B>C", "extra": 1},
    }
    for why, body in bad.items():
        r = ann.post(url, json=body)
        assert r.status_code == 422, why
        assert r.json()["detail"] and "\n" not in r.json()["detail"], why
    assert "override" in ann.post(url, json=bad["ranking contradicts scores"]).json()["detail"]
    assert ann.post(url, content=b"{not json", headers={"content-type": "application/json"}).status_code == 422
    assert ann.get("/api/next").json()["item_id"] == task["item_id"]  # nothing was stored
    ok = ann.post(url, json={**bad["ranking contradicts scores"], "override": True})
    assert ok.status_code == 200
    assert ann.post(url, json={**bad["ranking contradicts scores"], "override": True}).status_code == 409
    assert ann.get("/api/next").status_code == 204


def test_review_reject_returns_the_task_and_the_answer_again_is_reviewed_again(serve_project):
    s, tokens = serve_project([prompt("p1", 3)], team(annotators=1, reviewers=1), review_rate=1.0)
    ann, rev = s.client(tokens["ann-01"]), s.client(tokens["rev-01"])
    task = ann.get("/api/next").json()
    assert ann.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r2=r3")).status_code == 200
    item = rev.get("/api/next").json()
    assert item["kind"] == "review" and item["responses"] == task["responses"]
    assert item["answer"]["ranking"] == answer(task, "r1>r2=r3")["ranking"]
    assert "annotator" not in item  # the reviewer judges the answer, not the person (and gold reviews look alike)
    url = f"/api/tasks/{item['item_id']}/review"
    assert rev.post(url, json={"approve": False}).status_code == 422  # a rejection needs a reason
    assert ann.post(url, json={"approve": True}).status_code == 403
    assert rev.post(f"/api/tasks/{item['item_id']}/submit", json=answer(task, "r1>r2>r3")).status_code == 409
    assert rev.post(url, json={"approve": False, "reason": "r2 有事实错误"}).status_code == 200
    returned = ann.get("/api/next").json()
    assert returned["item_id"] == task["item_id"] and returned["returned_reason"] == "r2 有事实错误"
    assert ann.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r3>r2")).status_code == 200
    again = rev.get("/api/next").json()
    assert again["item_id"] != item["item_id"] and again["answer"]["ranking"] == answer(task, "r1>r3>r2")["ranking"]
    assert rev.post(f"/api/tasks/{again['item_id']}/review", json={"approve": True}).status_code == 200
    assert rev.get("/api/next").status_code == 204
    snap = Project.open(s.folder).snapshot()
    assert [i.state for i in snap.items if i.kind == "annotate"] == ["approved"]
    assert [(r.approve, r.reason) for r in snap.reviews] == [(False, "r2 有事实错误"), (True, "")]


def test_export_then_resolve_gives_the_expected_ranks(serve_project, tmp_path, cheems_cli):
    # 5 responses: 5 ring tasks, 5 annotators, each answers the true order r1 > r2 > r3 > r4 > r5 ...
    # ... except the annotator of the task holding r4 and r5 adjacent in plan order, who ties them.
    s, tokens = serve_project([prompt("p1", 5)], team(annotators=5), review_rate=0.0)
    answered = 0
    for name in (f"ann-{i:02d}" for i in range(1, 6)):
        client = s.client(tokens[name])
        task = client.get("/api/next").json()
        ids = sorted(ids_of(task).values(), key=lambda r: int(r[1:]))
        assert client.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, ">".join(ids))).status_code == 200
        answered += 1
        assert client.get("/api/next").status_code == 204  # each task of a prompt to a different annotator
    out, ranked = tmp_path / "human.jsonl", tmp_path / "ranked.jsonl"
    proc = cheems_cli("annotate", "export", s.folder, "-o", out)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text(encoding="utf-8"))
    assert len(record["comparisons"]) == 15 and len(record["human_annotations"]) == 5
    c = record["comparisons"][0]
    assert c["source"] == "human" and c["annotator"].startswith("ann-") and c["task_id"].startswith("p1#t")
    assert c["shown"] in ("ab", "ba")
    assert cheems_cli("resolve", out, "-o", ranked).returncode == 0
    assert json.loads(ranked.read_text(encoding="utf-8"))["rank"] == {f"r{i}": i for i in range(1, 6)}


def test_shown_order_is_per_annotator_and_exported(serve_project, tmp_path, cheems_cli):
    s, tokens = serve_project([prompt(f"p{i}", 3) for i in range(8)], team(annotators=2), overlap=2, review_rate=0.0)
    orders = {}
    for name in ("ann-01", "ann-02"):
        client = s.client(tokens[name])
        while (r := client.get("/api/next")).status_code == 200:
            task = r.json()
            orders.setdefault(task["prompt"], []).append([ids_of(task)[k] for k in "ABC"])
            client.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r2>r3"))
    assert len(orders) == 8 and any(a != b for a, b in orders.values())  # shuffled per person
    out = tmp_path / "out.jsonl"
    assert cheems_cli("annotate", "export", s.folder, "-o", out).returncode == 0
    for line in out.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        for c in rec["comparisons"]:
            shown = orders[rec["input"]][0 if c["annotator"] == "ann-01" else 1]
            assert c["shown"] == ("ab" if shown.index(c["a"]) < shown.index(c["b"]) else "ba")


def test_adjudication_when_overlapping_answers_disagree(serve_project, tmp_path, cheems_cli):
    s, tokens = serve_project([prompt("p1", 3)], team(annotators=2), overlap=2, review_rate=0.0)
    a1, a2, rev = (s.client(tokens[n]) for n in ("ann-01", "ann-02", "rev-01"))
    t1, t2 = a1.get("/api/next").json(), a2.get("/api/next").json()
    assert t1["item_id"] != t2["item_id"]  # double-blind: each has an own item for the same plan task
    assert a1.post(f"/api/tasks/{t1['item_id']}/submit", json=answer(t1, "r1>r2>r3")).status_code == 200
    assert rev.get("/api/next").status_code == 204  # not before every copy is in
    assert a2.post(f"/api/tasks/{t2['item_id']}/submit", json=answer(t2, "r3>r2>r1")).status_code == 200
    adj = rev.get("/api/next").json()
    assert adj["kind"] == "adjudicate" and sorted(a["annotator"] for a in adj["answers"]) == ["ann-01", "ann-02"]
    discussion = a1.get("/api/discussions").json()
    assert len(discussion) == 1 and discussion[0]["consensus"] is None
    assert sorted(a["annotator"] for a in discussion[0]["answers"]) == ["other", "you"]  # still double-blind
    assert rev.post(f"/api/tasks/{adj['item_id']}/submit", json=answer(adj, "r1>r2=r3")).status_code == 200
    assert a2.get("/api/discussions").json()[0]["consensus"]["ranking"] == answer(adj, "r1>r2=r3")["ranking"]
    out = tmp_path / "out.jsonl"
    assert cheems_cli("annotate", "export", s.folder, "-o", out).returncode == 0
    comps = json.loads(out.read_text(encoding="utf-8"))["comparisons"]
    assert {(c["a"], c["b"], c["label"]) for c in comps} == {("r1", "r2", "a"), ("r1", "r3", "a"), ("r2", "r3", "tie")}
    assert all(c["annotator"] == "rev-01" and c["adjudicated"] for c in comps)


def test_agreeing_overlap_needs_no_adjudication(serve_project):
    s, tokens = serve_project([prompt("p1", 3)], team(annotators=2), overlap=2, review_rate=0.0)
    for name in ("ann-01", "ann-02"):
        client = s.client(tokens[name])
        task = client.get("/api/next").json()
        client.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r2>r3"))
    assert s.client(tokens["rev-01"]).get("/api/next").status_code == 204


def test_gold_is_planted_invisibly_for_annotators_and_reviewers(serve_project):
    gold = prompt("g1", 3, rank={"r1": 1, "r2": 2, "r3": 3})
    s, tokens = serve_project([prompt("p1", 3), prompt("p2", 3)], team(annotators=1), gold=[gold], review_rate=0.5)
    ann, rev = s.client(tokens["ann-01"]), s.client(tokens["rev-01"])
    seen = []
    while (r := ann.get("/api/next")).status_code == 200:
        task = r.json()
        assert set(task) == {"item_id", "kind", "prompt", "sys_prompt", "reference", "category", "responses"}
        seen.append(task["prompt"])
        ann.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r2>r1>r3"))
    assert sorted(seen) == ["问题 g1", "问题 p1", "问题 p2"]
    verdicts = []
    while (r := rev.get("/api/next")).status_code == 200:
        item = r.json()
        assert set(item) == {"item_id", "kind", "prompt", "sys_prompt", "reference", "category", "responses", "answer"}
        verdicts.append(item["prompt"])
        rev.post(f"/api/tasks/{item['item_id']}/review", json={"approve": True})
    assert "问题 g1" in verdicts
    snap = Project.open(s.folder).snapshot()
    gold_review = [r for r in snap.reviews if r.gold]
    assert len(gold_review) == 1 and gold_review[0].correct is not None
    gold_answer = [a for a in snap.answers if a.task_id.startswith("g1#")]
    assert len(gold_answer) == 1  # stored, but never exported
    assert "g1" not in snap.prompts and "g1" in snap.gold
    report = s.client(tokens["lead"]).get("/api/status").json()
    # gold r1 > r2 > r3 answered r2 > r1 > r3: (r1, r2) wrong, (r1, r3) and (r2, r3) right
    assert report["gold"]["ann-01"]["accuracy"] == pytest.approx(2 / 3)
    assert report["gold"]["rev-01"]["accuracy"] == float(gold_review[0].correct)
    assert report["progress"]["tasks"] == 2  # gold tasks are not progress


def test_acknowledged_submissions_survive_sigkill_and_restart(serve_project):
    records = [prompt(f"p{i}", 3) for i in range(30)]
    s, tokens = serve_project(records, team(annotators=1), review_rate=0.0)
    ann = s.client(tokens["ann-01"])
    acknowledged = []
    for _ in range(30):
        task = ann.get("/api/next").json()
        r = ann.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r2>r3"))
        assert r.status_code == 200
        acknowledged.append(task["item_id"])
    s.kill()  # right after the last 200
    again = Server(s.folder).start()  # the lock died with the process: a restart works at once
    try:
        assert again.client(tokens["ann-01"]).get("/api/next").status_code == 204
        snap = Project.open(s.folder).snapshot()
        assert sorted(a.item_id for a in snap.answers) == sorted(acknowledged)
    finally:
        again.stop()


def test_a_second_server_of_the_same_project_is_refused(serve_project):
    s, _ = serve_project([prompt("p1", 3)], team(annotators=1))
    proc = run_cheems("annotate", "serve", s.folder, "--port", "1", timeout=60)
    assert proc.returncode == 2
    assert "already being served" in proc.stderr and "Traceback" not in proc.stderr


def test_a_taken_port_is_a_one_line_error(tmp_path):
    import socket

    make_project(tmp_path / "project", [prompt("p1", 3)], team(annotators=1))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = run_cheems("annotate", "serve", tmp_path / "project", "--port", taken.getsockname()[1], timeout=60)
    assert proc.returncode == 2 and "--port" in proc.stderr and "Traceback" not in proc.stderr
    assert "serving" not in proc.stdout


def test_hostile_answers_and_verdicts_get_a_short_refusal_and_store_nothing(serve_project):
    s, tokens = serve_project([prompt("p1", 3)], team(annotators=1), review_rate=1.0)
    ann, rev = s.client(tokens["ann-01"]), s.client(tokens["rev-01"])
    task = ann.get("/api/next").json()
    url = f"/api/tasks/{task['item_id']}/submit"
    ok = answer(task, "r1>r2>r3")
    span = {"key": "A", "start": 0, "end": 1, "label": "factual"}
    lone = '"\\ud800"'  # JSON text of a lone surrogate, which no UTF-8 file (nor SQLite) can hold
    sent = {
        "lone surrogate in the note": json.dumps(ok)[:-1] + ', "note": ' + lone + "}",
        "lone surrogate in a span comment": json.dumps({**ok, "spans": [{**span, "comment": "X"}]}).replace(
            '"X"', lone
        ),
        "lone surrogate in a span text": json.dumps({**ok, "spans": [{**span, "text": "X"}]}).replace('"X"', lone),
        "lone surrogate in a score's key": json.dumps(ok).replace('"A"', '"A\\udc00"', 1),
        "lone surrogate in the ranking": json.dumps({**ok, "ranking": "X"}).replace('"X"', lone),
        "100,000-deep JSON": "[" * 100_000 + "]" * 100_000,
        "not UTF-8": "\udcff{",  # sent as the byte 0xFF
        "note too long": json.dumps({**ok, "note": "长" * 5_001}),
        "comment too long": json.dumps({**ok, "spans": [{**span, "comment": "长" * 1_001}]}),
        "too many spans": json.dumps({**ok, "spans": [span] * 201}),
        "ranking too long": json.dumps({**ok, "ranking": "A>" * 60 + "B>C"}),
        "a long key": json.dumps({**ok, "scores": {**ok["scores"], "K" * 500: 1}}),
        "a long unknown field": json.dumps({**ok, "F" * 500: 1}),
    }
    for why, body in sent.items():
        raw = body.encode("utf-8", "surrogateescape")
        r = ann.post(url, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422, why
        detail = r.json()["detail"]
        assert "\n" not in detail and len(detail) < 200, (why, detail)
        assert "长长" not in detail and "KKKK" + "K" * 30 not in detail and "FFFF" + "F" * 30 not in detail, why
    huge = json.dumps({**ok, "note": "x" * (2 << 20)}).encode()
    r = ann.post(url, content=huge, headers={"content-type": "application/json"})
    assert r.status_code == 413 and len(r.json()["detail"]) < 100 and "xxxx" not in r.json()["detail"]
    assert Project.open(s.folder).snapshot().answers == []  # nothing stored, the server still answers
    assert ann.post(url, json={**ok, "note": "\u200b\u2060 \ufeff"}).status_code == 200
    assert Project.open(s.folder).snapshot().answers[0].note == ""  # zero-width only: no note

    review = f"/api/tasks/{rev.get('/api/next').json()['item_id']}/review"
    for reason in ("\ud800", "原" * 5_001, "\u200b\u200c\u200d\ufeff\u2060 \u3164"):
        body = json.dumps({"approve": False, "reason": reason}).encode()  # ensure_ascii: "\ud800" as an escape
        r = rev.post(review, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "\n" not in r.json()["detail"] and "原原" not in r.json()["detail"], reason
    assert "needs a reason" in r.json()["detail"]  # zero-width characters are no reason
    assert Project.open(s.folder).snapshot().reviews == []
    assert rev.post(review, json={"approve": False, "reason": " 标注 "}).status_code == 200
    assert [r.reason for r in Project.open(s.folder).snapshot().reviews] == ["标注"]
    s.stop()
    assert "Traceback" not in s.proc.stderr.read().decode()  # no request failed inside the server


def test_the_system_prompt_reaches_the_api_and_the_export_names_the_item_submitted(serve_project, tmp_path, cheems_cli):
    record = prompt("p1", 3).model_copy(update={"sys_prompt": "你是一位严谨的数学老师，只用中文回答。"})
    s, tokens = serve_project([record], team(annotators=1), review_rate=0.0)
    ann = s.client(tokens["ann-01"])
    task = ann.get("/api/next").json()
    assert task["sys_prompt"] == "你是一位严谨的数学老师，只用中文回答。"
    r = ann.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, "r1>r2>r3"))
    assert r.json() == {"item_id": task["item_id"], "status": "submitted"}
    out = tmp_path / "human.jsonl"
    assert cheems_cli("annotate", "export", s.folder, "-o", out).returncode == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    # the submission is traced end to end: the API's item_id, beside the plan task it is a copy of
    assert {(c["item_id"], c["task_id"]) for c in exported["comparisons"]} == {(task["item_id"], "p1#t1")}
    [note] = exported["human_annotations"]
    assert (note["item_id"], note["task_id"]) == (task["item_id"], "p1#t1")
