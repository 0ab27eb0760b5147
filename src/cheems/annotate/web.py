"""The web app: the JSON API (``/api``, Bearer tokens) and the pages (:mod:`.pages`, session cookies).

``create_app(folder)`` builds the FastAPI app over one project; ``serve(folder, host, port)`` runs
it with uvicorn after taking the project's lock. The lock is an ``flock`` on ``serve.lock`` in the
project folder: the kernel drops it when the process ends in any way (SIGKILL too), so a second
server of the same project is refused while the first lives, and a killed one can be restarted
at once.

Request handlers are plain ``def`` functions: FastAPI runs them on its thread pool, and the
store's SQLite calls block. Every write is committed before its response is sent. A request body
over :data:`cheems.http_serving.MAX_BODY` bytes is refused (413) while it arrives, before anything parses it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, cast

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from cheems.annotate.answer import Answer, AnswerError, Verdict, read_body
from cheems.annotate.people import Person, ServeSettings
from cheems.annotate.store import LOCK_NAME, Conflict, NotFound, NotYours, Project
from cheems.errors import InputError
from cheems.http_serving import BodyLimit, field_error, listening_socket


async def raw_body(request: Request) -> bytes:
    """The request's body as sent (a route reads it with :func:`.answer.read_body`, as the pages do)."""
    return await request.body()


def project_of(request: Request) -> Project:
    """The project this app serves."""
    return cast("Project", request.app.state.project)


def bearer(request: Request) -> Person:
    """The caller of an API route, from ``Authorization: Bearer TOKEN`` (401 otherwise)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    person = project_of(request).person_by_token(token.strip()) if scheme.lower() == "bearer" and token else None
    if person is None:
        raise HTTPException(401, "missing or unknown token — send Authorization: Bearer TOKEN from tokens.txt")
    return person


def admin(person: Annotated[Person, Depends(bearer)]) -> Person:
    """The caller, who must be an admin (403 otherwise)."""
    if person.role != "admin":
        raise HTTPException(403, "only an admin may see the project's numbers")
    return person


Caller = Annotated[Person, Depends(bearer)]
RawBody = Annotated[bytes, Depends(raw_body)]


def create_app(folder: str | Path) -> FastAPI:
    """The app over the project in ``folder`` (opened now: a bad folder fails before any request)."""
    from cheems.annotate import pages

    app = FastAPI(title="cheems annotate", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.project = Project.open(folder)
    app.add_middleware(BodyLimit)
    _add_error_handlers(app)
    _add_api(app)
    pages.install(app)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """The store's refusals as HTTP statuses with a one-line ``detail``."""
    statuses = {AnswerError: 422, NotYours: 403, NotFound: 404, Conflict: 409}
    for error, status in statuses.items():

        def handler(request: Request, exc: Exception, status: int = status) -> JSONResponse:
            return JSONResponse({"detail": str(exc)}, status_code=status)

        app.add_exception_handler(error, handler)

    def bad_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": field_error(exc.errors())}, status_code=422)

    # Starlette types a handler as taking any Exception, though it calls one only with its own class
    app.add_exception_handler(RequestValidationError, bad_body)  # type: ignore[arg-type]

    def damaged(request: Request, exc: InputError) -> JSONResponse:
        # A damaged project file met by a request: the full line (project, damage) in the server's log, no
        # traceback; the caller learns only that the project is damaged, not where it lives.
        logging.getLogger("uvicorn.error").error("%s", exc)
        return JSONResponse({"detail": "the project file is damaged — tell the project's admin"}, status_code=500)

    app.add_exception_handler(InputError, damaged)  # type: ignore[arg-type]  # as above


def _add_api(app: FastAPI) -> None:
    @app.get("/api/next")
    def next_task(request: Request, person: Caller) -> Any:
        """The caller's next task, or 204 when the queue is empty."""
        item = project_of(request).next_item(person.name)
        return Response(status_code=204) if item is None else item.api()

    @app.get("/api/tasks/{item_id}")
    def one_task(item_id: str, request: Request, person: Caller) -> dict[str, Any]:
        """One of the caller's tasks."""
        return project_of(request).item_for(item_id, person.name).api()

    @app.post("/api/tasks/{item_id}/submit")
    def submit(item_id: str, body: RawBody, request: Request, person: Caller) -> dict[str, Any]:
        """Store an answer; 200 only once it is committed."""
        project_of(request).submit(item_id, person.name, read_body(Answer, body))
        return {"item_id": item_id, "status": "submitted"}

    @app.post("/api/tasks/{item_id}/review")
    def review(item_id: str, body: RawBody, request: Request, person: Caller) -> dict[str, Any]:
        """Approve or reject (with a reason) the answer under review."""
        verdict = read_body(Verdict, body)
        project_of(request).review(item_id, person.name, verdict)
        return {"item_id": item_id, "status": "approved" if verdict.approve else "rejected"}

    @app.get("/api/me")
    def me(request: Request, person: Caller) -> dict[str, Any]:
        """Who the token belongs to, and their day."""
        day = project_of(request).today(person.name)
        return {"name": person.name, "role": person.role, "done_today": day.done_today, "left": day.left}

    @app.get("/api/discussions")
    def discussions(request: Request, person: Caller) -> list[Any]:
        """The adjudications of the caller's tasks: every answer side by side, and the consensus."""
        out = []
        for d in project_of(request).discussions(person.name):
            body = d.item.api()
            # Double-blind stays: the caller sees the other answers, not who gave them.
            for a in body["answers"]:
                a["annotator"] = "you" if a["annotator"] == person.name else "other"
            out.append({**body, "consensus": d.consensus})
        return out

    @app.get("/api/status")
    def status(request: Request, person: Annotated[Person, Depends(admin)]) -> dict[str, Any]:
        """The dashboard's numbers."""
        from cheems.annotate.quality import status_report

        return status_report(project_of(request).snapshot())


def serve_lock(folder: str | Path) -> contextlib.AbstractContextManager[None]:
    """``serve.lock`` in the project folder, held (``flock``) for as long as this process serves it."""
    from cheems.outputs import exclusive_lock

    def busy(owner: str) -> InputError:
        return InputError(
            f"is already being served ({owner})",
            path=str(folder),
            hint="stop that server first, or open its address; one server per project",
        )

    return exclusive_lock(Path(folder) / LOCK_NAME, busy)


def serve(folder: str | Path, settings: ServeSettings | None = None, ready: Callable[[], None] | None = None) -> None:
    """Serve the project until interrupted (one server per project folder); ``ready`` runs once it listens."""
    import uvicorn

    settings = settings or ServeSettings()
    app = create_app(folder)
    with serve_lock(folder):
        # bound here, so a taken port is our one-line error, not uvicorn's
        sock = listening_socket(settings.host, settings.port)
        if ready is not None:
            ready()
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
