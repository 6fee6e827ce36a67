"""Start controller_server.py in a process of its own and stop it (bounded, no leak)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "controller_server.py"


@contextlib.contextmanager
def controller_server(
    *args: str, timeout: float = 60.0
) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """``(port, process)`` of a BalanceServer bound to 127.0.0.1."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
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
