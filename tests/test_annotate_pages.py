"""The annotation app's pages over HTTP, against a real server on loopback: login and sessions, CSRF on
every form post, roles on every page, the form submit and review with the store's checks, and the
security headers. (The same pages in a real browser: test_annotate_browser.py.)"""

from __future__ import annotations

import json
import re

import httpx
import pytest

from annotate_server import Server, answer, ids_of, prompt, team
from cheems.annotate.store import Project


@pytest.fixture
def server(serve_project):
    """``server(records, people, **settings) -> (Server, tokens, project folder)``."""

    def start(records, people=None, **settings):
        s, tokens = serve_project(records, people, **settings)
        return s, tokens, s.folder

    return start


def form_csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def browser(s: Server) -> httpx.Client:
    """A client that keeps cookies, as a browser does, and does not follow redirects."""
    return httpx.Client(base_url=s.url, timeout=10)


def login(s: Server, token: str) -> tuple[httpx.Client, str]:
    """A logged-in client and its page CSRF token."""
    client = browser(s)
    r = client.post("/login", data={"token": token, "csrf": form_csrf(client.get("/login").text)})
    assert r.status_code == 303, r.text
    return client, form_csrf(client.get(r.headers["location"]).text)


def task_on(page: str) -> dict:
    """The task of an annotate page, in the API's shape (responses with key and content)."""
    data = json.loads(re.search(r'<script type="application/json" id="task-data">(.*?)</script>', page, re.S).group(1))
    return {"responses": [{"key": k, "content": data["texts"][k]} for k in data["keys"]], "draft": data["draft"]}


def item_id(page: str) -> str:
    return re.search(r'action="/tasks/([0-9a-f]{16})/(?:submit|review)"', page).group(1)


def test_login_sets_a_strict_httponly_session_and_goes_to_the_role_home(server):
    s, tokens, _ = server([prompt("p1")], team(annotators=1))
    client = browser(s)
    assert client.get("/annotate").headers["location"] == "/login?next=/annotate"
    assert client.get("/").headers["location"] == "/login"
    page = client.get("/login")
    assert "cheems_login" in client.cookies
    assert client.post("/login", data={"token": tokens["ann-01"], "csrf": "forged"}).status_code == 403
    refused = client.post("/login", data={"token": "not-a-token", "csrf": form_csrf(page.text)})
    assert refused.status_code == 401 and "令牌无效" in refused.text
    for elsewhere in ("//evil.example", "https://evil.example/", "/\\evil.example", "/\t/evil.example", "/%2F/evil"):
        nonce = form_csrf(client.get("/login").text)  # each login form is good for one login
        r = client.post("/login", data={"token": tokens["ann-01"], "csrf": nonce, "next": elsewhere})
        assert r.status_code == 303 and r.headers["location"] == "/annotate", elsewhere
    cookie = next(c for c in r.headers.get_list("set-cookie") if c.startswith("cheems_session="))
    assert {"HttpOnly", "Path=/", "SameSite=strict"} <= {part.strip() for part in cookie.split(";")}
    assert client.get("/").headers["location"] == "/annotate"
    home = client.get("/annotate")
    assert home.status_code == 200 and "ann-01（标注员）" in home.text
    for name, value in {
        "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
        "img-src 'self' http: https:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        "x-content-type-options": "nosniff",
        "cache-control": "no-store",
    }.items():
        assert home.headers[name] == value

    for person, place in (("rev-01", "/review"), ("lead", "/dashboard")):
        other = browser(s)
        r = other.post("/login", data={"token": tokens[person], "csrf": form_csrf(other.get("/login").text)})
        assert r.headers["location"] == place
    # a login form may send the browser on to a page of this site, never elsewhere
    r = client.post(
        "/login", data={"token": tokens["ann-01"], "csrf": form_csrf(client.get("/login").text), "next": "/discussions"}
    )
    assert r.headers["location"] == "/discussions"


def test_every_form_post_needs_the_session_csrf_token(server, tmp_path):
    s, tokens, folder = server([prompt("p1")], team(annotators=1), review_rate=1.0)
    client, csrf = login(s, tokens["ann-01"])
    page = client.get("/annotate").text
    item, task = item_id(page), task_on(page)
    body = json.dumps(answer(task, "r1>r2>r3"))
    for sent in ({}, {"csrf": ""}, {"csrf": csrf[:-1] + ("x" if csrf[-1] != "x" else "y")}):
        r = client.post(f"/tasks/{item}/submit", data={"answer": body, **sent})
        assert r.status_code == 403 and "CSRF" in r.text
        assert client.post("/logout", data=sent).status_code == 403
    assert Project.open(folder).snapshot().answers == []
    # another browser's session token is no good either
    _, other_csrf = login(s, tokens["ann-01"])
    assert client.post(f"/tasks/{item}/submit", data={"answer": body, "csrf": other_csrf}).status_code == 403
    assert client.post(f"/tasks/{item}/submit", data={"answer": body, "csrf": csrf}).status_code == 303
    assert len(Project.open(folder).snapshot().answers) == 1

    reviewer, review_csrf = login(s, tokens["rev-01"])
    review = item_id(reviewer.get("/review").text)
    assert reviewer.post(f"/tasks/{review}/review", data={"decision": "approve"}).status_code == 403
    assert reviewer.post(f"/tasks/{review}/review", data={"decision": "approve", "csrf": csrf}).status_code == 403
    assert Project.open(folder).snapshot().reviews == []
    assert reviewer.post("/logout", data={"csrf": review_csrf}).headers["location"] == "/login"
    assert reviewer.get("/review").status_code == 303  # the session is gone


