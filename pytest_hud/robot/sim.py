"""The sim program: ``python -m pytest_hud.robot.sim`` serves one bridge.

Two ways to name the bridge: ``TARGET`` as ``module:Class`` or ``path/to/file.py:Class``
with ``--kwargs JSON``, or ``--stdin`` to read a pickled bridge (a class, an
instance or a ``(callable, kwargs)`` pair) from the first line of stdin, base64
encoded; a RobotEndpoint spawns sims this second way. With ``--lifeline`` the sim
exits when stdin closes, so it never outlives the process that spawned it.
"""

from __future__ import annotations

import argparse
import base64
import importlib
import importlib.util
import json
import pickle
import sys
from pathlib import Path
from typing import Any

from pytest_hud.robot.bridge import RobotBridge, serve_bridge

__all__ = ["PATH_MODULES", "build_bridge", "encode_spec", "load_object", "load_path", "main"]

#: Modules imported from a file path under a name sys.path cannot resolve; a sim
#: process loads these files under the same names before unpickling its spec.
PATH_MODULES: dict[str, str] = {}


def load_path(path: str | Path, name: str | None = None) -> Any:
    """Import a Python file as module ``name`` (default: its stem) and remember the mapping."""
    path = Path(path).resolve()
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    PATH_MODULES[name] = str(path)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        PATH_MODULES.pop(name, None)
        raise
    return module


def load_object(ref: str) -> Any:
    """Import ``module:attr`` or ``path/file.py:attr``."""
    modname, sep, attr = ref.rpartition(":")
    if not sep or not modname or not attr:
        raise ValueError(f"expected MODULE:NAME or FILE.py:NAME, got {ref!r}")
    if modname.endswith(".py") or "/" in modname:
        module = load_path(modname)
    else:
        module = importlib.import_module(modname)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def encode_spec(target: Any, kwargs: dict[str, Any] | None = None) -> bytes:
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


def build_bridge(target: Any, kwargs: dict[str, Any]) -> RobotBridge:
    """A bridge from a class (called with kwargs), a factory, or an instance."""
    if isinstance(target, RobotBridge):
        return target
    if callable(target):
        bridge = target(**kwargs)
        if isinstance(bridge, RobotBridge):
            return bridge
        raise TypeError(f"{target!r} returned {type(bridge).__name__}, not a RobotBridge")
    raise TypeError(f"cannot build a bridge from {target!r}")


def _read_spec() -> tuple[Any, dict[str, Any]]:
    header_line = sys.stdin.buffer.readline()
    data_line = sys.stdin.buffer.readline()
    if not data_line.strip():
        raise SystemExit("pytest_hud.robot.sim --stdin: no bridge spec on stdin")
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
