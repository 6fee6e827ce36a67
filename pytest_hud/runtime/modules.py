"""The environments a module declares, and their tasks: every ``Environment(...)`` registers here
with its file, and placement, ``serve`` and ``Taskset.from_module`` all ask here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_hud.plumbing.loader import load_module

if TYPE_CHECKING:
    from pytest_hud.runtime.environment import Environment
    from pytest_hud.runtime.task import Task

__all__ = [
    "declare",
    "declared_environments",
    "environments_in",
    "load_module",
    "module_environments",
    "module_tasks",
]

_DECLARED: list[tuple[Environment, str | None]] = []
_IDS: set[int] = set()  # the registry holds each env, so an id is never reused


def declare(env: Environment, declared_in: str | None) -> None:
    """Record a newly constructed Environment and the file that declared it."""
    _DECLARED.append((env, declared_in))
    _IDS.add(id(env))


def declared_environments() -> list[tuple[Environment, str | None]]:
    """Every Environment constructed in this process, with the file that declared it."""
    return list(_DECLARED)


def environments_in(module: object) -> list[Environment]:
    """The Environments among a module's globals (possibly none)."""
    return [v for v in vars(module).values() if id(v) in _IDS]


def module_environments(module: object) -> list[Environment]:
    """The Environments a module declares; raises LookupError if it declares none."""
    envs = environments_in(module)
    if not envs:
        where = getattr(module, "__file__", None) or getattr(module, "__name__", module)
        raise LookupError(f"{where} declares no Environment (expected `env = Environment(...)`)")
    return envs


def module_tasks(module: str | Path | Any) -> tuple[list[Task], str | None]:
    """Every task a module's Environments declare, and the module's file (or name)."""
    mod = load_module(module) if isinstance(module, str | Path) else module
    tasks = [t for env in environments_in(mod) for t in env.tasks]
    return tasks, getattr(mod, "__file__", None) or getattr(mod, "__name__", None)
