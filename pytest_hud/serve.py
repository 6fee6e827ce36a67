"""``python -m pytest_hud.serve MODULE_OR_FILE``: serve a module's environments, print
``PYTEST_HUD_SERVER {"url": ...}`` once up, stop on SIGTERM, Ctrl-C or ``--lifeline`` EOF.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from pytest_hud.forkserver import client as forkserver
from pytest_hud.loader import load_module
from pytest_hud.process import serve_until_stopped
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
    server = EnvServer(
        collect(module), sim_host=args.sim_host, sim_ports=parse_ports(args.sim_ports)
    )
    try:
        url = await server.start(args.host, args.port)
        print(f"{ANNOUNCE} {json.dumps({'url': url, 'envs': sorted(server.envs)})}", flush=True)
        await asyncio.Event().wait()
    finally:
        await asyncio.shield(server.stop())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_hud.serve", description=__doc__)
    parser.add_argument("module", help="an env module: path/to/envs.py or a dotted name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--sim-host", default="127.0.0.1", help="where robot sims listen")
    parser.add_argument("--sim-ports", default="", help="ports for robot sims, e.g. 8001-8008")
    parser.add_argument("--lifeline", action="store_true", help="exit when stdin closes")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.getcwd())
    forkserver.borrow_only()
    serve_until_stopped(lambda: serve(args), lifeline=args.lifeline or None)


if __name__ == "__main__":
    main()
