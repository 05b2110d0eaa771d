"""Who may use `tracegraph serve` (explorer/serve_access.py), request by request; the server
itself is driven in test_serve.py."""

from __future__ import annotations

import pytest

from tracegraph.explorer.serve_access import Access, is_loopback

PORT = 8123


def _local() -> Access:
    return Access.create("127.0.0.1", PORT)


def test_each_server_has_its_own_unguessable_token() -> None:
    tokens = {_local().token for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 32 for t in tokens)


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8123", "localhost:8123", "[::1]:8123", "LOCALHOST:8123"]
)
def test_loopback_names_with_the_token_are_admitted(host: str) -> None:
    access = _local()
    assert access.refusal(host, None, access.token, None) is None
    assert access.refusal(host, f"http://{host}", None, access.token) is None  # by the cookie


@pytest.mark.parametrize(
    ("host", "origin", "with_token", "says"),
    [
        ("127.0.0.1:8123", None, False, "no valid token"),
        ("evil.example:8123", None, True, "not served here"),  # DNS rebinding
        ("127.0.0.1:9999", None, True, "not served here"),
        ("127.0.0.1:x", None, True, "not served here"),
        ("127.0.0.1:8123", "http://evil.example", True, "another site"),
        ("127.0.0.1:8123", "http://127.0.0.1:9999", True, "another site"),
        ("127.0.0.1:8123", "null", True, "another site"),
        ("127.0.0.1:8123", "file://127.0.0.1:8123", True, "another site"),
    ],
)
def test_everything_else_is_refused_with_the_reason(
    host: str, origin: str | None, with_token: bool, says: str
) -> None:
    access = _local()
    token = access.token if with_token else None
    refusal = access.refusal(host, origin, token, None)
    assert refusal is not None and says in refusal


def test_a_near_miss_token_is_refused() -> None:
    access = _local()
    for wrong in ("", access.token[:-1], access.token + "x", access.token.upper()):
        assert access.refusal("127.0.0.1:8123", None, wrong, wrong) is not None


def test_the_public_url_is_served_and_with_allow_remote_any_name_is() -> None:
    proxied = Access.create("127.0.0.1", PORT, "https://tg.example.com")
    token = proxied.token
    assert proxied.refusal("tg.example.com", "https://tg.example.com", token, None) is None
    assert proxied.refusal("other.example.com", None, token, None) is not None
    remote = Access.create("0.0.0.0", PORT, allow_remote=True)
    assert remote.refusal(f"box.lan:{PORT}", f"http://box.lan:{PORT}", remote.token, None) is None
    assert remote.refusal(f"box.lan:{PORT}", "http://evil.example", remote.token, None) is not None
    assert remote.refusal(f"box.lan:{PORT}", None, None, None) is not None


def test_cookies_are_per_port() -> None:
    assert Access.create("127.0.0.1", 1).cookie != Access.create("127.0.0.1", 2).cookie


def test_loopback_is_told_from_the_addresses_a_name_resolves_to() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("no-such-host.invalid")
