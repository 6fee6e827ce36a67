"""Start controller_server.py in a process of its own and stop it (bounded, no leak)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "controller_server.py"


@contextlib.contextmanager
def controller_server(
    *args: str,
    timeout: float = 60.0,
    python: str | Path = sys.executable,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """``(port, process)`` of a BalanceServer bound to 127.0.0.1 (run by ``python``, with
    ``env``, default this process's)."""
    proc = subprocess.Popen(
        [str(python), str(SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
        cwd=cwd,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    try:
        if not line or not line[0].startswith("PORT "):
            raise RuntimeError(f"controller server did not start within {timeout} s: {line}")
        yield int(line[0].split()[1]), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def server_stats(proc: subprocess.Popen[str], path: Path, timeout: float = 30.0) -> dict[str, Any]:
    """What the server started with ``--stats PATH`` saw since the last call (it dumps on
    SIGUSR1): ``widths`` (batch width -> batches), ``sessions``, ``observations``."""
    path.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return dict(json.loads(path.read_text()))
        except (FileNotFoundError, json.JSONDecodeError):  # not (fully) written yet
            time.sleep(0.05)
    raise TimeoutError(f"the controller server wrote no stats to {path} within {timeout} s")
