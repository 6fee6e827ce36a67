"""Rows checked at collection against the envs this process can see, so a typo in an env or
template is refused before any item runs instead of erroring every item.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_hud.errors import TaskError
from pytest_hud.runtime.backends import RuntimeSpec
from pytest_hud.runtime.environment import Environment
from pytest_hud.runtime.modules import declared_environments, environments_in, load_module
from pytest_hud.runtime.task import Task

__all__ = ["check_rows"]


def _module_envs(module: str) -> dict[str, Environment] | None:
    try:
        loaded = load_module(module)
    except Exception:  # not importable here (e.g. only inside an image): the runtime decides
        return None
    return {env.name: env for env in environments_in(loaded)}


def _check(row: Task, envs: Mapping[str, Environment], where: str) -> None:
    env = envs.get(row.env)
    if env is None:
        known = ", ".join(sorted(envs)) or "none"
        raise TaskError(
            f"row {row.key}: no env {row.env!r} in {where} (it declares: {known}); "
            "fix the row's env name or import the module that declares it"
        )
    if row.id not in env.templates:
        known = ", ".join(sorted(env.templates)) or "none"
        raise TaskError(
            f"row {row.key}: env {row.env!r} has no template {row.id!r} (its templates: {known})"
        )


def check_rows(rows: Iterable[Task], runtime: RuntimeSpec, *, own_provider: bool = True) -> None:
    """Raise TaskError for a row naming an env or template its known module lacks.
    ``own_provider``: the rows are served by the plugin's ``hud_provider`` (a conftest
    override may serve envs this process never imports, so then only the explicit
    ``module`` column is checked)."""
    routed = runtime.backend.routed  # rows served from their declaring module
    everything = declared_environments() if own_provider else []
    declared = {env.name: env for env, _ in everything}  # the latest declaration of a name
    for row in rows:
        module = row.metadata.get("module")
        if module:
            envs = _module_envs(str(module))
            if envs is not None:
                _check(row, envs, str(module))
        elif row.declared_in and own_provider:
            own = {env.name: env for env, path in everything if path == row.declared_in}
            _check(row, own, row.declared_in)
        elif row.env in declared or (declared and routed):
            _check(row, declared, "the imported env modules")
