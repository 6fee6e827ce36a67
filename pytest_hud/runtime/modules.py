"""The environments a module declares, and their tasks: every ``Environment(...)`` registers
with its file (in runtime/task.py, below runtime/environment.py, where ``Taskset.from_module``
reads it), and placement and ``serve`` ask here for them as Environments.
"""

from __future__ import annotations

from pytest_hud.plumbing.loader import load_module
from pytest_hud.runtime.environment import Environment
from pytest_hud.runtime.task import declare, declared_sources, module_tasks, sources_in

__all__ = [
    "declare",
    "declared_environments",
    "environments_in",
    "load_module",
    "module_environments",
    "module_tasks",
]


def declared_environments() -> list[tuple[Environment, str | None]]:
    """Every Environment constructed in this process, with the file that declared it."""
    return [(env, path) for env, path in declared_sources() if isinstance(env, Environment)]


def environments_in(module: object) -> list[Environment]:
    """The Environments among a module's globals (possibly none)."""
    return [env for env in sources_in(module) if isinstance(env, Environment)]


def module_environments(module: object) -> list[Environment]:
    """The Environments a module declares; raises LookupError if it declares none."""
    envs = environments_in(module)
    if not envs:
        where = getattr(module, "__file__", None) or getattr(module, "__name__", module)
        raise LookupError(f"{where} declares no Environment (expected `env = Environment(...)`)")
    return envs
