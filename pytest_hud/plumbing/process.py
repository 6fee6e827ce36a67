"""Child processes that announce themselves with a ready line, in their own process group with a
stdin lifeline; stopping escalates to SIGTERM and SIGKILL, every wait bounded.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_hud.errors import HudError
from pytest_hud.plumbing.auth import session_secret

if TYPE_CHECKING:
    from pytest_hud.forkserver.client import ForkedProcess

__all__ = [
    "Child",
    "ChildError",
    "child_env",
    "describe_exit",
    "environ_snapshot",
    "serve_until_stopped",
    "set_env",
]


class ChildError(HudError, RuntimeError):
    """A child would not start: it exited first, or never announced itself in time."""


def environ_snapshot() -> dict[str, str]:
    """A copy of ``os.environ`` that is safe while other threads set and delete variables.

    ``dict(os.environ)`` and ``os.environ.copy()`` list the keys, then look each one
    up: a key another thread deletes in between raises KeyError (pytest's main thread
    sets and deletes ``PYTEST_CURRENT_TEST`` around every phase while rollouts spawn
    children from the loop thread: 16 KeyErrors in 10,370 calls). ``os.environ``
    keeps its encoded variables in a plain dict of bytes; ``dict.copy()`` of that is a
    single C call that runs no Python code and never releases the GIL, so no other
    thread can change it midway. The bytes are then decoded as ``os.environ`` does.
    """
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):
        raw = data.copy()  # atomic under the GIL (see above)
        decode_key, decode_value = os.environ.decodekey, os.environ.decodevalue
        return {decode_key(k): decode_value(v) for k, v in raw.items()}
    for _ in range(100):  # pragma: no cover - an interpreter without _Environ._data
        with contextlib.suppress(KeyError):
            return dict(os.environ)
    return dict(os.environ)  # pragma: no cover


def set_env(name: str, value: str) -> Callable[[], None]:
    """Set ``name`` for the children this process starts from now on; returns the call that
    gives the variable back (an in-process session, ``evaluate()`` or pytester, restores
    it at its end)."""
    before = os.environ.get(name)

    def restore() -> None:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before

    os.environ[name] = value
    return restore


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment plus sys.path as PYTHONPATH, so the child imports alike,
    and the session's secret, so the servers it starts serve this session only."""
    session_secret()
    env = environ_snapshot()
    paths = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([os.getcwd(), *paths]))
    env["PYTEST_HUD_LIFELINE"] = "1"
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


