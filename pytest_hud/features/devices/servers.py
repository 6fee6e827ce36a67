"""The session's model servers, owned by the xdist controller as it owns every substrate: each one
a child process (:mod:`pytest_hud.robot.agent.model_server`) started once, watched (its exit,
and ``GET /healthz`` every few seconds), its figures read on request, and stopped with the
session (lifeline, SIGTERM, SIGKILL of its group; its stdin's end also stops it when the
controller dies without a word). Its announcement is written to its folder, where the workers,
started while it loads, read it; one that dies leaves a death note there, which the workers'
rollouts put into their errors instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from pytest_hud.errors import HudError
from pytest_hud.plumbing.process import Child, ChildError, child_env, describe_exit
from pytest_hud.robot.agent.model_server import ANNOUNCE

__all__ = ["DEATH", "ModelServer", "Served", "ServerError", "announced", "death_note"]

#: The file a dead server's description is written to, in its folder.
DEATH = "death.txt"
#: The file its announcement is written to once it serves, or says it cannot (workers read
#: it: they start while it loads); ``{"error": ...}`` when it would not start.
ANNOUNCED = "announced.json"
#: Seconds between health checks; failed checks in a row that count as dead.
HEALTH_EVERY, HEALTH_MISSES = 5.0, 3


class ServerError(HudError, RuntimeError):
    """A model server that would not start (its output says why)."""


@dataclass(frozen=True)
class Served:
    """What a worker needs of one server: where it serves, its folder (death note), its
    device, and the agent's shell to rebuild around it."""

    spec: str
    device: str
    url: str
    folder: str
    pid: int
    shell: str  # base64 of the pickled shell

    @classmethod
    def of(cls, spec: str, folder: str | Path, found: Mapping[str, object]) -> Served:
        """The server of ``spec`` whose folder this is, from what it announced (url, pid,
        shell, device)."""
        return cls(
            spec,
            str(found["device"]),
            str(found["url"]),
            str(folder),
            int(str(found["pid"])),
            str(found["shell"]),
        )


def announced(folder: str | Path, timeout: float) -> dict[str, object]:
    """What the server whose folder this is announced (url, pid, shell; or servable False
    and why; or ``{"error": ...}``), waiting up to ``timeout`` s for it: a worker asks once
    its model is needed, and the controller has waited for it by then."""
    path = Path(folder) / ANNOUNCED
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            found = json.loads(path.read_text())
            if isinstance(found, dict):
                return found
        if time.monotonic() >= deadline:
            return {"error": f"the session's model server wrote nothing to {path} in {timeout:g} s"}
        time.sleep(0.1)


def death_note(folder: str | Path) -> str | None:
    """What became of the server whose folder this is (None: it was not seen to die)."""
    path = Path(folder) / DEATH
    with contextlib.suppress(OSError):
        return path.read_text()
    return None


