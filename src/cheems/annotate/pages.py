"""The browser side of ``cheems annotate serve``: login, the annotation, review, discussion and dashboard pages.

Server-rendered Jinja2 pages (autoescaped; response text goes through :func:`.markdown.render`)
with a little JavaScript (``static/app.js``). A browser logs in once with its token and then holds
a session cookie (``cheems_session``: HttpOnly, SameSite=Strict); every form POST carries the
session's CSRF token in a hidden ``csrf`` field. The pages call the same :class:`.store.Project`
methods as the JSON API, so both are checked the same way.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from cheems.annotate import quality
from cheems.annotate.answer import FLAGS, SPAN_LABELS, Answer, AnswerError, Verdict, read_body, read_json
from cheems.annotate.markdown import render
from cheems.annotate.people import Person
from cheems.annotate.store import Conflict, Item, NotFound, NotYours, Project

HERE = Path(__file__).parent
SESSION_COOKIE = "cheems_session"
LOGIN_COOKIE = "cheems_login"  # double-submit token of the login form (a page may not log a browser in)
HOME = {"annotator": "/annotate", "reviewer": "/review", "admin": "/dashboard"}
EVERYONE = tuple(HOME)
ROLE_NAMES = {"annotator": "标注员", "reviewer": "审核员", "admin": "管理员"}
SPAN_NAMES = dict(zip(SPAN_LABELS, ("事实错误", "有害", "乱码", "离题", "其他"), strict=True))
FLAG_NAMES = dict(zip(FLAGS, ("乱码", "不可用"), strict=True))
# Table 7 of the paper: what each overall-quality score means.
SCORES = [
    (0, "严重错误", "毫无实际价值：有害内容、无视指令、文本崩坏、语言不对、被截断、空白或报错信息"),
    (1, "质量极低", "三个维度都有重大错误，无法使用"),
    (2, "低于平均", "有明显但不致命的问题，大部分内容不可用"),
    (3, "中等", "满足基本需求，有小错误，修改后部分可用"),
    (4, "良好", "没有硬伤，瑕疵极少，大体可直接使用"),
    (5, "出色", "三个维度都出色且有亮点，无需修改即可使用"),
]
# Table 6: the three dimensions the score weighs.
DIMENSIONS = [
    (
        "有用性",
        "遵循用户的要求；语言与结构清晰；问题表述不佳时仍准确作答；指令不清时请求澄清；"
        "不堆砌冗余内容；只在任务隐含时才做情境假设。",
    ),
    (
        "无害性",
        "不伤害人身、财产、环境或机构；无歧视（种族、性别、宗教、国籍、性取向、年龄、阶层）；合乎社会伦理；"
        "无色情暴力内容；尊重隐私与知识产权；不给出有害的现实建议或违法指导；无辱骂冒犯性语言。",
    ),
    (
        "真实性",
        "信息准确，没有误导或未经证实的内容，尽量给出来源；专业与技术内容准确；总结时忠于原文。",
    ),
]
# The line a queue page shows after a form was taken (``?done=KEY``; the page never shows the query's text).
DONE = {
    "submitted": "已提交 ✓ 答案已保存。",
    "approved": "已通过 ✓ 审核结论已保存。",
    "rejected": "已退回 ✓ 任务已连同原因退回标注员。",
}
SHORTCUTS = [
    ("Shift+1…3 / ← →", "选中回答（或点击）"),
    ("0…5", "给选中的回答打分，随后跳到下一个"),
    ("g / b / s", "当前比较：前者更好 / 后者更好 / 一样好"),
    ("选中文字", "标记问题片段"),
    ("Esc", "关闭标记菜单"),
]
# No resource from elsewhere and no inline script: a response that slipped past the escaping still could not run.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' http: https:; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
STATIC = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}

router = APIRouter(include_in_schema=False)
_templates = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined, trim_blocks=True
)
_templates.filters["markdown"] = render
_templates.filters["share"] = lambda x: "—" if x is None else f"{x:.1%}"
_templates.filters["decimal"] = lambda x: "—" if x is None else f"{x:.3f}"
_templates.globals.update(
    role_names=ROLE_NAMES,
    span_names=SPAN_NAMES,
    flag_names=FLAG_NAMES,
    scores=SCORES,
    dimensions=DIMENSIONS,
    shortcuts=SHORTCUTS,
    home=HOME,
)


@dataclass(frozen=True)
class Viewer:
    """The person behind a request's session cookie, with the session's CSRF token."""

    person: Person
    csrf: str


def page(template: str, status: int = 200, viewer: Viewer | None = None, **context: object) -> HTMLResponse:
    """A rendered template with the security headers every page carries."""
    html = _templates.get_template(template).render(viewer=viewer, **context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _project(request: Request) -> Project:
    return cast("Project", request.app.state.project)


def _viewer(request: Request) -> Viewer | None:
    cookie = request.cookies.get(SESSION_COOKIE)
    found = _project(request).session(cookie) if cookie else None
    return Viewer(*found) if found else None


def _allowed(request: Request, roles: Iterable[str]) -> Viewer | Response:
    """The viewer when logged in with one of ``roles``; else the login page (no session) or a 403 page."""
    viewer = _viewer(request)
    if viewer is None:
        return RedirectResponse("/login?next=" + quote(request.url.path), status_code=303)
    if viewer.person.role not in roles:
        return page("error.html", 403, viewer, title="没有权限", message="您的角色不能打开此页面。")
    return viewer


def _csrf_ok(viewer: Viewer, sent: str) -> bool:
    return hmac.compare_digest(sent.encode(), viewer.csrf.encode())


def _forbidden(viewer: Viewer | None, message: str) -> HTMLResponse:
    return page("error.html", 403, viewer, title="请求被拒绝", message=message)


@router.get("/static/{name}")
def static(name: str) -> Response:
    """The page's script and style sheet (only these two files)."""
    if name not in STATIC:
        return Response(status_code=404)
    return FileResponse(HERE / "static" / name, media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


@router.get("/favicon.ico")
def favicon() -> Response:
    """No icon (a browser asks for one on every first visit)."""
    return Response(status_code=204)


@router.get("/login")
def login_form(request: Request, next: str = "") -> Response:
    """The login page: paste your token."""
    nonce = secrets.token_urlsafe(24)
    response = page("login.html", next=_local(next), login_csrf=nonce, error="")
    response.set_cookie(LOGIN_COOKIE, nonce, httponly=True, samesite="strict", path="/login", secure=_https(request))
    return response


@router.post("/login")
def login(request: Request, token: str = Form(""), csrf: str = Form(""), next: str = Form("")) -> Response:
    """Check the token, start a session (cookie) and go to the person's home page."""
    nonce = request.cookies.get(LOGIN_COOKIE, "")
    if not nonce or not hmac.compare_digest(csrf.encode(), nonce.encode()):
        return _forbidden(None, "登录表单已过期，请重新打开登录页。")
    project = _project(request)
    person = project.person_by_token(token.strip())
    if person is None:
        return page("login.html", 401, next=_local(next), login_csrf=nonce, error="令牌无效，请检查后重新粘贴。")
    cookie, _ = project.new_session(person.name)
    response = RedirectResponse(_local(next) or HOME[person.role], status_code=303)
    response.set_cookie(SESSION_COOKIE, cookie, httponly=True, samesite="strict", path="/", secure=_https(request))
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


def _local(target: str) -> str:
    # Only a plain path of this site: "//evil.example", "https://...", "/\\evil" or "/\t/evil" (a browser drops
    # the tab) would send the browser elsewhere after login.
    return target if re.fullmatch(r"/(?![/\\])[\w/-]*", target) else ""


def _https(request: Request) -> bool:
    return request.url.scheme == "https"


@router.post("/logout")
def logout(request: Request, csrf: str = Form("")) -> Response:
    """End the session and forget the cookie."""
    viewer = _viewer(request)
    if viewer is None:
        return RedirectResponse("/login", status_code=303)
    if not _csrf_ok(viewer, csrf):
        return _forbidden(viewer, "表单校验失败（CSRF），请刷新页面后重试。")
    _project(request).end_session(request.cookies[SESSION_COOKIE])
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/")
def home(request: Request) -> Response:
    """The person's own start page, by role."""
    viewer = _viewer(request)
    return RedirectResponse(HOME[viewer.person.role] if viewer else "/login", status_code=303)


def install(app: FastAPI) -> None:
    """Add the pages (and their script and style sheet) to the app."""
    app.include_router(router)


def _task_page(
    viewer: Viewer,
    project: Project,
    item: Item | None,
    status: int = 200,
    error: str = "",
    draft: object = None,
    done: str = "",
) -> HTMLResponse:
    """The page for one queue item (annotate or adjudicate form, or a review), or the empty-queue page;
    ``done`` (a key of :data:`DONE`) puts the line confirming the previous one above it."""
    day = project.today(viewer.person.name)
    confirm = DONE.get(done, "")
    if item is None:
        return page("empty.html", status, viewer, day=day, done=confirm)
    if item.kind == "review":
        return page("review.html", status, viewer, day=day, item=item, error=error, done=confirm)
    task_data = {
        "keys": [r["key"] for r in item.responses],
        "texts": {r["key"]: r["content"] for r in item.responses},
        "span_labels": SPAN_NAMES,
        "draft": draft,
    }
    return page("annotate.html", status, viewer, day=day, item=item, error=error, task_data=task_data, done=confirm)


@router.get("/annotate")
def annotate(request: Request, done: str = "") -> Response:
    """The person's next queue item: adjudications, returned tasks and reviews come before new tasks."""
    viewer = _allowed(request, EVERYONE)
    if isinstance(viewer, Response):
        return viewer
    project = _project(request)
    return _task_page(viewer, project, project.next_item(viewer.person.name), done=done)


@router.get("/review")
def review_next(request: Request, done: str = "") -> Response:
    """A reviewer's next queue item (the same single queue as /annotate, for reviewers and admins)."""
    viewer = _allowed(request, ("reviewer", "admin"))
    if isinstance(viewer, Response):
        return viewer
    project = _project(request)
    return _task_page(viewer, project, project.next_item(viewer.person.name), done=done)


@router.get("/tasks/{item_id}")
def task(item_id: str, request: Request) -> Response:
    """One of the person's items (answered ones too, read-only by the store's rules)."""
    viewer = _allowed(request, EVERYONE)
    if isinstance(viewer, Response):
        return viewer
    project = _project(request)
    try:
        return _task_page(viewer, project, project.item_for(item_id, viewer.person.name))
    except NotYours:
        return _forbidden(viewer, "这个任务没有分配给您。")
    except NotFound:
        return page("error.html", 404, viewer, title="找不到任务", message="没有这个任务。")


@router.post("/tasks/{item_id}/submit")
def submit(item_id: str, request: Request, csrf: str = Form(""), answer: str = Form("")) -> Response:
    """Store the annotate page's answer (the JSON app.js builds); a refused one comes back with its message."""
    viewer = _allowed(request, EVERYONE)
    if isinstance(viewer, Response):
        return viewer
    if not _csrf_ok(viewer, csrf):
        return _forbidden(viewer, "表单校验失败（CSRF），请刷新页面后重试。")
    project = _project(request)
    body = None
    try:
        body = read_json(answer)
        project.submit(item_id, viewer.person.name, read_body(Answer, body))
    except AnswerError as e:
        item = _own_item(project, item_id, viewer)
        if isinstance(item, Response):
            return item
        draft = body if isinstance(body, dict) else None  # the page starts again from what was sent
        message = str(e) if draft is not None else "答案数据无法解析，请刷新页面后重新作答"
        return _task_page(viewer, project, item, 422, error=message, draft=draft)
    except (NotYours, NotFound, Conflict) as e:
        return _refused(viewer, e)
    # the next item of the same queue (an adjudicator's is the review queue), under a line saying this one is in
    queue = "/annotate" if viewer.person.role == "annotator" else "/review"
    return RedirectResponse(queue + "?done=submitted", status_code=303)


@router.post("/tasks/{item_id}/review")
def review(
    item_id: str, request: Request, csrf: str = Form(""), decision: str = Form(""), reason: str = Form("")
) -> Response:
    """Approve or reject (with a reason) the answer under review."""
    viewer = _allowed(request, ("reviewer", "admin"))
    if isinstance(viewer, Response):
        return viewer
    if not _csrf_ok(viewer, csrf):
        return _forbidden(viewer, "表单校验失败（CSRF），请刷新页面后重试。")
    project = _project(request)
    verdict = None
    try:
        if decision not in ("approve", "reject"):
            raise AnswerError("请选择“通过”或“退回”")
        verdict = read_body(Verdict, {"approve": decision == "approve", "reason": reason})
        project.review(item_id, viewer.person.name, verdict)
    except AnswerError as e:
        item = _own_item(project, item_id, viewer)
        if isinstance(item, Response):
            return item
        unexplained = verdict is not None and not verdict.approve and not verdict.reason
        message = "退回时必须填写原因，说明标注员需要改正什么。" if unexplained else str(e)
        return _task_page(viewer, project, item, 422, error=message)
    except (NotYours, NotFound, Conflict) as e:
        return _refused(viewer, e)
    return RedirectResponse("/review?done=" + ("approved" if verdict.approve else "rejected"), status_code=303)


def _own_item(project: Project, item_id: str, viewer: Viewer) -> Item | Response:
    try:
        return project.item_for(item_id, viewer.person.name)
    except (NotYours, NotFound) as e:
        return _refused(viewer, e)


def _refused(viewer: Viewer, error: Exception) -> HTMLResponse:
    """The store's refusals as pages: 403 not yours, 404 no such task, 409 already done."""
    if isinstance(error, NotYours):
        return _forbidden(viewer, "这个任务没有分配给您。")
    if isinstance(error, NotFound):
        return page("error.html", 404, viewer, title="找不到任务", message="没有这个任务。")
    return page("error.html", 409, viewer, title="任务已完成", message="这个任务已经提交过了，无需再次提交。")


@router.get("/discussions")
def discussions(request: Request) -> Response:
    """An annotator's adjudications: every answer to the task side by side, and the consensus once recorded."""
    viewer = _allowed(request, ("annotator",))
    if isinstance(viewer, Response):
        return viewer
    found = _project(request).discussions(viewer.person.name)
    return page("discussions.html", viewer=viewer, discussions=found)


@router.get("/dashboard")
def dashboard(request: Request) -> Response:
    """The admin's numbers (:func:`.quality.status_report`)."""
    viewer = _allowed(request, ("admin",))
    if isinstance(viewer, Response):
        return viewer
    report = quality.status_report(_project(request).snapshot())
    return page("dashboard.html", viewer=viewer, report=report)
