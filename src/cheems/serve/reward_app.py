"""``cheems serve``: a reward model behind OpenRLHF's and vLLM's HTTP protocols, for RL trainers.

``create_reward_app(scorer, settings)`` builds the FastAPI app over a loaded scorer; ``serve_model(scoring,
settings)`` loads the model, binds the socket (a taken port is one line naming ``--port``) and runs uvicorn until
SIGTERM or Ctrl-C. Routes are ``async``: they never block the event loop, they wait for the one scoring thread
(:class:`~cheems.serve.batcher.RewardBatcher`), which scores concurrent requests together.

Every refusal is a JSON ``{"detail": one line}``: 4xx for a request that cannot be scored as sent (bad JSON, wrong
types, an empty list, a body over :data:`MAX_BODY`, a model name not served, an input over the limit under
``--truncate error``), 401 without the API key when one is set, 503 with ``Retry-After`` when the queue is full,
the request's time ran out, or the server is shutting down. On SIGTERM the batch under way finishes, queued and new
requests get 503, and the process exits once the requests in flight are answered.

A production fleet should put the same checkpoint behind ``vllm serve`` (the README says how, keeping raw rewards);
this server is the small, exact one: its rewards are ``cheems score``'s.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from cheems.errors import InputError
from cheems.http_serving import BodyLimit, field_error, listening_socket
from cheems.models.base import Scorer
from cheems.models.hf import HFRewardScorer
from cheems.models.scoring import ScoringSettings
from cheems.serve.batcher import ClientGone, Refused, RewardBatcher, ScoringFailed
from cheems.serve.protocols import (
    END_MARKERS,
    PoolingRequest,
    RequestError,
    RewardRequest,
    classify_reply,
    models_reply,
    pooling_reply,
    reward_reply,
    reward_samples,
)
from cheems.serve.reward_rows import Sample, Scored, score_samples
from cheems.serve.serve_settings import ServeSettings

MAX_BODY = 4 << 20  # bytes: a request of many long samples fits; a runaway body does not
RETRY_AFTER = "1"  # seconds a refused client waits before it tries again
GRACE = 5  # seconds uvicorn waits for the requests in flight at shutdown

log = logging.getLogger("uvicorn.error")
M = TypeVar("M", bound=BaseModel)


class RewardService:
    """What the routes share: the scorer, its batcher, the names it answers to and the settings."""

    def __init__(self, scorer: Scorer, settings: ServeSettings, api_key: str | None) -> None:
        self.scorer = scorer
        self.settings = settings
        self.api_key = api_key
        self.names = served_names(scorer, settings)
        hf = scorer if isinstance(scorer, HFRewardScorer) else None
        self.limit = hf.encoder.limit if hf is not None else None
        labels = hf.source.config.get("id2label") if hf is not None else None
        self.label = str(labels.get("0", "LABEL_0")) if isinstance(labels, dict) else "LABEL_0"
        ends = [getattr(hf.tokenizer, name, None) for name in ("eos_token", "pad_token")] if hf is not None else []
        self.ends = (*END_MARKERS, *(e for e in ends if isinstance(e, str) and e))
        refuse = settings.truncate == "error"
        self.batcher: RewardBatcher[Sample, Scored] = RewardBatcher(
            lambda samples: score_samples(scorer, samples, refuse),
            max_batch=settings.max_batch,
            max_wait=settings.max_wait_ms / 1000,
            max_queue=settings.max_queue,
        )
        self.loop: asyncio.AbstractEventLoop | None = None

    async def score(self, samples: list[Sample], request: Request) -> list[Scored]:
        """The samples' results, from the scoring thread; the request's disconnect drops them unscored."""
        if len(samples) > self.batcher.max_queue:
            raise RequestError(
                f"{len(samples)} samples in one request; this server queues at most "
                f"{self.batcher.max_queue} (--max-queue): split the request",
                413,
            )

        async def gone() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        return await self.batcher.submit(samples, self.settings.request_timeout, gone)

    def model_name(self, asked: str | None) -> str:
        """The name to answer with: the one asked for when it is served (404 otherwise), else the first."""
        if asked is None:
            return self.names[0]
        if asked not in self.names:
            served = ", ".join(repr(n) for n in self.names)
            shown = asked if len(asked) <= 80 else asked[:80] + "…"  # a detail stays one short line
            raise RequestError(f"model {shown!r} is not served; this server serves {served}", 404)
        return asked

    def check_truncation(self, keep: int | None) -> None:
        """vLLM's ``truncate_prompt_tokens``: -1 or at least the limit is the server's own rule; fewer is refused
        (the encoder cuts at one limit, the server's ``--max-length``)."""
        if keep is None or keep == -1 or self.limit is None or keep >= self.limit:
            return
        raise RequestError(
            f"truncate_prompt_tokens {keep} is below this server's limit of {self.limit} tokens; send -1, or start "
            f"the server with --max-length {keep}",
            400,
        )


def served_names(scorer: Scorer, settings: ServeSettings) -> list[str]:
    """The names a request's ``model`` may give: ``--served-model-name``, the MODEL as given, its resolved path."""
    names = [settings.served_model_name, scorer.name]
    if isinstance(scorer, HFRewardScorer):
        names.append(scorer.source.location)
        if os.path.exists(scorer.source.location):
            names.append(str(Path(scorer.source.location).resolve()))
    return list(dict.fromkeys(n for n in names if n))


def parse(model: type[M], body: bytes) -> M:
    """``body`` as ``model``, or one 422 line naming the first bad field (never quoting what was sent)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as e:
        detail = field_error(e.errors(include_input=False))
        if "hex escape" in detail:  # what the JSON parser says of a lone surrogate ("\ud800"), which is no text
            detail += " (a lone surrogate such as \\ud800 is no text: send valid Unicode)"
        raise RequestError(detail) from None


def create_reward_app(scorer: Scorer, settings: ServeSettings | None = None, api_key: str | None = None) -> FastAPI:
    """The app over a loaded ``scorer``; its scoring thread starts with the app and ends at its shutdown."""
    service = RewardService(scorer, settings or ServeSettings(), api_key)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.loop = asyncio.get_running_loop()
        service.batcher.start()
        yield
        service.batcher.close()

    app = FastAPI(title="cheems serve", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.service = service
    app.add_middleware(BodyLimit, limit=MAX_BODY)
    _add_error_handlers(app)
    _add_routes(app, service)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Refusals as ``{"detail": one line}``; an unexpected error is one log line and a 500, no traceback."""

    def refused(request: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": RETRY_AFTER})

    def bad_request(request: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    def unscorable(request: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    def gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it: the client left

    def broken(request: Request, exc: ScoringFailed) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=500)  # the scoring thread logged it

    def failed(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return JSONResponse({"detail": f"the reward model failed: {type(exc).__name__}"}, status_code=500)

    # Starlette types a handler as taking any Exception, though it calls one only with its own class
    app.add_exception_handler(Refused, refused)  # type: ignore[arg-type]
    app.add_exception_handler(RequestError, bad_request)  # type: ignore[arg-type]
    app.add_exception_handler(ValueError, unscorable)  # type: ignore[arg-type]
    app.add_exception_handler(ClientGone, gone)  # type: ignore[arg-type]
    app.add_exception_handler(ScoringFailed, broken)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, failed)


def _add_routes(app: FastAPI, service: RewardService) -> None:
    def authorised(request: Request) -> None:
        """401 unless the request sends ``Authorization: Bearer KEY`` (when the server has a key)."""
        if service.api_key is None:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), service.api_key.encode()):
            raise HTTPException(401, "missing or wrong API key: send Authorization: Bearer KEY")

    keyed = [Depends(authorised)]

    @app.get("/health")
    def health() -> Response:
        """200 while the server runs (no key needed: a load balancer's probe)."""
        return Response(status_code=200)

    @app.get("/v1/models", dependencies=keyed)
    def models() -> dict[str, Any]:
        return models_reply(service.names, service.names[-1], service.limit)

    @app.get("/stats", dependencies=keyed)
    def stats() -> dict[str, int]:
        """Samples waiting now; since the start: scoring calls, samples scored, requests whose client left."""
        b = service.batcher
        return {"waiting": b.waiting, "batches": b.batches, "scored": b.scored, "left": b.left}

    @app.post("/get_reward", dependencies=keyed)
    async def get_reward(request: Request) -> dict[str, Any]:
        """OpenRLHF's remote reward model."""
        body = parse(RewardRequest, await request.body())
        return reward_reply(await service.score(reward_samples(body, service.ends), request))

    def pooling_route(reply: Callable[[list[Scored], str, bool], dict[str, Any]]) -> Any:
        async def route(request: Request) -> dict[str, Any]:
            body = parse(PoolingRequest, await request.body())
            name = service.model_name(body.model)
            service.check_truncation(body.truncate_prompt_tokens)
            return reply(await service.score(body.samples(), request), name, body.activated())

        return route

    classify = pooling_route(lambda s, name, act: classify_reply(s, name, act, service.label))
    for path in ("/classify", "/v1/classify"):
        app.post(path, dependencies=keyed)(classify)
    app.post("/pooling", dependencies=keyed)(pooling_route(pooling_reply))


def api_key_of(settings: ServeSettings) -> str | None:
    """The key requests must send: the value of ``--api-key-env``'s variable (None without the option)."""
    if settings.api_key_env is None:
        return None
    key = os.environ.get(settings.api_key_env, "").strip()
    if not key:
        raise InputError(
            f"environment variable {settings.api_key_env} is not set or empty",
            path="--api-key-env",
            hint=f"export {settings.api_key_env}=<a secret key> before starting the server, or drop --api-key-env",
        )
    return key


def load_served_model(scoring: ScoringSettings) -> Scorer:
    """The scorer of ``scoring.model`` with its weights loaded (a bad model fails before the server listens)."""
    if not scoring.model:
        raise InputError("cheems serve needs MODEL", hint="e.g. cheems serve ./my-rm")
    scorer = scoring.scorer()
    if isinstance(scorer, HFRewardScorer):
        scorer.model  # noqa: B018 - loads the weights and tokenizer now
        scorer.encoder  # noqa: B018
    return scorer


def reward_server(
    scoring: ScoringSettings,
    settings: ServeSettings | None = None,
    *,
    port: int | None = None,
    own_logging: bool = True,
) -> tuple[Any, socket.socket]:
    """The uvicorn server of ``cheems serve`` and the socket it will serve on, listening already, every check made
    (the key variable, the model, the address). ``port`` overrides ``settings.port`` (0: a free one);
    ``own_logging=False`` leaves the logging of a host program (a test process that runs the server in a thread)
    as it is. ``server.run(sockets=[sock])`` serves; setting ``server.should_exit`` ends it."""
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    settings = settings or ServeSettings()
    key = api_key_of(settings)
    scorer = load_served_model(scoring)
    # bound here: a taken port is our one-line error
    sock = listening_socket(settings.host, settings.port if port is None else port)
    app = create_reward_app(scorer, settings, key)
    service: RewardService = app.state.service
    config = uvicorn.Config(
        app,
        log_config=LOGGING_CONFIG if own_logging else None,  # uvicorn's default, which configures this process
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GRACE,
    )
    return _draining_server(config, service), sock


def serve_model(
    scoring: ScoringSettings, settings: ServeSettings | None = None, *, ready: Callable[[], None] | None = None
) -> None:
    """Serve ``scoring.model`` until SIGTERM or Ctrl-C; every check (model, key, address) runs before ``ready``."""
    server, sock = reward_server(scoring, settings)
    if ready is not None:
        ready()
    server.run(sockets=[sock])


def _draining_server(config: Any, service: RewardService) -> Any:
    """uvicorn's server, whose SIGTERM/SIGINT also refuses the queued requests (503) at once: the requests in
    flight are then answered within the batch under way, and shutdown takes seconds."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # Runs in the signal handler: hand the drain to the loop, never take a lock here.
            if service.loop is not None and not self.should_exit:
                service.loop.call_soon_threadsafe(service.batcher.drain)
            super().handle_exit(sig, frame)

    return Server(config)
