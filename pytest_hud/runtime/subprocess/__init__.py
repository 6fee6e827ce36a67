"""SubprocessRuntime: a fresh env server in a child process for every acquisition."""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_hud.errors import SubstrateError
from pytest_hud.plumbing.process import Child, ChildError
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.server import ANNOUNCE
from pytest_hud.runtime.substrate import Substrate
from pytest_hud.runtime.task import Task

__all__ = ["SubprocessRuntime"]


class _ChildSubstrate(Substrate):
    kind = "env server process"

    def __init__(self, argv: list[str], task: Task, boot_timeout: float) -> None:
        super().__init__(task)
        self.argv = argv
        self.boot_timeout = boot_timeout
        self.child: Child | None = None

    async def __aenter__(self) -> Runtime:
        try:
            self.child = await Child.spawn(
                self.argv,
                announce=ANNOUNCE,
                timeout=self.boot_timeout,
                what="env server",
                fork=True,
            )
        except ChildError as exc:
            raise SubstrateError(f"{self.task.key}: {exc}") from None
        return Runtime(
            self.child.info["url"],
            {"kind": "subprocess", "pid": self.child.pid},
            self.task.runtime_config,
        )

    async def death(self) -> str | None:
        """How the env server died (exit code or signal, last output); None while it runs."""
        return await self.child.death() if self.child is not None else None

    async def stop(self) -> None:
        if self.child is not None:
            await self.child.terminate()


class SubprocessRuntime:
    """Serve an env module with ``python -m pytest_hud.serve`` in a child process."""

    warm_ahead = True  # a child process per rollout: worth booting ahead (runtime/warm.py)

    def __init__(
        self, module: str | Path, *, boot_timeout: float = 300.0, python: str | None = None
    ) -> None:
        self.module = str(Path(module).resolve()) if str(module).endswith(".py") else str(module)
        self.boot_timeout = boot_timeout
        self.python = python or sys.executable

    def __repr__(self) -> str:
        return f"SubprocessRuntime({self.module!r})"

    def __call__(self, task: Task, /) -> _ChildSubstrate:
        argv = [self.python, "-m", "pytest_hud.serve", self.module, "--lifeline"]
        return _ChildSubstrate(argv, task, self.boot_timeout)
