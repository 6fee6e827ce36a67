"""``python -m pytest_hud.robot.sim``: serve one bridge, named ``module:Class`` or pickled on
stdin; with ``--lifeline`` it exits when stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib.util
import json
import os
import pickle
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_hud.plumbing.auth import server_secret
from pytest_hud.plumbing.loader import PATH_MODULES, load_object, load_path
from pytest_hud.plumbing.process import serve_until_stopped
from pytest_hud.plumbing.rpc import serve_rpc
from pytest_hud.robot.sim.bridge import ANNOUNCE, RobotBridge

__all__ = ["build_bridge", "encode_spec", "main", "run_bridge", "serve_bridge"]


_tuned = False


def tune_allocator() -> bool:
    """Keep camera-sized buffers on glibc's heap instead of a fresh mmap per frame.

    A 150 KB frame is above glibc's default mmap threshold, so every pack and receive
    maps and unmaps pages (page faults on every step). Raising the mmap and trim
    thresholds once per process removes that; elsewhere this does nothing. Returns
    whether it applied. Called only here, in a sim process: the pytest process (torch's
    allocator, the user's code) keeps the allocator settings it started with.
    """
    global _tuned
    if _tuned:
        return True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        ok = libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024) == 1
        ok = libc.mallopt(m_trim_threshold, 256 * 1024 * 1024) == 1 and ok
    except (OSError, AttributeError):
        return False
    _tuned = ok
    return ok


async def run_bridge(
    bridge: RobotBridge,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    control_host: str = "127.0.0.1",
    control_port: int = 0,
    announce: Callable[[dict[str, str]], None] | None = None,
) -> None:
    """Serve ``bridge`` and its control channel until cancelled."""
    url = await bridge.start(host, port)
    server = await serve_rpc(bridge.control, control_host, control_port, secret=server_secret())
    try:
        cport = next(iter(server.sockets)).getsockname()[1]
        if announce is not None:
            announce({"url": url, "control": f"tcp://{control_host}:{cport}"})
        await asyncio.Event().wait()
    finally:
        server.close()
        await bridge.stop()


def serve_bridge(
    bridge: RobotBridge,
    *,
    host: str | None = None,
    port: int | None = None,
    control_port: int = 0,
    lifeline: bool | None = None,
) -> None:
    """Serve ``bridge`` from this (main) thread until SIGTERM, Ctrl-C or, with
    ``lifeline`` (default: ``$PYTEST_HUD_LIFELINE == "1"``, set by RobotEndpoint, as are
    ``$PYTEST_HUD_SIM_HOST`` and ``$PYTEST_HUD_SIM_PORT``, the defaults of host and port),
    end-of-file on stdin (the parent died). Announces its addresses on
    stdout as ``PYTEST_HUD_SIM {"url": ..., "control": ...}``.
    """

    tune_allocator()
    if host is None:
        host = os.environ.get("PYTEST_HUD_SIM_HOST") or "127.0.0.1"
    if port is None:
        port = int(os.environ.get("PYTEST_HUD_SIM_PORT") or 0)

    def announce(info: dict[str, str]) -> None:
        print(f"{ANNOUNCE} {json.dumps(info)}", flush=True)

    serve_until_stopped(
        lambda: run_bridge(
            bridge, host=host, port=port, control_port=control_port, announce=announce
        ),
        lifeline=lifeline,
    )


def encode_spec(target: object, kwargs: Mapping[str, object] | None = None) -> bytes:
    """What the child builds its bridge from: a JSON header line and a base64 pickle line.

    Classes and functions travel by reference (the child imports them), so they
    must be importable: defined at module level, not in a closure or a lambda.
    Objects from a script's ``__main__`` work: the child loads that script first.
    """
    main = sys.modules.get("__main__")
    header = {"main_path": getattr(main, "__file__", None), "modules": dict(PATH_MODULES)}
    try:
        data = pickle.dumps({"target": target, "kwargs": kwargs or {}}, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise TypeError(
            f"cannot send {target!r} to the sim process ({exc}); the sim runs in its own "
            "process, so pass a module-level class or factory function (not a lambda, a "
            "closure or an object holding open resources)"
        ) from exc
    return json.dumps(header).encode() + b"\n" + base64.b64encode(data) + b"\n"


def _load_main(path: str) -> None:
    spec = importlib.util.spec_from_file_location("__mp_main__", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["__mp_main__"] = module
    spec.loader.exec_module(module)
    sys.modules["__main__"] = module


def build_bridge(target: object, kwargs: Mapping[str, object]) -> RobotBridge:
    """A bridge from a class (called with kwargs), a factory, or an instance."""
    if isinstance(target, RobotBridge):
        return target
    if callable(target):
        bridge = target(**kwargs)
        if isinstance(bridge, RobotBridge):
            return bridge
        raise TypeError(f"{target!r} returned {type(bridge).__name__}, not a RobotBridge")
    raise TypeError(f"cannot build a bridge from {target!r}")


def _read_spec() -> tuple[object, dict[str, object]]:
    header_line = sys.stdin.buffer.readline()
    data_line = sys.stdin.buffer.readline()
    if not data_line.strip():
        raise SystemExit("pytest_hud.robot.sim.program --stdin: no bridge spec on stdin")
    data = base64.b64decode(data_line)
    header = json.loads(header_line)
    main_path = header.get("main_path")
    if b"__main__" in data and main_path and Path(main_path).exists():
        _load_main(main_path)
    for name, path in (header.get("modules") or {}).items():
        if name.encode() in data and name not in sys.modules and Path(path).exists():
            load_path(path, name)
    payload = pickle.loads(data)
    return payload["target"], payload["kwargs"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_hud.robot.sim", description=__doc__)
    parser.add_argument("target", nargs="?", help="module:Class or file.py:Class")
    parser.add_argument("--kwargs", default="{}", help="JSON keyword arguments for the class")
    parser.add_argument("--stdin", action="store_true", help="read a pickled spec from stdin")
    parser.add_argument("--lifeline", action="store_true", help="exit when stdin closes")
    parser.add_argument("--host", default=None, help="agent WebSocket host ($PYTEST_HUD_SIM_HOST)")
    parser.add_argument("--port", type=int, default=None, help="agent WebSocket port")
    parser.add_argument("--control-port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.stdin:
        target, kwargs = _read_spec()
    elif args.target:
        target, kwargs = load_object(args.target), json.loads(args.kwargs)
    else:
        parser.error("name a bridge as TARGET or pass --stdin")
    bridge = build_bridge(target, kwargs)
    serve_bridge(
        bridge,
        host=args.host,
        port=args.port,
        control_port=args.control_port,
        lifeline=args.lifeline or None,
    )


if __name__ == "__main__":
    main()