@dataclass(eq=False)
class ModelServer:
    """One server of ``spec``'s model on ``device`` (the session's name for it), whose
    process starts with ``env`` added (the device as it sees it, the one GPU it sees)."""

    spec: str
    device: str
    folder: Path
    env: dict[str, str]
    _: KW_ONLY
    connections: int = 256
    window_ms: float = 5.0
    #: the announced facts (url, pid, shell; or servable False and why)
    info: dict[str, object] = field(default_factory=dict, init=False)
    #: how it died, if it did before being stopped
    death: str | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _ready: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    _stop: asyncio.Event | None = field(default=None, init=False, repr=False)
    _error: str | None = field(default=None, init=False, repr=False)
    _timeout: float = field(default=0.0, init=False, repr=False)

    @property
    def what(self) -> str:
        return f"the model server of --hud-agent={self.spec} on {self.device}"

    @property
    def stats_path(self) -> Path:
        return self.folder / "stats.json"

    # -- start ------------------------------------------------------------------------
    def launch(self, timeout: float) -> None:
        """Start it and return at once (the workers start while it loads its model, at most
        ``timeout`` seconds); :meth:`wait` for it to serve."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._timeout = timeout
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._own(timeout),), name="pytest-hud-model-server"
        )
        self._thread.daemon = True  # never holds the interpreter at exit; stop() joins it
        self._thread.start()

    def wait(self) -> None:
        """Wait until it serves (or says its agent is not servable); ServerError with its
        output otherwise (its announcement then says so to the workers, too)."""
        if not self._ready.wait(self._timeout + 30):
            self._error = f"{self.what} gave no sign within {self._timeout + 30:g} s"
            self._announce({"error": self._error})
            self.stop()
        if self._error is not None:
            raise ServerError(self._error)

    def _announce(self, found: dict[str, object]) -> None:
        """Write what it announced (or why it did not) where the workers look, whole."""
        part = self.folder / (ANNOUNCED + ".part")
        with contextlib.suppress(OSError):
            part.write_text(json.dumps({**found, "device": self.device}))
            os.replace(part, self.folder / ANNOUNCED)

    def _argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pytest_hud.robot.agent.model_server",
            "--agent",
            self.spec,
            "--device",
            self.device,
            "--stats",
            str(self.stats_path),
            "--window-ms",
            f"{self.window_ms:g}",
            "--connections",
            str(self.connections),
        ]

    async def _own(self, timeout: float) -> None:
        """The owner's life: spawn, wait for the announce, watch until stopped or dead,
        then terminate (this coroutine is the thread's whole loop)."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        env = child_env(**self.env)
        try:
            child = await Child.spawn(
                self._argv(), announce=ANNOUNCE, timeout=timeout, what=self.what, env=env
            )
        except ChildError as exc:
            self._error = str(exc)
            self._announce({"error": self._error})
            self._ready.set()
            return
        self.info = dict(child.info)
        self._announce(self.info)
        self._ready.set()
        if not self.info.get("servable"):
            await child.terminate()
            return
        stopped = asyncio.ensure_future(self._stop.wait())
        exited = asyncio.ensure_future(child.proc.wait())
        health = asyncio.ensure_future(self._watch_health())
        try:
            await asyncio.wait({stopped, exited, health}, return_when=asyncio.FIRST_COMPLETED)
            if not stopped.done():  # it died, or stopped answering: say so, then end it
                if health.done():
                    how = f"{health.result()}: killed"
                else:
                    await child.drained(2.0)
                    rc = await child.exited(2.0)
                    how = describe_exit(rc) if rc is not None else "exited"
                self._note_death(f"{self.what} (pid {child.pid}) {how}", child.log_tail())
        finally:
            for task in (stopped, exited, health):
                task.cancel()
            await child.terminate()

    async def _watch_health(self) -> str:
        """Wait until ``GET /healthz`` fails HEALTH_MISSES times in a row; what it saw."""
        url = str(self.info["url"])
        host, _, port = url.removeprefix("ws://").rpartition(":")
        misses, last = 0, ""
        while misses < HEALTH_MISSES:
            await asyncio.sleep(HEALTH_EVERY)
            try:
                async with asyncio.timeout(HEALTH_EVERY * 2):
                    reader, writer = await asyncio.open_connection(host, int(port))
                    writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
                    await writer.drain()
                    status = await reader.readline()
                    writer.close()
                ok = b" 200 " in status
                last = status.decode(errors="replace").strip() or "no answer"
            except (OSError, TimeoutError) as exc:
                ok, last = False, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            misses = 0 if ok else misses + 1
        return (
            f"did not answer its health check (GET /healthz) {HEALTH_MISSES} times in a row "
            f"over {HEALTH_MISSES * HEALTH_EVERY:g} s (last: {last})"
        )

    def _note_death(self, what: str, output: str) -> None:
        """Say (in :attr:`death` and the death note its workers read) how it died, what to
        do, and its last output."""
        self.death = (
            f"{what}; the rollouts it served are errors; fix: read its output below (out of "
            "memory: fewer rollouts in flight, --hud-concurrency, or more devices, "
            "--hud-devices; a crash in the model: --hud-model-placement=worker runs it in "
            f"each worker)\nits last output:\n{output}"
        )
        part = self.folder / (DEATH + ".part")
        with contextlib.suppress(OSError):
            part.write_text(self.death)
            os.replace(part, self.folder / DEATH)

    # -- while it runs ------------------------------------------------------------------
    @property
    def served(self) -> Served:
        return Served.of(self.spec, self.folder, {**self.info, "device": self.device})

    def stats(self, timeout: float = 15.0) -> dict[str, object] | None:
        """Its figures now (None: it is gone, or wrote none within ``timeout`` s)."""
        pid = self.info.get("pid")
        if self.death is not None or not isinstance(pid, int):
            return None
        self.stats_path.unlink(missing_ok=True)
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError:
            return None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                found = json.loads(self.stats_path.read_text())
                if isinstance(found, dict):
                    return found
            time.sleep(0.05)
        return None

    # -- the end ------------------------------------------------------------------------
    def stop(self, timeout: float = 30.0) -> None:
        """Stop it (bounded; idempotent) and remove its folder."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # its loop just ended
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
        shutil.rmtree(self.folder, ignore_errors=True)