class Child:
    """One spawned child; ``await Child.spawn(...)`` returns once it announced itself."""

    def __init__(self, proc: asyncio.subprocess.Process | ForkedProcess, what: str) -> None:
        self.proc = proc
        self.what = what
        self.info: dict[str, Any] = {}
        self._tail: collections.deque[str] = collections.deque(maxlen=60)
        self._drain: asyncio.Task[None] | None = None
        #: print every line the child writes to this process's stdout too (a Ray actor's
        #: log then holds its server's output, readable after the actor died)
        self.echo = False

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        announce: str | None,
        timeout: float,
        what: str = "child process",
        env: dict[str, str] | None = None,
        stdin: bytes = b"",
        echo: bool = False,
        fork: bool = False,
    ) -> Child:
        """Spawn ``argv``; with ``fork`` (``[python, "-m", module, ...]`` only), a zygote
        forks it pre-imported when it can (:mod:`pytest_hud.forkserver`), else as always."""
        env = env if env is not None else child_env()
        proc: Any = None
        if fork:
            from pytest_hud.forkserver.client import spawn as forked

            proc = await forked(argv, env)
        if proc is None:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                start_new_session=True,
                limit=1 << 20,
            )
        child = cls(proc, what)
        child.echo = echo
        if announce is None:  # a child that prints no ready line (ssh -N): caller probes it
            child._drain = asyncio.create_task(child._drain_output())
            return child
        try:
            await child._wait_ready(announce, timeout, stdin)
        except BaseException:
            await child.terminate()
            raise
        return child

    async def _wait_ready(self, announce: str, timeout: float, stdin: bytes) -> None:
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        if stdin:
            proc.stdin.write(stdin)
            await proc.stdin.drain()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    line = await proc.stdout.readline()
                    if not line:
                        rc = await proc.wait()
                        raise ChildError(
                            f"{self.what} exited with code {rc} before serving; "
                            f"its output:\n{self.log_tail()}"
                        )
                    text = line.decode(errors="replace").rstrip("\n")
                    if text.startswith(announce + " "):
                        self.info = json.loads(text[len(announce) + 1 :])
                        break
                    self._note(text)
        except TimeoutError:
            raise ChildError(
                f"{self.what} did not announce itself within {timeout} s (expected a "
                f"'{announce} {{...}}' line on stdout); its output:\n{self.log_tail()}"
            ) from None
        self._drain = asyncio.create_task(self._drain_output())

    async def _drain_output(self) -> None:
        assert self.proc.stdout is not None
        with contextlib.suppress(Exception):
            while line := await self.proc.stdout.readline():
                self._note(line.decode(errors="replace").rstrip("\n"))

    def _note(self, text: str) -> None:
        self._tail.append(text)
        if self.echo:
            print(text, flush=True)

    @property
    def forked(self) -> bool:
        """Whether a zygote forked this child (else it was spawned plainly)."""
        return not isinstance(self.proc, asyncio.subprocess.Process)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the child printed (stdout and stderr)."""
        return "\n".join(list(self._tail)[-lines:]) or "(no output)"

    async def drained(self, timeout: float) -> None:
        """Wait up to ``timeout`` until the child's output is read to its end (an exited
        child's last lines can still be in the pipe when its exit code is known)."""
        if self._drain is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._drain), timeout)

    async def exited(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` for the child to exit; its return code, or None."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                return await self.proc.wait()
        return None

    async def death(self, grace: float = 1.0) -> str | None:
        """Why the child is gone (how it exited, its last output), or None if it still runs.

        Waits up to ``grace`` s: a peer's connection may drop a moment before the
        child's exit is reaped.
        """
        rc = await self.exited(grace)
        if rc is None:
            return None
        return (
            f"{self.what} (pid {self.pid}) {describe_exit(rc)}; its last output:\n{self.log_tail()}"
        )

    async def terminate(self) -> None:
        """Close the lifeline, then SIGTERM, then SIGKILL the group; reap it."""
        proc = self.proc
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        for sig, grace in ((None, 2.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if proc.returncode is not None:
                break
            if sig is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
            await self.exited(grace)
        if proc.returncode is None:  # pragma: no cover - SIGKILL always lands
            await proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers in the group
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drain
            self._drain = None


def describe_exit(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by signal SIGKILL (9)``."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "an unknown signal"
    return f"was killed by signal {name} ({-returncode})"


def serve_until_stopped(
    serve: Callable[[], Awaitable[None]], *, lifeline: bool | None = None
) -> None:
    """Run ``serve()`` (a child's main coroutine) until SIGTERM, Ctrl-C or, with
    ``lifeline`` (default ``$PYTEST_HUD_LIFELINE == "1"``), end-of-file on stdin: the
    parent that spawned us is gone. Cancelling ``serve`` lets it clean up; a teardown
    that wedges (a sim stuck in C code) still ends the process 15 s later.
    """
    if lifeline is None:
        lifeline = os.environ.get("PYTEST_HUD_LIFELINE") == "1"

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, task.cancel)
        if lifeline:
            threading.Thread(
                target=_watch_lifeline, args=(loop, task), name="pytest-hud-lifeline", daemon=True
            ).start()
        await serve()

    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(main())


def _watch_lifeline(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
    # The raw fd, not sys.stdin: a blocked sys.stdin.buffer.read holds the reader's lock,
    # and a process the sim forks (multiprocessing, gymnasium's AsyncVectorEnv) inherits
    # it held: its bootstrap's sys.stdin.close() then waited forever.
    with contextlib.suppress(Exception):
        fd = sys.stdin.fileno()
        while os.read(fd, 4096):
            pass
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(task.cancel)
    timer = threading.Timer(15.0, os._exit, args=(3,))
    timer.daemon = True
    timer.start()
