"""What every HTTP app of cheems shares (``cheems annotate serve``, ``cheems serve``): the request-body limit
and the listening socket whose errors are one line naming the option.

fastapi/starlette are imported by the apps that use this module; nothing here starts a server.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cheems.errors import InputError

MAX_BODY = 1 << 20  # bytes; a real annotation answer is a few KB
BACKLOG = 2048  # uvicorn's default
LOC_CHARS = 24  # a field name quoted in an error is cut here: an error never echoes what was sent


class BodyLimit:
    """ASGI middleware: a request whose body grows past ``limit`` bytes gets 413 (never read further)."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                # raised where the route reads its body: the app answers it like any refusal
                raise HTTPException(413, f"request body over {self.limit / (1 << 20):g} MiB — send a smaller body")
            return message

        await self.app(scope, counted, send)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (a one-line InputError when the address is taken or wrong)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # listening from here on: a client that connects once the server says it is ready waits in the backlog
        # for uvicorn to accept, rather than being refused while uvicorn starts
        sock.listen(BACKLOG)
    except OSError as e:
        raise InputError(
            f"cannot listen on {host}:{port}: {e.strerror or e}",
            path="--port" if getattr(e, "errno", None) == errno.EADDRINUSE else "--host",
            hint="choose another --port, or stop the program that uses it"
            if getattr(e, "errno", None) == errno.EADDRINUSE
            else "give an address of this machine, e.g. 127.0.0.1",
        ) from None
    return sock


def field_error(errors: Sequence[Mapping[str, Any]]) -> str:
    """The first of pydantic's ``errors`` as one line ``where: what``; the field path is cut short and the
    value sent is never quoted."""
    if not errors:
        return "body: invalid"
    first = errors[0]
    parts = [str(p) for p in first.get("loc", ()) if p != "body"]
    where = ".".join(p if len(p) <= LOC_CHARS else p[:LOC_CHARS] + "…" for p in parts) or "body"
    return f"{where}: {first['msg']}"
