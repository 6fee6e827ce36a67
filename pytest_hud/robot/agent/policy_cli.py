"""``python -m pytest_hud policy-server``: load an agent spec's model and serve it on the openpi
protocol (:class:`~pytest_hud.robot.agent.policy_server.PolicyServer`) until stopped. Apart from
the server, so the server (which the Ray replicas run) does not import the agent registry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_hud.plumbing.auth import keep_token
from pytest_hud.plumbing.cli import command_parser
from pytest_hud.plumbing.process import serve_until_stopped
from pytest_hud.robot.agent.batching import BatchedModel
from pytest_hud.robot.agent.model import Model
from pytest_hud.robot.agent.policy_server import ANNOUNCE, TOKEN_ENV, PolicyServer

__all__ = ["load_model", "main", "serve_forever"]


def load_model(spec: str) -> Model:
    """The Model behind an agent spec (``--hud-agent`` syntax)."""
    from pytest_hud.errors import AgentSpecError
    from pytest_hud.robot.agent.registry import load_agent

    agent = load_agent(spec)
    model = getattr(agent, "model", None)
    if not isinstance(model, Model):
        raise AgentSpecError(
            f"agent {spec!r} ({agent!r}) has no Model to serve: the policy server serves a "
            "RobotAgent's .model"
        )
    if isinstance(model, BatchedModel):
        model = model.model
    return model


def serve_forever(
    spec: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_wait_s: float = 0.005,
    batch_size: int | None = None,
    contract: str | Path | None = None,
    max_frame_bytes: int | None = None,
    token: str | None = None,
    idle_s: float = 10.0,
    keep: bool = False,
) -> None:
    """Load ``spec``'s model and serve it until SIGTERM, Ctrl-C or, when spawned with
    ``$PYTEST_HUD_LIFELINE=1``, the end of its stdin; ``token``: see :class:`PolicyServer`.
    ``keep``: the token was made here, so it is kept in this user's token file for the port
    (printed as that path, never as itself), which ``--hud-agent=openpi:`` on this host
    reads; removed when the server stops.

    Prints ``PYTEST_HUD_POLICY_SERVER {"url": ...}`` on stdout once it listens.
    """
    from pytest_hud.robot.agent.expects import metadata_entry

    model = load_model(spec)
    # what the policy expects (a LeRobot checkpoint's features and stats): clients check
    # it against their env before any episode (the compatibility preflight)
    meta = {"agent": spec, "model": type(model).__name__, **metadata_entry(model, spec)}
    server = PolicyServer(
        model,
        host=host,
        port=port,
        max_wait_s=max_wait_s,
        batch_size=batch_size,
        metadata=meta,
        contract=contract,
        max_frame_bytes=max_frame_bytes,
        token=token,
        idle_s=idle_s,
    )

    async def main() -> None:
        url = await server.start()
        kept = keep_token(server.port, token, "policy") if keep and token else None
        print(f"{ANNOUNCE} {json.dumps({'url': url, 'agent': spec})}", flush=True)
        if kept is not None:
            print(f"policy server: its token is in {kept}, which --hud-agent=openpi:HOST:PORT "
                  f"on this host reads; other clients: export {TOKEN_ENV}=<its contents> "
                  "(openpi_client: api_key)", file=sys.stderr, flush=True)  # fmt: skip
        try:
            await asyncio.Event().wait()
        finally:
            if kept is not None:
                with contextlib.suppress(OSError):
                    kept.unlink()
            await server.stop()
            widths = server.batched.batches
            if widths:
                mean = sum(widths) / len(widths)
                print(
                    f"policy server: {sum(widths)} requests in {len(widths)} forwards "
                    f"(mean width {mean:.2f})",
                    file=sys.stderr,
                    flush=True,
                )

    serve_until_stopped(main)


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_parser(
        "policy-server",
        "Serve an agent's model on the openpi policy-server protocol, batching requests from "
        "all connections (clients: --hud-agent=openpi:HOST:PORT, or "
        "openpi_client.WebsocketClientPolicy).",
        agent=True,
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port)")
    parser.add_argument(
        "--max-wait-ms",
        type=float,
        default=5.0,
        help="longest a request waits for others to join its forward (default 5)",
    )
    parser.add_argument("--batch-size", type=int, default=None, help="cap on a forward's width")
    parser.add_argument(
        "--contract",
        metavar="PATH",
        help="the env's contract.json: binds models that size actions from the action "
        "space (zero, random); the openpi protocol carries no contract",
    )
    parser.add_argument(
        "--max-frame-mb",
        type=float,
        default=None,
        help="largest request frame without a --contract (default: "
        "$PYTEST_HUD_MAX_FRAME_BYTES or 64 MiB); with one, what its observation needs",
    )
    parser.add_argument(
        "--token",
        action="store_true",
        help="admit only clients sending the token in $PYTEST_HUD_POLICY_TOKEN (when unset, "
        "made and kept in a file of this user's, whose path is printed; never taken on the "
        "command line, where ps shows it); clients: openpi_client's api_key, or "
        "--hud-agent=openpi:HOST:PORT (the variable, else that file on this host)",
    )
    parser.add_argument(
        "--idle-s",
        type=float,
        default=10.0,
        help="once a connection cap is full, a newcomer takes the place of a connection "
        "idle this long (default 10)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    token, made = None, False
    if args.token:  # never printed: a terminal's output ends up in logs (issue 52)
        token = os.environ.get(TOKEN_ENV)
        if not token:
            token, made = secrets.token_hex(32), True
    serve_forever(
        args.agent,
        host=args.host,
        port=args.port,
        max_wait_s=args.max_wait_ms / 1000,
        batch_size=args.batch_size,
        contract=args.contract,
        max_frame_bytes=int(args.max_frame_mb * 2**20) if args.max_frame_mb else None,
        token=token,
        idle_s=args.idle_s,
        keep=made,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
