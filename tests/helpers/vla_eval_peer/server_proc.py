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
    SIGUSR1): ``widths`` (batch width -> batches), ``sessions``, ``connections``,
    ``observations``."""
    path.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return dict(json.loads(path.read_text()))
        except (FileNotFoundError, json.JSONDecodeError):  # not (fully) written yet
            time.sleep(0.05)
    raise TimeoutError(f"the controller server wrote no stats to {path} within {timeout} s")


def pin_apart(proc: subprocess.Popen[str]) -> str:
    """The server's threads on the first CPU, this process (and every child it starts
    from now on) on the others: a model server with a core of its own, as a GPU server on
    its own machine has. On a small VM a server whose threads wake each other across
    idle vCPUs pays for each wake-up, and how often depends on when its clients answer;
    pinned, its cost a step no longer does. Returns a line that says so."""
    cpus = list(range(os.cpu_count() or 1))  # all of them: this process may be pinned already
    if len(cpus) < 2:
        raise RuntimeError(f"pinning the server apart needs 2 CPUs, this machine has {cpus}")
    for task in Path(f"/proc/{proc.pid}/task").iterdir():  # later threads inherit the mask
        os.sched_setaffinity(int(task.name), {cpus[0]})
    os.sched_setaffinity(0, set(cpus[1:]))
    return f"the server pinned to CPU {cpus[0]}, the harness to CPU {','.join(map(str, cpus[1:]))}"
