"""One checkpoint's evaluation as a child pytest session, so a crash never takes the watcher down;
SIGINT, then SIGKILL, stop it, and it dies with the watcher.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Evaluation", "pytest_argv", "run_session"]


@dataclass
class Evaluation:
    exit_code: int
    started: float
    finished: float
    log: Path
    timed_out: bool = False


def pytest_argv(
    pytest_args: Sequence[str],
    *,
    agent: str,
    step: int,
    results: Path,
    ledger: Path,
    log_dir: Path,
    log_run: str,
) -> list[str]:
    """The child's ``python -m pytest`` command for one checkpoint."""
    argv = [sys.executable, "-m", "pytest", *pytest_args, "-p", "no:cacheprovider",
            f"--hud-agent={agent}", f"--hud-checkpoint={step}", f"--hud-results={results}",
            f"--hud-ledger={ledger}", f"--hud-log-step={step}"]  # fmt: skip
    if ledger.is_file():  # an interrupted evaluation of this checkpoint keeps its episodes
        argv.append(f"--hud-resume={ledger}")
    given = " ".join(pytest_args)
    if "--hud-log-dir" not in given:
        argv.append(f"--hud-log-dir={log_dir}")
    if "--hud-log-run" not in given:
        argv.append(f"--hud-log-run={log_run}")
    return argv


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG


def _stop(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGINT to the child's group (pytest's Ctrl-C), SIGKILL after ``grace`` seconds."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGKILL, 30.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_session(
    argv: list[str],
    log: Path,
    *,
    nice: int = 10,
    timeout: float | None = None,
    grace: float = 60.0,
    cwd: Path | None = None,
) -> Evaluation:
    """Run ``argv`` with its output in ``log``; its exit code. Ctrl-C stops the child and
    then reaches the caller as KeyboardInterrupt; ``timeout`` (seconds) stops it too."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if nice and shutil.which("nice"):
        argv = ["nice", "-n", str(nice), *argv]
    started = time.time()
    linux = sys.platform.startswith("linux")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent if linux else None,  # the watcher runs no threads
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = False
        try:
            while True:
                try:
                    code = proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    if deadline is not None and time.monotonic() > deadline:
                        _stop(proc, grace)
                        code, timed_out = proc.returncode, True
                        out.write(f"\n[watch] stopped after {timeout:.0f} s\n".encode())
                        break
        except BaseException:  # Ctrl-C, SIGTERM: the child stops as pytest does, then us
            _stop(proc, grace)
            raise
    return Evaluation(code, started, time.time(), log, timed_out)