def test_roles_are_enforced_on_every_page(server):
    s, tokens, _ = server([prompt("p1")], team(annotators=1))
    allowed = {
        "ann-01": {"/annotate", "/discussions"},
        "rev-01": {"/annotate", "/review"},
        "lead": {"/annotate", "/review", "/dashboard"},
    }
    for person, pages in allowed.items():
        client, _ = login(s, tokens[person])
        for place in ("/annotate", "/review", "/discussions", "/dashboard"):
            r = client.get(place)
            assert r.status_code == (200 if place in pages else 403), (person, place)
            if r.status_code == 403:
                assert "没有权限" in r.text
    anonymous = browser(s)
    for place in ("/annotate", "/review", "/discussions", "/dashboard", "/tasks/0123456789abcdef"):
        assert anonymous.get(place).headers["location"].startswith("/login?next=")
    for place in ("/tasks/0123456789abcdef/submit", "/tasks/0123456789abcdef/review"):
        assert anonymous.post(place, data={"csrf": "x"}).headers["location"].startswith("/login")


def test_form_submit_is_checked_like_the_api_and_a_refused_answer_comes_back(server):
    s, tokens, folder = server([prompt("p1"), prompt("p2")], team(annotators=2), review_rate=0.0)
    mine, csrf = login(s, tokens["ann-01"])
    theirs, their_csrf = login(s, tokens["ann-02"])
    page = mine.get("/annotate").text
    item, task = item_id(page), task_on(page)
    assert task["draft"] is None
    contradicting = answer(task, "r1>r2>r3")
    contradicting["ranking"] = contradicting["ranking"][::-1]  # C>B>A by key: the 5 ranked last
    r = mine.post(f"/tasks/{item}/submit", data={"answer": json.dumps(contradicting), "csrf": csrf})
    assert r.status_code == 422
    assert "提交未通过检查" in r.text and "override" in r.text
    assert task_on(r.text)["draft"] == contradicting  # the page starts again from what was sent
    r = mine.post(f"/tasks/{item}/submit", data={"answer": "{not json", "csrf": csrf})
    assert r.status_code == 422 and "答案数据无法解析" in r.text
    # another annotator's task: 403; no such task: 404
    assert theirs.post(f"/tasks/{item}/submit", data={"answer": "{}", "csrf": their_csrf}).status_code == 403
    assert theirs.get(f"/tasks/{item}").status_code == 403
    assert mine.post("/tasks/0123456789abcdef/submit", data={"answer": "{}", "csrf": csrf}).status_code == 404
    assert Project.open(folder).snapshot().answers == []

    ok = {**contradicting, "override": True, "note": "<b>备注</b>"}
    r = mine.post(f"/tasks/{item}/submit", data={"answer": json.dumps(ok), "csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/annotate?done=submitted"
    assert mine.post(f"/tasks/{item}/submit", data={"answer": json.dumps(ok), "csrf": csrf}).status_code == 409
    [stored] = Project.open(folder).snapshot().answers
    key = ids_of(task)
    assert stored.levels == [[key[k]] for k in ok["ranking"].split(">")]
    assert stored.note == "<b>备注</b>"
    assert "今日已完成 <strong>1</strong> 项" in mine.get("/annotate").text


def test_review_page_rejects_only_with_a_reason(server):
    s, tokens, folder = server([prompt("p1")], team(annotators=1), review_rate=1.0)
    ann, csrf = login(s, tokens["ann-01"])
    page = ann.get("/annotate").text
    ann.post(
        f"/tasks/{item_id(page)}/submit", data={"answer": json.dumps(answer(task_on(page), "r2>r1>r3")), "csrf": csrf}
    )
    reviewer, review_csrf = login(s, tokens["rev-01"])
    page = reviewer.get("/review").text
    review = item_id(page)
    key = {rid: k for k, rid in ids_of(task_on_review(page)).items()}
    assert f'<strong class="ranking-text">{key["r2"]}&gt;{key["r1"]}&gt;{key["r3"]}</strong>' in page
    for decision, reason, message in (
        ("reject", "", "退回时必须填写原因"),
        ("reject", "   ", "退回时必须填写原因"),
        ("maybe", "x", "请选择“通过”或“退回”"),
    ):
        r = reviewer.post(f"/tasks/{review}/review", data={"decision": decision, "reason": reason, "csrf": review_csrf})
        assert r.status_code == 422 and message in r.text, decision
    assert Project.open(folder).snapshot().reviews == []
    r = reviewer.post(f"/tasks/{review}/review", data={"decision": "reject", "reason": "理由", "csrf": review_csrf})
    assert r.status_code == 303 and r.headers["location"] == "/review?done=rejected"
    assert ann.get("/annotate").text.count("理由") == 1
    [verdict] = Project.open(folder).snapshot().reviews
    assert (verdict.person, verdict.approve, verdict.reason) == ("rev-01", False, "理由")
    assert ann.post(f"/tasks/{review}/review", data={"decision": "approve", "csrf": csrf}).status_code == 403


def task_on_review(page: str) -> dict:
    """The responses of a review page (key and content), as the API shows them."""
    found = re.findall(r'<div class="response-body md" data-key="([A-C])"><p>(.*?)</p>', page, re.S)
    return {"responses": [{"key": k, "content": text} for k, text in found]}


def test_static_files_only_the_two_known_ones(server):
    s, _, _ = server([prompt("p1")], team(annotators=1))
    client = browser(s)
    js = client.get("/static/app.js")
    assert js.status_code == 200 and js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert client.get("/static/app.css").headers["content-type"] == "text/css; charset=utf-8"
    for name in ("pages.py", "..%2Fpages.py", "%2E%2E%2Fstore.py", "index.html"):
        assert client.get(f"/static/{name}").status_code == 404, name


def test_hostile_form_posts_get_a_page_not_a_500_and_store_nothing(server):
    s, tokens, folder = server([prompt("p1")], team(annotators=1), review_rate=1.0)
    ann, csrf = login(s, tokens["ann-01"])
    page = ann.get("/annotate").text
    item, task = item_id(page), task_on(page)
    ok = answer(task, "r1>r2>r3")
    for sent, message in (
        (json.dumps(ok)[:-1] + ', "note": "\\ud800"}', "note: Value error, has a lone surrogate (U+D800)"),
        ("[" * 100_000 + "]" * 100_000, "答案数据无法解析"),
        ("{" * 50_000, "答案数据无法解析"),
        (json.dumps({**ok, "note": "长" * 5_001}), "note: String should have at most 5000 characters"),
    ):
        r = ann.post(f"/tasks/{item}/submit", data={"answer": sent, "csrf": csrf})
        assert r.status_code == 422 and message in r.text, message
        assert "长长" not in r.text.split('id="task-data"')[0]  # the message does not echo what was sent
    r = ann.post(f"/tasks/{item}/submit", data={"answer": json.dumps({**ok, "note": "x" * (2 << 20)}), "csrf": csrf})
    assert r.status_code == 413 and "xxxx" not in r.text
    assert Project.open(folder).snapshot().answers == []

    r = ann.post(f"/tasks/{item}/submit", data={"answer": json.dumps(ok), "csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/annotate?done=submitted"
    assert '<p class="done" role="status" id="done">已提交 ✓' in ann.get(r.headers["location"]).text
    assert 'id="done"' not in ann.get("/annotate?done=<b>x</b>").text  # only the app's own lines, never the query

    reviewer, review_csrf = login(s, tokens["rev-01"])
    review = item_id(reviewer.get("/review").text)
    for reason, message in (
        ("\u200b\u200c\u200d\ufeff\u2060 ", "退回时必须填写原因"),
        ("原" * 5_001, "reason: String should have at most 5000 characters"),
    ):
        r = reviewer.post(f"/tasks/{review}/review", data={"decision": "reject", "reason": reason, "csrf": review_csrf})
        assert r.status_code == 422 and message in r.text, message
        assert "原原" not in r.text
    assert Project.open(folder).snapshot().reviews == []
    r = reviewer.post(f"/tasks/{review}/review", data={"decision": "approve", "csrf": review_csrf})
    assert r.headers["location"] == "/review?done=approved"
    assert "已通过 ✓" in reviewer.get(r.headers["location"]).text
    s.stop()
    assert "Traceback" not in s.proc.stderr.read().decode()  # no request failed inside the server


def test_the_system_prompt_is_shown_labelled_on_every_page_of_the_task(server):
    record = prompt("p1").model_copy(update={"sys_prompt": "你是一位严谨的数学老师，<b>只用</b>中文回答。"})
    s, tokens, _ = server([record], team(annotators=1), review_rate=1.0)
    ann, csrf = login(s, tokens["ann-01"])
    page = ann.get("/annotate").text
    shown = '<div class="turn-role">系统提示</div>'
    assert shown in page and "你是一位严谨的数学老师，&lt;b&gt;只用&lt;/b&gt;中文回答。" in page
    sent = {"answer": json.dumps(answer(task_on(page), "r1>r2>r3")), "csrf": csrf}
    assert ann.post(f"/tasks/{item_id(page)}/submit", data=sent).status_code == 303
    reviewer, _ = login(s, tokens["rev-01"])
    assert shown in reviewer.get("/review").text  # the reviewer judges with it in view too
