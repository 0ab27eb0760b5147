"""The annotation pages in a real headless Chromium (Playwright) against a real ``cheems annotate serve``.

An annotator logs in with a token, scores with clicks and keys, compares equal scores, marks a
span, sees the live warning when the ranking contradicts the scores and submits with the override;
the answer is then in the project file. Hostile text in prompts and responses shows as text and
never runs. Screenshots go to ``tests/artifacts/`` (gitignored).

Skipped, with the reason, where the ``playwright`` package or a Chromium binary is missing
(``.ci/run`` installs Debian's ``chromium`` when it can).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[test]')"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium binary on PATH (Debian: apt-get install chromium fonts-noto-cjk)"
)

from annotate_server import Server, answer, prompt, team  # noqa: E402
from cheems.data.schema import Record  # noqa: E402

expect = sync_api.expect
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
WAIT_MS = 10_000

CHAT = Record.model_validate(
    {
        "id": "chat-1",
        "input": [
            {"role": "user", "content": "用 Python 写一个函数，返回列表中的最大值。"},
            {"role": "assistant", "content": "可以用内置的 `max`。要我写成完整的函数吗？"},
            {"role": "user", "content": "要，顺便说明空列表怎么处理。"},
        ],
        "category": ["代码"],
        "reference": "```python\ndef biggest(xs):\n    return max(xs) if xs else None\n```",
        "responses": [
            {
                "id": "r1",
                "content": "```python\ndef biggest(xs):\n    if not xs:\n        return None\n"
                "    return max(xs)\n```\n\n| 输入 | 输出 |\n|---|---|\n| [3, 1, 2] | 3 |\n| [] | None |",
            },
            {"id": "r2", "content": "直接 `max(xs)` 就行，空列表会报错。"},
            {"id": "r3", "content": "先排序再取最后一个😀，第二句是错的：sorted 会改变原列表。"},
        ],
    }
)

HOSTILE = Record.model_validate(
    {
        "id": "xss-1",
        "input": "<img src=x onerror=\"window.__xss='prompt'\"> 请回答",
        "category": ["安全<b>"],
        "reference": "<script>window.__xss='reference'</script>",
        "responses": [
            {"id": "h1", "content": "<img src=x onerror=\"window.__xss='img'\">图片"},
            {"id": "h2", "content": "<script>window.__xss='script'</script>脚本"},
            {"id": "h3", "content": "[点我](javascript:window.__xss='link') 和 <JAVASCRIPT:window.__xss='auto'>"},
        ],
    }
)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium refuses its sandbox as root
        launched = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args, timeout=WAIT_MS * 3)
        yield launched
        launched.close()


@pytest.fixture
def serve(serve_project):
    """Make a project of ``records`` and serve it: by default one annotator, one reviewer, one admin, and
    every submission reviewed. Returns (server, tokens, project folder)."""

    def start(records: list[Record], annotators: int = 1, **settings) -> tuple[Server, dict[str, str], Path]:
        server, tokens = serve_project(records, team(annotators=annotators), **{"review_rate": 1.0, **settings})
        return server, tokens, server.folder

    return start


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="zh-CN")
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    opened.dialogs = []  # an alert() from a payload would land here
    opened.on("dialog", lambda d: (opened.dialogs.append(d.message), d.dismiss()))
    opened.errors = []
    opened.on("pageerror", lambda e: opened.errors.append(str(e)))
    yield opened
    context.close()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    where = page.evaluate("[window.scrollX, window.scrollY]")
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    # A full-page shot resizes the viewport for a moment and Chromium moves the scroll back only at the next
    # input: a click right after would land 80 px off. Scroll back now.
    page.evaluate("([x, y]) => window.scrollTo(x, y)", where)


def login(page, server: Server, token: str, lands_on: str) -> None:
    page.goto(server.url + "/login")
    page.fill("#token", token)
    page.click("form[action='/login'] button[type=submit]")
    page.wait_for_url(server.url + lands_on)


def key_of(page, text: str) -> str:
    """The key (A, B, C) under which this page shows the response containing ``text``."""
    return page.locator(".response", has_text=text).get_attribute("data-key")


SELECT_TEXT = """([key, needle]) => {
  const root = document.querySelector(`.response-body[data-key="${key}"]`);
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const at = node.data.indexOf(needle);
    if (at === -1) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + needle.length);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    return true;
  }
  return false;
}"""


def test_annotator_scores_sees_the_contradiction_overrides_and_submits(serve, page):
    server, tokens, folder = serve([CHAT])
    login(page, server, tokens["ann-01"], "/annotate")
    assert "今日已完成 0 项" in page.text_content("#progress")
    assert page.locator(".turn").count() == 3
    key = {rid: key_of(page, text) for rid, text in (("r1", "def biggest"), ("r2", "直接"), ("r3", "先排序"))}
    assert sorted(key.values()) == ["A", "B", "C"]
    assert page.locator(f'.response[data-key="{key["r1"]}"] table').count() == 1  # Markdown table rendered
    assert page.locator(f'.response[data-key="{key["r1"]}"] pre code').count() == 1
    assert page.text_content(f'.response[data-key="{key["r3"]}"] .count') == "32 字符"  # Python's len: 😀 is one
    shot(page, "annotate-start")

    # r1: 4 and r3: 4 by click, r2: 2 by key (pick with Shift+digit, then the score)
    page.click(f'.score-button[data-key="{key["r1"]}"][data-score="4"]')
    page.click(f'.score-button[data-key="{key["r3"]}"][data-score="4"]')
    page.keyboard.press("Shift+" + str("ABC".index(key["r2"]) + 1))
    page.keyboard.press("2")
    assert page.get_attribute(f'.score-button[data-key="{key["r2"]}"][data-score="2"]', "aria-pressed") == "true"
    first, second = sorted([key["r1"], key["r3"]])
    assert page.input_value("#ranking") == f"{first}={second}>{key['r2']}"
    assert page.is_disabled("#submit")  # the equal scores are not compared yet
    assert page.text_content(".pair-label") == f"{first} 对比 {second}（同为 4 分）"
    page.keyboard.press("g" if first == key["r1"] else "b")  # r1 is better than r3
    assert page.input_value("#ranking") == f"{key['r1']}>{key['r3']}>{key['r2']}"
    assert page.is_enabled("#submit")

    # a span marked in the rendered text: offsets count code points of the raw text (😀 is one)
    assert page.evaluate(SELECT_TEXT, [key["r3"], "第二句是错的"])
    page.dispatch_event(f'.response-body[data-key="{key["r3"]}"]', "mouseup")
    page.click('#span-menu .span-label-button[data-label="factual"]')
    assert page.text_content(f'.span-list[data-key="{key["r3"]}"] li .span-tag') == "事实错误"
    page.check(f'.flag-box[data-key="{key["r2"]}"][value="unusable"]')
    page.fill("#note", "r2 没有处理空列表")

    # a ranking that puts the 2-point r2 first contradicts the scores: live warning, submit blocked until override
    page.fill("#ranking", f"{key['r2']}>{key['r1']}>{key['r3']}")
    assert page.is_visible("#contradiction")
    assert page.text_content("#contradiction-text") == (
        f"{first}（4 分）排在 {key['r2']}（2 分）之后；{second}（4 分）排在 {key['r2']}（2 分）之后"
    )
    assert page.is_disabled("#submit")
    shot(page, "annotate-contradiction")
    page.check("#override")
    assert page.is_enabled("#submit")
    page.click("#submit")
    page.wait_for_url(server.url + "/annotate?done=submitted")
    assert "队列已空" in page.text_content("h1")
    assert "今日已完成 1 项" in page.text_content("#progress")
    assert page.dialogs == [] and page.errors == []

    from cheems.annotate.store import Project

    [answer] = Project.open(folder).snapshot().answers
    assert answer.person == "ann-01"
    assert answer.scores == {"r1": 4, "r2": 2, "r3": 4}
    assert answer.levels == [["r2"], ["r1"], ["r3"]]
    text = CHAT.responses[2].content
    start = text.index("第二句是错的")
    assert start == 11
    assert answer.spans == [
        {
            "key": key["r3"],
            "response": "r3",
            "start": start,
            "end": start + 6,
            "label": "factual",
            "text": "第二句是错的",
            "comment": "",
        }
    ]
    assert answer.flags == {"r2": ["unusable"]}
    assert answer.note == "r2 没有处理空列表"


def test_fixing_the_ranking_clears_the_warning_and_a_raw_view_span_maps_exactly(serve, page):
    server, tokens, folder = serve([CHAT])
    login(page, server, tokens["ann-01"], "/annotate")
    key = {rid: key_of(page, text) for rid, text in (("r1", "def biggest"), ("r2", "直接"), ("r3", "先排序"))}
    for rid, score in (("r1", 5), ("r2", 1), ("r3", 3)):
        page.click(f'.score-button[data-key="{key[rid]}"][data-score="{score}"]')
    page.fill("#ranking", f"{key['r3']}>{key['r1']}>{key['r2']}")
    assert page.is_visible("#contradiction") and page.is_disabled("#submit")
    page.fill("#ranking", f"{key['r1'].lower()}＞{key['r3']}＞{key['r2']}")  # full-width and lower case are read too
    assert page.input_value("#ranking") == f"{key['r1']}>{key['r3']}>{key['r2']}"
    assert page.is_hidden("#contradiction") and page.is_enabled("#submit")

    # the raw view: select 😀 and the two characters after it
    card = f'.response[data-key="{key["r3"]}"]'
    page.click(f"{card} .view-toggle")
    raw = f'.response-raw[data-key="{key["r3"]}"]'
    assert page.text_content(raw) == CHAT.responses[2].content
    page.evaluate(
        """(sel) => { const node = document.querySelector(sel).firstChild; const r = document.createRange();
        const at = node.data.indexOf("😀"); r.setStart(node, at); r.setEnd(node, at + 4);
        getSelection().removeAllRanges(); getSelection().addRange(r); }""",
        raw,
    )
    page.dispatch_event(raw, "mouseup")
    page.click('#span-menu .span-label-button[data-label="garbled"]')
    assert page.text_content(f"{raw} mark") == "😀，第"
    shot(page, "annotate-raw-span")
    page.click("#submit")
    page.wait_for_url(server.url + "/annotate?done=submitted")

    from cheems.annotate.store import Project

    [answer] = Project.open(folder).snapshot().answers
    assert answer.levels == [["r1"], ["r3"], ["r2"]]
    assert [(s["start"], s["end"], s["text"], s["label"]) for s in answer.spans] == [(9, 12, "😀，第", "garbled")]


def test_a_refused_answer_comes_back_filled_in(serve, page):
    server, tokens, folder = serve([CHAT])
    login(page, server, tokens["ann-01"], "/annotate")
    # what an out-of-date page could send: a ranking against the scores, no override (the server says no)
    sent = {"scores": {"A": 5, "B": 1, "C": 3}, "ranking": "C>B>A", "flags": {"B": ["garbled"]}, "note": "旧页面"}
    with page.expect_navigation():
        page.evaluate(
            "(answer) => { document.getElementById('answer').value = answer; HTMLFormElement.prototype.submit.call("
            "document.getElementById('answer-form')); }",
            json.dumps(sent),
        )
    # The refused page is parsed before its (deferred) script fills the form in: wait for the script's mark,
    # then let every check wait for its value, never read one before the page has set it.
    expect(page.locator("#answer-form")).to_have_attribute("data-ready", "true")
    expect(page.locator("#server-error")).to_contain_text("override")
    for k, score in sent["scores"].items():
        expect(page.locator(f'.score-button[data-key="{k}"][data-score="{score}"]')).to_have_attribute(
            "aria-pressed", "true"
        )
    expect(page.locator("#ranking")).to_have_value("C>B>A")
    expect(page.locator('.flag-box[data-key="B"][value="garbled"]')).to_be_checked()
    expect(page.locator("#note")).to_have_value("旧页面")
    expect(page.locator("#contradiction")).to_be_visible()
    expect(page.locator("#submit")).to_be_disabled()
    page.check("#override")
    page.click("#submit")
    page.wait_for_url(server.url + "/annotate?done=submitted")
    expect(page.locator("#done")).to_have_text("已提交 ✓ 答案已保存。")

    from cheems.annotate.store import Project

    [answer_row] = Project.open(folder).snapshot().answers
    assert answer_row.note == "旧页面" and list(answer_row.flags.values()) == [["garbled"]]


def test_the_system_prompt_is_shown_and_a_submit_is_confirmed_above_the_next_task(serve, page):
    tutor = "你是一位耐心的编程老师。回答要**简短**，并说明边界情况。"
    first, second = (prompt(pid).model_copy(update={"sys_prompt": tutor, "category": ["代码"]}) for pid in ("p1", "p2"))
    server, tokens, _ = serve([first, second], review_rate=0.0)
    login(page, server, tokens["ann-01"], "/annotate")
    expect(page.locator("#answer-form")).to_have_attribute("data-ready", "true")
    system = page.locator(".prompt .sys-prompt")
    expect(system.locator(".turn-role")).to_have_text("系统提示")
    expect(system.locator(".md")).to_contain_text("你是一位耐心的编程老师。回答要简短，并说明边界情况。")
    expect(system.locator(".md strong")).to_have_text("简短")  # Markdown, as the prompt itself
    expect(page.locator("#done")).to_have_count(0)  # nothing submitted yet: no confirmation
    for key, score in zip("ABC", (5, 3, 1)):
        page.click(f'.score-button[data-key="{key}"][data-score="{score}"]')
    page.click("#submit")
    page.wait_for_url(server.url + "/annotate?done=submitted")
    expect(page.locator("#done")).to_have_text("已提交 ✓ 答案已保存。下一项如下。")
    expect(page.locator("#progress")).to_contain_text("今日已完成 1 项")
    expect(page.locator(".prompt .sys-prompt .turn-role")).to_have_text("系统提示")  # the next task's
    shot(page, "annotate-submitted")
    assert page.dialogs == [] and page.errors == []


def test_hostile_text_is_shown_as_text_and_never_runs(serve, page):
    server, tokens, _ = serve([HOSTILE])
    login(page, server, tokens["ann-01"], "/annotate")
    page.click(".reference summary")
    for box in page.locator(".response-body").all():
        box.click()  # a click on text, not on a link: none is there
    shot(page, "annotate-hostile")
    assert page.evaluate("window.__xss") is None
    assert page.dialogs == []
    # the only script in the page body is the task's data, which a browser never runs
    assert page.locator("main script").evaluate_all("all => all.map(s => [s.id, s.type])") == [
        ["task-data", "application/json"]
    ]
    assert page.locator("main img, .md a, [onerror], [onload]").count() == 0
    assert page.locator("a[href^='javascript' i]").count() == 0
    text = page.text_content(".responses")
    assert "<img src=x onerror=\"window.__xss='img'\">图片" in text
    assert "<script>window.__xss='script'</script>脚本" in text
    assert "[点我](javascript:window.__xss='link')" in text
    assert "<img src=x onerror=" in page.text_content(".prompt")
    assert "<script>window.__xss='reference'</script>" in page.text_content(".reference")
    assert page.text_content(".prompt .tag") == "安全<b>"
    # the raw view too
    for card in page.locator(".response").all():
        card.locator(".view-toggle").click()
    assert page.locator(".response-raw script, .response-raw img").count() == 0
    assert page.evaluate("window.__xss") is None and page.errors == []


def test_reviewer_rejects_with_a_reason_and_the_task_returns_to_its_annotator(serve, page):
    server, tokens, folder = serve([CHAT])
    login(page, server, tokens["ann-01"], "/annotate")
    key = {rid: key_of(page, text) for rid, text in (("r1", "def biggest"), ("r2", "直接"), ("r3", "先排序"))}
    for rid, score in (("r1", 5), ("r2", 2), ("r3", 3)):
        page.click(f'.score-button[data-key="{key[rid]}"][data-score="{score}"]')
    page.click("#submit")
    page.wait_for_url(server.url + "/annotate?done=submitted")
    page.click("form[action='/logout'] button")
    page.wait_for_url(server.url + "/login")

    login(page, server, tokens["rev-01"], "/review")  # review_rate 1: every submission is reviewed
    # single-blind: the reviewer sees the annotator's answer, in the same keys
    assert page.text_content(".ranking-text") == f"{key['r1']}>{key['r3']}>{key['r2']}"
    assert page.text_content(f'.response[data-key="{key["r1"]}"] .given-score') == "5 分"
    shot(page, "review")
    page.click("#reject")  # the reason is required: the browser does not send the form
    assert page.url == server.url + "/review"
    page.fill("#reason", "r3 的错误没有标出来")
    page.click("#reject")
    page.wait_for_url(server.url + "/review?done=rejected")
    assert "队列已空" in page.text_content("h1")

    from cheems.annotate.store import Project

    annotate = [i for i in Project.open(folder).snapshot().items if i.kind == "annotate"]
    assert [(i.person, i.state) for i in annotate] == [("ann-01", "open")]
    page.click("form[action='/logout'] button")
    login(page, server, tokens["ann-01"], "/annotate")
    assert "r3 的错误没有标出来" in page.text_content(".notice")


def test_adjudication_discussion_and_dashboard_after_a_disagreement(serve, page):
    # two annotators on every task (overlap 2): they agree on p1 and disagree on two of p2's three pairs
    server, tokens, _ = serve([prompt("p1"), prompt("p2"), prompt("p3")], annotators=2, overlap=2, review_rate=0.0)
    rankings = {"ann-01": {"p1": "r1>r2>r3", "p2": "r1>r2>r3"}, "ann-02": {"p1": "r1>r2>r3", "p2": "r3>r1>r2"}}
    for person, mine in rankings.items():
        with server.client(tokens[person]) as api:
            for _ in range(3):
                task = api.get("/api/next").json()
                pid = task["responses"][0]["content"].split(" ")[0]
                if pid in mine:
                    ok = api.post(f"/api/tasks/{task['item_id']}/submit", json=answer(task, mine[pid]))
                    assert ok.status_code == 200, ok.text

    login(page, server, tokens["ann-01"], "/annotate")
    assert page.locator("h2", has_text="任务").count() == 0  # p3 is still in the queue
    page.goto(server.url + "/discussions")
    [discussion] = page.locator(".discussion").all()
    assert "等待裁决" in discussion.text_content()
    titles = discussion.locator(".answer-summary h3").all_text_contents()
    assert titles == ["您的答案", "另一位标注员的答案"] or titles == ["另一位标注员的答案", "您的答案"]
    assert "ann-02" not in discussion.text_content()  # double-blind: the other annotator stays unnamed
    shot(page, "discussions")
    page.click("form[action='/logout'] button")

    login(page, server, tokens["rev-01"], "/review")  # adjudications come first in the queue
    assert "裁决：标注员的答案分歧较大" in page.text_content(".adjudicate h2")
    assert page.locator(".adjudicate .answer-summary").count() == 2
    shot(page, "adjudicate")
    page.click("form[action='/logout'] button")

    login(page, server, tokens["lead"], "/dashboard")
    tiles = page.locator(".tile").all_inner_texts()
    assert [" ".join(t.split()) for t in tiles] == [
        "3 任务",
        "66.7% 标注完成（4/6）",
        "0 待审核",
        "1 待裁决",
        "0 退回待改",
        "50.0% 冲突率（6/12）",  # p2: every response in one cycle, so all 6 of its strict comparisons conflict
    ]
    assert page.text_content("#conflicts .cycle") == "r1 > r2 > r3 > r1"
    agreement = dict(
        zip(page.locator("#agreement th").all_text_contents(), page.locator("#agreement td").all_text_contents())
    )
    assert agreement["成对一致率"] == "66.7%"  # p1 3 of 3 pairs, p2 1 of 3
    assert agreement["低于一致性目标的任务"] == "1"
    shot(page, "dashboard")


def test_an_annotator_cannot_open_the_dashboard(serve, page):
    server, tokens, _ = serve([CHAT])
    login(page, server, tokens["ann-01"], "/annotate")
    response = page.goto(server.url + "/dashboard")
    assert response.status == 403
    assert "没有权限" in page.text_content("h1")
    assert page.locator("a[href='/dashboard']").count() == 0
