"""The session's secret and how servers prove a peer holds it.

Every server pytest-hud starts (env servers, a sim's control port, the robot bridge, the
policy server) admits only peers that hold the session's secret: 32 random bytes made once
per session (``$PYTEST_HUD_SECRET``, so children inherit it through their environment,
never a command line). On the control channels the peer proves it with an HMAC of a nonce
the server sends (the secret never crosses the wire, so a sniffed tunnel gives nothing to
replay); a WebSocket carries a key derived from the secret for that one purpose in its url
(foreign clients such as openpi-client or the HUD SDK dial the url they are given).
``--no-auth`` (``$PYTEST_HUD_NO_AUTH=1``) turns the check off for a trusted lab.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import sys
import threading
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlparse, urlunparse

from pytest_hud.plumbing.private_dir import open_private, private_dir

__all__ = [
    "NO_AUTH_ENV",
    "RUNTIME_TOKEN_ENV",
    "SECRET_ENV",
    "auth_enabled",
    "auth_env",
    "borrowed_token",
    "derive",
    "keep_token",
    "kept_token",
    "prove",
    "redact",
    "same",
    "server_secret",
    "session_secret",
    "strip_token",
    "token_file",
    "url_token",
    "verify",
    "warn_no_auth",
    "with_token",
]

#: The session's secret, inherited by every child process.
SECRET_ENV = "PYTEST_HUD_SECRET"
#: ``1``: servers admit anyone (``--no-auth``); children inherit it too.
NO_AUTH_ENV = "PYTEST_HUD_NO_AUTH"
#: The token of an env server this session did not start (one ``python -m pytest_hud.serve``
#: made when started by hand), for ``--hud-runtime=tcp://HOST:PORT``: never on a command line.
RUNTIME_TOKEN_ENV = "PYTEST_HUD_RUNTIME_TOKEN"
_lock = threading.Lock()
#: a url's secret-bearing query parameter (``?token=``, the bridge's ``?key=``), with the
#: separator before it and the one after it, if any
_SECRET_PARAM = re.compile(r"([?&])(?:token|key)=[^&\s'\"#]*(&?)")


def auth_enabled() -> bool:
    """Whether servers started from here require the secret (``--no-auth`` clears it)."""
    return os.environ.get(NO_AUTH_ENV) != "1"


def session_secret() -> str:
    """This session's secret: ``$PYTEST_HUD_SECRET`` (a parent's), else made now and put
    there, so every process started from here on inherits the same one."""
    with _lock:
        secret = os.environ.get(SECRET_ENV)
        if not secret:
            secret = secrets.token_hex(32)
            os.environ[SECRET_ENV] = secret
        return secret


def server_secret() -> str | None:
    """What a server started here requires: the session's secret, or None under
    ``--no-auth``."""
    return session_secret() if auth_enabled() else None


def auth_env() -> dict[str, str]:
    """What a server's environment needs to serve this session: its secret, or the
    ``--no-auth`` switch (for children started without this process's environment: a
    container, a cloud sandbox)."""
    return {SECRET_ENV: session_secret()} if auth_enabled() else {NO_AUTH_ENV: "1"}


def derive(secret: str, purpose: str) -> str:
    """A key for one purpose (``"bridge"``, ``"policy"``): showing it (in a url, say) does
    not show the secret or another purpose's key."""
    return hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def prove(secret: str, nonce: str) -> str:
    """The answer to a server's challenge ``nonce``."""
    return hmac.new(secret.encode(), b"pytest-hud control " + nonce.encode(), "sha256").hexdigest()


def verify(secret: str, nonce: str, answer: object) -> bool:
    """Whether ``answer`` is :func:`prove`'s for ``nonce`` (constant time)."""
    if not isinstance(answer, str):
        return False
    return hmac.compare_digest(prove(secret, nonce).encode(), answer.encode(errors="replace"))


def same(expected: str, given: object) -> bool:
    """Whether ``given`` is the key ``expected`` (constant time)."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(expected.encode(), given.encode(errors="replace"))


def url_token(url: str) -> str | None:
    """The ``token`` query parameter of ``url`` (``tcp://HOST:PORT?token=...``), if any."""
    for key, value in parse_qsl(urlparse(url).query):
        if key == "token":
            return value
    return None


def strip_token(url: str) -> str:
    """``url`` without its ``token`` (for messages and reports: a secret is not printed)."""
    parsed = urlparse(url)
    query = [(k, v) for k, v in parse_qsl(parsed.query) if k != "token"]
    return urlunparse(parsed._replace(query=urlencode(query)))


def with_token(url: str, token: str) -> str:
    """``url`` with ``?token=TOKEN`` (as ``python -m pytest_hud.serve`` prints it)."""
    parsed = urlparse(url)
    query = [(k, v) for k, v in parse_qsl(parsed.query) if k != "token"] + [("token", token)]
    return urlunparse(parsed._replace(query=urlencode(query)))


def token_file(port: int, kind: str = "serve") -> Path:
    """Where a server started by hand on ``port`` keeps its token (``kind``: ``serve`` for
    ``python -m pytest_hud.serve``, ``policy`` for ``policy-server --token``): a file in
    this user's own folder (mode 0700), so this user's sessions on this host find it and
    nobody else can read it. A token is never printed: a terminal's output ends up in logs."""
    return private_dir(kind) / f"{port}.token"


def keep_token(port: int, token: str, kind: str = "serve") -> Path:
    """Write ``token`` to this user's token file for ``port`` (mode 0600, opened without
    following a link); its path. The server removes it when it stops."""
    path = token_file(port, kind)
    fd = open_private(path)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, token.encode() + b"\n")
    finally:
        os.close(fd)
    return path


def kept_token(host: str | None, port: int | None, kind: str = "serve") -> str | None:
    """The token a server started by hand on this host's ``port`` keeps in its file (None:
    ``host`` is not this host, or there is no such file)."""
    if host not in ("127.0.0.1", "localhost", "::1") or port is None:
        return None
    path = token_file(port, kind)
    return (path.read_text().strip() or None) if path.is_file() else None


def borrowed_token(url: str) -> str | None:
    """The token of an env server this session did not start, at ``url``: the url's own
    ``?token=``, else ``$PYTEST_HUD_RUNTIME_TOKEN``, else the token file of a server
    started by hand on this host's ``port`` (None: none of them; this session's secret
    is tried)."""
    token = url_token(url) or os.environ.get(RUNTIME_TOKEN_ENV)
    if token:
        return token
    parsed = urlparse(url)
    return kept_token(parsed.hostname, parsed.port)


def redact(text: str) -> str:
    """``text`` (a url, or a command line holding urls) without the value of any ``token=``
    or ``key=`` query parameter: what a report, a ledger or provenance records of a command
    a user ran, which may have carried a secret (``--hud-runtime=tcp://...?token=...``)."""
    return _SECRET_PARAM.sub(lambda m: m.group(1) if m.group(2) else "", text)


def warn_no_auth(what: str) -> None:
    """The loud line every server started with auth off prints once."""
    print(
        f"pytest-hud: WARNING: {what} admits anyone who can reach it (--no-auth): any "
        "process on this host, or on the network it listens on, can start episodes and "
        "drive the robot; use it only in a lab you trust",
        file=sys.stderr,
        flush=True,
    )
