"""``python -m pytest_hud.serve MODULE_OR_FILE``: serve a module's environments, print
``PYTEST_HUD_SERVER {"url": ...}`` once up, stop on SIGTERM, Ctrl-C or ``--lifeline`` EOF.

The server serves only peers holding the session's secret (``$PYTEST_HUD_SECRET``,
inherited from whoever started it, else made now). Started by hand, it prints the url to
give pytest (``--hud-runtime=tcp://127.0.0.1:PORT``, no secret in it: a command line is
what ``ps`` shows and reports record) and keeps the secret in a file of this user's own,
which this user's sessions on this host read; from elsewhere it is given in
``$PYTEST_HUD_RUNTIME_TOKEN``. ``--no-auth`` serves anyone (a trusted lab only; it says so
loudly).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

from pytest_hud.forkserver import client as forkserver
from pytest_hud.plumbing.auth import (
    NO_AUTH_ENV,
    RUNTIME_TOKEN_ENV,
    SECRET_ENV,
    keep_token,
    warn_no_auth,
)
from pytest_hud.plumbing.loader import load_module
from pytest_hud.plumbing.process import serve_until_stopped
from pytest_hud.runtime.environment import Environment
from pytest_hud.runtime.modules import module_environments
from pytest_hud.runtime.server import ANNOUNCE, EnvServer


def parse_ports(text: str | None) -> list[int]:
    """``8001-8004`` or ``8001,8002`` into a list of ports."""
    if not text:
        return []
    ports: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        ports.extend(range(int(lo), int(hi or lo) + 1))
    return ports


def collect(module: object) -> list[Environment]:
    try:
        return module_environments(module)
    except LookupError as exc:
        raise SystemExit(str(exc)) from None


async def serve(args: argparse.Namespace) -> None:
    module = load_module(args.module)
    kept: Path | None = None
    server = EnvServer(
        collect(module), sim_host=args.sim_host, sim_ports=parse_ports(args.sim_ports)
    )
    try:
        url = await server.start(args.host, args.port)
        print(f"{ANNOUNCE} {json.dumps({'url': url, 'envs': sorted(server.envs)})}", flush=True)
        if server.secret is None:
            warn_no_auth(f"the env server at {url}")
        elif not args.inherited:  # started by hand: the url a user passes to pytest
            kept = keep_token(int(url.rsplit(":", 1)[1]), server.secret)
            print(f"pytest-hud: serving {sorted(server.envs)}; run pytest with "
                  f"--hud-runtime={url} (its token is in {kept}, which your sessions on "
                  f"this host read; from elsewhere, export {RUNTIME_TOKEN_ENV}=<its "
                  "contents>)", file=sys.stderr, flush=True)  # fmt: skip
        await asyncio.Event().wait()
    finally:
        if kept is not None:
            with contextlib.suppress(OSError):
                kept.unlink()
        await asyncio.shield(server.stop())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_hud.serve", description=__doc__)
    parser.add_argument("module", help="an env module: path/to/envs.py or a dotted name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--sim-host", default="127.0.0.1", help="where robot sims listen")
    parser.add_argument("--sim-ports", default="", help="ports for robot sims, e.g. 8001-8008")
    parser.add_argument("--lifeline", action="store_true", help="exit when stdin closes")
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="serve anyone who can reach the port (a trusted lab only; prints a warning)",
    )
    args = parser.parse_args(argv)
    if args.no_auth:
        os.environ[NO_AUTH_ENV] = "1"
    args.inherited = bool(os.environ.get(SECRET_ENV))  # a launcher's child: it holds it
    sys.path.insert(0, os.getcwd())
    forkserver.borrow_only()
    serve_until_stopped(lambda: serve(args), lifeline=args.lifeline or None)


if __name__ == "__main__":
    main()
