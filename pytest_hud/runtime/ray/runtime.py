"""RayRuntime: each lease's env server runs in a Ray actor placed by Ray's scheduler.

Ray carries no episode traffic. A request no node can hold fails at once; an actor that dies
mid-episode is an error naming it, its node and its log tail.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_hud.errors import SubstrateError
from pytest_hud.plumbing.auth import auth_env
from pytest_hud.plumbing.cluster import connect
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.ray.resources import feasibility, placement_options, requested
from pytest_hud.runtime.substrate import Substrate, bounded
from pytest_hud.runtime.task import Task, memory_mib

__all__ = ["RayRuntime", "live_actors"]

log = logging.getLogger(__name__)
_STOP_TIMEOUT = 15.0
_TAIL_LINES = 40
_LIVE: dict[str, Any] = {}  # actor id -> handle, for the atexit backstop


def live_actors() -> list[str]:
    """Ids of the actors this process created and has not killed yet."""
    return sorted(_LIVE)


@atexit.register
def _kill_leftovers() -> None:
    if not _LIVE:
        return
    import ray

    for handle in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)
    _LIVE.clear()


def _actor_log(actor_id: str) -> str:
    try:
        from ray.util.state import get_log

        text = "".join(get_log(actor_id=actor_id, tail=_TAIL_LINES, timeout=10))
    except Exception as exc:
        return f"(its log is unavailable: {type(exc).__name__}: {str(exc)[:200]})"
    return text.rstrip() or "(empty log)"


class _RaySubstrate(Substrate):
    kind = "Ray actor"

    def __init__(self, owner: RayRuntime, task: Task, module: str) -> None:
        super().__init__(task)
        self.owner = owner
        self.module = module
        self.handle: Any = None
        self.actor_id = ""
        self.info: dict[str, Any] = {}

    async def __aenter__(self) -> Runtime:
        owner = self.owner
        await asyncio.to_thread(connect, owner.address, owner.runtime_env)
        options = owner.actor_options(self.task)
        reason = await asyncio.to_thread(feasibility, requested(options))
        if reason is not None:
            raise SubstrateError(f"{self.task.key}: a Ray actor for its env server: {reason}")
        try:
            async with asyncio.timeout(owner.boot_timeout):
                return await self._boot(options)
        except TimeoutError:
            await self.stop()
            raise SubstrateError(
                f"{self.task.key}: the Ray actor for its env server was not serving within "
                f"boot_timeout={owner.boot_timeout} s (killed): it waited for resources "
                f"{requested(options)} that stayed busy, or the server did not start"
            ) from None
        except BaseException:
            await self.stop()
            raise

    async def _boot(self, options: dict[str, object]) -> Runtime:
        import ray

        from pytest_hud.runtime.ray.env_server import EnvServerActor

        actor_cls = ray.remote(EnvServerActor)
        self.handle = actor_cls.options(**options).remote()
        self.actor_id = self.handle._actor_id.hex()
        _LIVE[self.actor_id] = self.handle
        try:
            self.info = await self.handle.start.remote(
                self.module, self.owner.host, self.owner.boot_timeout, auth_env()
            )
        except ray.exceptions.RayTaskError as exc:
            raise SubstrateError(
                f"{self.task.key}: the env server in Ray actor {self.actor_id} would not "
                f"start: {exc.cause if exc.cause is not None else exc}"
            ) from None
        host = self.info["host"]
        stray = [f"{ip}:{port}" for ip, port in self.info["ports"] if ip != host]
        if stray:
            raise SubstrateError(
                f"{self.task.key}: the env server in Ray actor {self.actor_id} listens beyond "
                f"its node's address {host}: {stray}"
            )
        return Runtime(
            self.info["url"],
            {
                "kind": "ray",
                "actor": self.actor_id,
                "node_id": self.info["node_id"],
                "node_ip": self.info["node_ip"],
                "ports": [list(p) for p in self.info["ports"]],
                "host": host,
            },
            self.task.runtime_config,
        )

    async def death(self) -> str | None:
        """A message naming the node and the log tail when the actor is dead, else None."""
        import ray

        if self.handle is None:
            return None
        try:
            async with asyncio.timeout(10):
                await self.handle.returncode.remote()
            return None
        except (ray.exceptions.RayActorError, TimeoutError) as exc:
            cause = str(exc).strip().splitlines()
            log = await asyncio.to_thread(_actor_log, self.actor_id)
            return (
                f"Ray actor {self.actor_id} (env server) died mid-episode on "
                f"node {self.info.get('node_id', '?')} ({self.info.get('node_ip', '?')}); "
                f"Ray says: {' '.join(cause)[:600]}\nits log tail:\n{log}"
            )

    async def stop(self) -> None:
        handle, self.handle = self.handle, None
        if handle is None:
            return
        import ray

        await bounded(handle.stop.remote(), _STOP_TIMEOUT)
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)
        _LIVE.pop(self.actor_id, None)


class RayRuntime:
    """Serve an env module in a Ray actor per acquisition (see the module docs).

    ``module`` is a file path (it must exist on the node: same machine, a shared
    folder or ``runtime_env={"working_dir": ...}``), a dotted name, or ``(task) ->
    either``. ``num_cpus`` defaults to 1 (the server and its sim); ``resources``,
    ``num_gpus`` and ``memory`` add to what each row's ``runtime_config`` asks.
    ``host`` overrides the address the server binds (default: the node's IP).
    """

    def __init__(
        self,
        module: str | Path | Callable[[Task], str | Path],
        *,
        resources: Mapping[str, float] | None = None,
        num_cpus: float = 1,
        num_gpus: float | None = None,
        memory: int | str | None = None,
        runtime_env: Mapping[str, object] | None = None,
        address: str | None = None,
        host: str | None = None,
        boot_timeout: float = 300.0,
    ) -> None:
        self.module = module
        self.resources = dict(resources or {})
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.memory = memory
        memory_mib(memory)  # fail early on a malformed value
        self.runtime_env = dict(runtime_env) if runtime_env is not None else None
        self.address = address
        self.host = host
        self.boot_timeout = boot_timeout

    def __repr__(self) -> str:
        return f"RayRuntime({self.module!r}, resources={self.resources!r})"

    def __call__(self, task: Task, /) -> _RaySubstrate:
        module = self.module(task) if callable(self.module) else self.module
        text = str(module)
        if text.endswith(".py"):
            text = str(Path(text).resolve())
        return _RaySubstrate(self, task, text)

    def actor_options(self, task: Task) -> dict[str, object]:
        """``.options(...)`` of the task's actor: the row's runtime_config on top of ours."""
        options = placement_options(
            task,
            num_cpus=self.num_cpus,
            num_gpus=self.num_gpus,
            memory=self.memory,
            resources=self.resources,
            runtime_env=self.runtime_env,
        )
        return {**options, "max_restarts": 0}
