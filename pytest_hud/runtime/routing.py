"""Routing by declaration, written once: a row is served from its ``module`` column, else the
file whose template made it, else the latest imported declaration of its env.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from pytest_hud.errors import PlacementError
from pytest_hud.runtime.modules import declared_environments
from pytest_hud.runtime.provider import Provider, Runtime
from pytest_hud.runtime.task import Task

__all__ = ["by_declaration", "declaring_file", "undeclared"]


def declaring_file(task: Task) -> str | None:
    """The file declaring ``task.env``: the row's ``module`` column, else the file whose
    template made the row, else the most recent declaration by an already-imported
    module; None when nothing declares it."""
    module = task.metadata.get("module")
    if module:
        return str(module)
    if task.declared_in:
        return task.declared_in
    for env, path in reversed(declared_environments()):
        if env.name == task.env and path:
            return path
    return None


def by_declaration(
    factory: Callable[[str], Provider], missing: Callable[[Task], Exception]
) -> Provider:
    """A provider that serves each row with ``factory(file)`` for its declaring file (one
    per file); ``missing(task)`` is raised for a row nothing declares."""
    cache: dict[str, Provider] = {}

    def pick(task: Task) -> Provider:
        """The provider serving ``task`` (picklable when ``factory``'s is: a delegated
        rollout ships it to a process that has not seen this one's declarations)."""
        path = declaring_file(task)
        if path is None:
            raise missing(task)
        if path not in cache:
            cache[path] = factory(path)
        return cache[path]

    def route(task: Task) -> AbstractAsyncContextManager[Runtime]:
        return pick(task)(task)

    route.pick = pick  # type: ignore[attr-defined]
    return route


def undeclared(task: Task) -> PlacementError:
    return PlacementError(
        f"no module declares env {task.env!r}: import it from a conftest.py or a test "
        "module, add a 'module' column to the row, or pass --hud-runtime=docker:IMAGE / "
        "tcp://HOST:PORT"
    )
