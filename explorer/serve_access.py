"""Who may use `tracegraph serve`, decided from a request's Host, Origin, token and cookie.

A served explorer reads the database for whoever drives it, so the server admits only:
- requests that carry its token: a random one per server, in the URL it prints (`?token=`), or
  in the cookie the first page sets (the way Jupyter does it). The page's scripts, its
  websocket and downloads then send the cookie (SameSite=Strict: never from another site);
- to a host name it serves (loopback names, and the --public-url's): a page of another site
  whose name resolves to this machine (DNS rebinding) sends its own name and is refused;
- from its own origin, where a browser says one: a websocket opened by another site's page is
  refused even where the browser would send the cookie.
With --allow-remote (listening beyond loopback) any host name is served: which names reach
the machine cannot be told in advance, and the token still decides.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class Access:
    """The admission rules of one server."""

    token: str
    port: int
    hosts: frozenset[str] | None  # host names a request may name; None: any (--allow-remote)
    public_origin: str | None  # scheme://host[:port] of --public-url

    @classmethod
    def create(
        cls, host: str, port: int, public_url: str | None = None, allow_remote: bool = False
    ) -> Access:
        public = urlsplit(public_url) if public_url else None
        hosts: frozenset[str] | None = None
        if not allow_remote:
            names = set(LOOPBACK_NAMES) | {host.lower().strip("[]")}
            if public is not None and public.hostname:
                names.add(public.hostname.lower())
            hosts = frozenset(names)
        origin = f"{public.scheme}://{public.netloc}".lower() if public is not None else None
        return cls(secrets.token_urlsafe(24), port, hosts, origin)

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port, as browsers share cookies between a host's ports."""
        return f"tracegraph-serve-{self.port}"

    def refusal(
        self, host: str, origin: str | None, token: str | None, cookie: str | None
    ) -> str | None:
        """Why a request is refused (None: admitted): `host` is its Host header, `origin` its
        Origin header, `token` its `?token=`, `cookie` the server's cookie as it sent it."""
        name, port = _host_and_port(host)
        if self.hosts is not None and (name not in self.hosts or port not in (self.port, None)):
            if not self._public_host(host):
                return f"host {host!r} is not served here"
        if origin is not None and not self._same_origin(origin, host):
            return f"origin {origin!r} is another site"
        if not any(_equal(given, self.token) for given in (token, cookie)):
            return "no valid token: open the URL tracegraph serve printed"
        return None

    def _public_host(self, host: str) -> bool:
        return (
            self.public_origin is not None and urlsplit(self.public_origin).netloc == host.lower()
        )

    def _same_origin(self, origin: str, host: str) -> bool:
        origin = origin.lower()
        if self.public_origin is not None and origin == self.public_origin:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == host.lower()


def _host_and_port(host: str) -> tuple[str, int | None]:
    """`name[:port]` or `[v6]:port` as (lower-case name without brackets, port or None)."""
    parts = urlsplit(f"//{host}")
    try:
        port = parts.port
    except ValueError:
        return "", -1  # a port that is no number: no host is named so
    return (parts.hostname or "").lower(), port


def _equal(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is this machine's loopback (unresolvable: False)."""
    try:
        addresses = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    found = {str(info[4][0]) for info in addresses}
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)
