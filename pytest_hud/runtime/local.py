"""LocalRuntime: a fresh env server on the caller's loop for every acquisition, from a module path
or a ``build(task)`` callable; sims still run in their own processes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pytest_hud.plumbing.loader import load_module
from pytest_hud.runtime.backends import BackendParts
from pytest_hud.runtime.environment import Environment
from pytest_hud.runtime.modules import module_environments
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.server import EnvServer
from pytest_hud.runtime.task import Task

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import RuntimeSpec
    from pytest_hud.runtime.provider import Provider

__all__ = ["PARTS", "LocalRuntime", "provider"]


class _LocalSubstrate:
    def __init__(self, envs: list[Environment], task: Task) -> None:
        self.server = EnvServer(envs)
        self.task = task

    async def __aenter__(self) -> Runtime:
        url = await self.server.start()
        return Runtime(url, {"kind": "local"}, self.task.runtime_config)

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.server.stop()


class LocalRuntime:
    """Serve a module (path or dotted name) or ``build(task) -> Environment`` in-process."""

    def __init__(self, source: str | Path | Callable[[Task], Environment]) -> None:
        self.source = source

    def __repr__(self) -> str:
        return f"LocalRuntime({self.source!r})"

    def __call__(self, task: Task, /) -> _LocalSubstrate:
        if callable(self.source) and not isinstance(self.source, str | Path):
            env = self.source(task)
            if not isinstance(env, Environment):
                raise TypeError(
                    f"LocalRuntime's build({task.key}) returned {type(env).__name__}; "
                    "it must return an Environment"
                )
            envs = [env]
        else:
            envs = module_environments(load_module(self.source, fresh=True))
        return _LocalSubstrate(envs, task)


def provider(spec: RuntimeSpec) -> Provider:
    """``--hud-runtime=local`` (runtime/backends.py): each row served in-process from the
    module that declares its env."""
    from pytest_hud.runtime.routing import by_declaration, undeclared

    return by_declaration(LocalRuntime, undeclared)


#: the local entry of the backends table (runtime/backends.py): the core's own in-process server
PARTS = BackendParts(provider=provider)
