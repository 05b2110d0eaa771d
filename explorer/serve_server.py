"""textual-serve's server with tracegraph's admission (explorer/serve_access.py) in front of
every route, a bound on the explorers running at once, and a page that works by whichever
served name the browser used. Imported only by `serve` (textual-serve is an optional extra).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

from .serve_access import Access

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TEMPLATES = Path(__file__).resolve().parent / "templates"


class GuardedServer(Server):
    """Every request admitted by `access` or answered 403; at most `max_clients` explorers."""

    def __init__(
        self,
        command: str,
        access: Access,
        max_clients: int,
        host: str,
        port: int,
        title: str,
        public_url: str | None,
    ) -> None:
        super().__init__(
            command, host=host, port=port, title=title, public_url=public_url,
            templates_path=TEMPLATES,  # tracegraph's page: the explorer at once, nothing fetched
        )  # fmt: skip
        self.access = access
        self.max_clients = max_clients
        self.clients = 0
        self._public_url = public_url  # None: each page uses the name its browser used

    @property
    def url(self) -> str:
        """The address to open, token included."""
        return f"{self.public_url.rstrip('/')}/?token={self.access.token}"

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._admit)
        return app

    @web.middleware
    async def _admit(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        refusal = self.access.refusal(
            request.host,
            request.headers.get("Origin"),
            request.query.get("token"),
            request.cookies.get(self.access.cookie),
        )
        if refusal is not None:
            print(f"tracegraph serve: refused {request.path}: {refusal}", file=sys.stderr)
            raise web.HTTPForbidden(text=f"tracegraph serve: {refusal}\n")
        response = await handler(request)
        if request.query.get("token") is not None:
            response.set_cookie(
                self.access.cookie, self.access.token, httponly=True, samesite="Strict", path="/"
            )
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self.clients >= self.max_clients:
            print(
                f"tracegraph serve: refused a client: {self.max_clients} connected", file=sys.stderr
            )
            raise web.HTTPServiceUnavailable(
                text=f"tracegraph serve: {self.max_clients} clients already connected "
                "(--max-clients)\n"
            )
        self.clients += 1
        try:
            return await super().handle_websocket(request)
        finally:
            self.clients -= 1

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        """The page, its scripts and websocket at the origin the browser used (admitted)."""
        base = (self._public_url or f"{request.scheme}://{request.host}").rstrip("/")
        scheme, rest = base.split(":", 1)
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{'wss' if scheme == 'https' else 'ws'}:{rest}/ws",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }

    async def on_startup(self, app: web.Application) -> None:
        self.console.print(f"tracegraph serve: open {self.url}", highlight=False, soft_wrap=True)
        self.console.print("Press Ctrl+C to stop", highlight=False)
