"""One acquisition's substrate, booted, awaited and torn down the same way on every backend:
bounded boot, readiness by a real ``ping``, one :class:`SubstrateError` with the output tail,
removal on every way out.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from types import TracebackType
from typing import Any, ClassVar

from pytest_hud.errors import SubstrateError
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.readiness import NotReady, wait_until_ping
from pytest_hud.runtime.task import Task

__all__ = [
    "CONTROL_PORT",
    "PingedSubstrate",
    "Substrate",
    "bounded",
    "died_during",
    "output_tail",
    "serve_argv",
    "serve_ports",
    "setting",
]

log = logging.getLogger(__name__)

#: The port an env server listens on inside a substrate; its sims take the next ones.
CONTROL_PORT = 8000
TAIL_LINES = 40


def serve_argv(python: str, module: str, host: str, sim_ports: int) -> list[str]:
    """``python -m pytest_hud.serve MODULE`` on :data:`CONTROL_PORT` with ``sim_ports``
    sims on the ports after it, every listener bound to ``host``."""
    argv = [python, "-m", "pytest_hud.serve", module, "--host", host]
    argv += ["--port", str(CONTROL_PORT), "--sim-host", host]
    if sim_ports:
        argv += ["--sim-ports", f"{CONTROL_PORT + 1}-{CONTROL_PORT + sim_ports}"]
    return argv


def serve_ports(sim_ports: int) -> list[int]:
    """The control port and ``sim_ports`` sim ports after it (a non-negative count)."""
    if not isinstance(sim_ports, int) or sim_ports < 0:
        raise ValueError(f"sim_ports must be a non-negative int, got {sim_ports!r}")
    return [CONTROL_PORT, *range(CONTROL_PORT + 1, CONTROL_PORT + 1 + sim_ports)]


def setting(task: Task, name: str, default: object = None) -> Any:
    """The row's ``runtime_config.<name>`` when set, else ``default`` (the runtime's own)."""
    cfg = task.runtime_config
    value = getattr(cfg, name, None) if cfg is not None else None
    return value or default


def output_tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a substrate's output, for an error message."""
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(no output)"


async def bounded(call: Awaitable[object], timeout: float) -> None:
    """Await one best-effort teardown call for at most ``timeout`` s; never raises (the
    substrate is going away, and its own error, if any, is the one to report)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(timeout):
            await call


class _Stopped(Exception):
    def __init__(self, how: str) -> None:
        self.how = how


class Substrate(abc.ABC):
    """The way out of every substrate: exiting removes it, and a rollout that failed
    because the substrate died under it fails with how it died (:meth:`death`)."""

    #: what the substrate is, for messages ("modal sandbox", "container")
    kind: ClassVar[str] = "substrate"

    def __init__(self, task: Task) -> None:
        self.task = task

    @abc.abstractmethod
    async def stop(self) -> None:
        """Remove the substrate (idempotent); raise SubstrateError if it could not."""

    async def death(self) -> str | None:
        """How the substrate died during a rollout (with its output's tail), or None
        while it runs (the default: the rollout's own error stands)."""
        return None

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        note = None
        if isinstance(e, Exception):
            with contextlib.suppress(Exception):
                note = await self.death()
        try:
            await self.stop()
        except Exception as exc:
            if et is None:
                raise SubstrateError(
                    f"{self.task.key}: could not remove its {self.kind}: {exc}"
                ) from exc
            log.warning("%s: could not remove its %s: %s", self.task.key, self.kind, exc)
        if note is not None:  # the rollout's own error was only the symptom
            raise SubstrateError(died_during(self.task, note, e)) from e


class PingedSubstrate(Substrate):
    """A substrate reached over a port or a tunnel: entering boots it and yields its
    Runtime once it answers a control ping. Subclasses implement the hooks below."""

    #: :func:`.readiness.wait_until_ping`'s pacing (delay, max_delay, factor, attempt)
    pacing: ClassVar[dict[str, float]] = {}
    #: read the output only after :meth:`stop` (a stream that ends with the substrate)
    output_after_stop: ClassVar[bool] = False

    def __init__(self, task: Task, boot_timeout: float) -> None:
        super().__init__(task)
        self.boot_timeout = boot_timeout
        #: the boot's deadline on the running loop's clock (set on entering)
        self.deadline = 0.0
        #: seconds from start() to the first ping answered (for logs and reports)
        self.boot_seconds: float | None = None
        self._runtime: Runtime | None = None

    @property
    def name(self) -> str:
        """The substrate as a message names it: its kind and id."""
        return f"{self.kind} {self.ident()}"

    @abc.abstractmethod
    def ident(self) -> str:
        """The substrate's id (a placeholder before it exists)."""

    async def prepare(self) -> None:
        """Work before the boot's clock starts (finding or pulling an image); nothing to
        remove yet if it fails."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Create and start the substrate; raise SubstrateError naming what refused."""

    @abc.abstractmethod
    async def endpoint(self) -> Runtime | None:
        """The Runtime to dial, once it is known (None: ask again later)."""

    @abc.abstractmethod
    async def stopped(self) -> str | None:
        """How the substrate stopped (``exited with code 1``), or None while it runs."""

    @abc.abstractmethod
    async def output(self) -> str:
        """What the substrate printed so far (a note in parentheses when unreadable)."""

    async def _probe(self) -> Runtime | None:
        how = await self.stopped()
        if how is not None:
            raise _Stopped(how)
        if self._runtime is None:
            self._runtime = await self.endpoint()
        return self._runtime

    async def __aenter__(self) -> Runtime:
        await self.prepare()
        loop = asyncio.get_running_loop()
        begun = loop.time()
        self.deadline = deadline = begun + self.boot_timeout
        try:
            async with asyncio.timeout_at(deadline):
                await self.start()
                runtime = await wait_until_ping(self._probe, deadline=deadline, **self.pacing)
            self.boot_seconds = loop.time() - begun
            log.debug("%s: %s ready in %.2fs", self.task.key, self.name, self.boot_seconds)
            return runtime
        except _Stopped as exc:
            why = f"{exc.how} before its env server answered a control ping"
        except TimeoutError as exc:  # NotReady, or the deadline hit start() or a probe
            last = f" (last attempt: {exc.last})" if isinstance(exc, NotReady) else ""
            why = f"did not answer a control ping within boot_timeout={self.boot_timeout} s{last}"
        except BaseException:
            await self._stop_quietly()
            raise
        name = self.name  # before stop() forgets the substrate's id
        tail = "" if self.output_after_stop else output_tail(await self.output())
        await self._stop_quietly()
        tail = tail or output_tail(await self.output())
        raise SubstrateError(
            f"{self.task.key}: {name} {why} (removed); the last lines of its output:\n{tail}"
        ) from None

    async def _stop_quietly(self) -> None:
        try:
            await self.stop()
        except Exception as exc:  # the boot's own error is the one to report
            log.warning("%s: could not remove %s: %s", self.task.key, self.name, exc)


def died_during(task: Task, note: str, symptom: BaseException | None) -> str:
    """The error of a rollout whose substrate died under it: which, how, and what it saw."""
    return f"{task.key}: {note}\n(the rollout saw: {type(symptom).__name__}: {symptom})"
