"""Placement by declaration, written once: a row is served from its ``module`` column, else the
latest imported declaration of its env (:func:`by_declaration`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pytest_hud.loader import load_module
from pytest_hud.runtime.errors import PlacementError
from pytest_hud.runtime.local import LocalRuntime
from pytest_hud.runtime.modules import declared_environments, environments_in
from pytest_hud.runtime.provider import Provider, Runtime
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task
from pytest_hud.runtime.warm import WARM_KINDS

__all__ = [
    "PlacementError",
    "by_declaration",
    "declaring_file",
    "provider_for",
    "resolve_placement",
]


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


def by_declaration(factory: Callable[[str], Any], missing: Callable[[Task], Exception]) -> Provider:
    """A provider that serves each row with ``factory(file)`` for its declaring file (one
    per file); ``missing(task)`` is raised for a row nothing declares."""
    cache: dict[str, Any] = {}

    def pick(task: Task) -> Any:
        """The provider serving ``task`` (picklable when ``factory``'s is: a delegated
        rollout ships it to a process that has not seen this one's declarations)."""
        path = declaring_file(task)
        if path is None:
            raise missing(task)
        if path not in cache:
            cache[path] = factory(path)
        return cache[path]

    def route(task: Task) -> Any:
        return pick(task)(task)

    route.pick = pick  # type: ignore[attr-defined]
    return route


def _undeclared(task: Task) -> PlacementError:
    return PlacementError(
        f"no module declares env {task.env!r}: import it from a conftest.py or a test "
        "module, add a 'module' column to the row, or pass --hud-runtime=docker:IMAGE / "
        "tcp://HOST:PORT"
    )


def resolve_placement(tasks: Iterable[Task], runtime: Provider | None = None) -> Provider:
    """The provider for a batch: the given one, else one inferred from where envs are declared.

    Rows from a ``.py`` taskset are served fresh from that file; rows whose envs are
    declared in already-imported modules are served from their declaring files.
    """
    if runtime is not None:
        return runtime
    source = getattr(tasks, "source", None)
    envs = {t.env for t in tasks}
    if source and str(source).endswith(".py") and Path(source).exists():
        declared = {env.name for env in environments_in(load_module(source))}
        if envs <= declared:
            return LocalRuntime(source)
    missing = {t.env for t in tasks if declaring_file(t) is None}
    if missing:
        raise PlacementError(
            f"no runtime given and no declaration found for env(s) {sorted(missing)}. Pass "
            "runtime= one of: LocalRuntime('envs.py') or LocalRuntime(build), "
            "SubprocessRuntime('envs.py'), DockerRuntime('image'), ModalRuntime('image'), "
            "Runtime('tcp://host:port') for a running server, Shared(provider, width=N), or "
            "a callable (task) -> provider(task); or import the module that declares the env"
        )
    return by_declaration(LocalRuntime, _undeclared)


def provider_for(
    runtime: str, shared: int | None = None, *, docker_base: str | None = None
) -> Provider:
    """The provider an ``--hud-runtime`` value names (wrapped in Shared for ``--hud-shared``);
    ``docker_base``: what ``docker`` builds its images FROM (``--hud-docker-base``)."""
    kind, _, arg = runtime.partition(":")
    provider: Any
    if kind in ("tcp", "ws"):
        provider = Runtime(runtime)
    elif kind in ("local", "subprocess"):
        from pytest_hud.runtime.subprocess import SubprocessRuntime

        if kind == "subprocess" and arg:  # subprocess:PYTHON, e.g. the LIBERO venv's
            provider = by_declaration(lambda path: SubprocessRuntime(path, python=arg), _undeclared)
        else:
            provider = by_declaration(
                LocalRuntime if kind == "local" else SubprocessRuntime, _undeclared
            )
    elif kind == "docker":
        if arg:
            from pytest_hud.runtime.docker.container import DockerRuntime

            provider = DockerRuntime(arg, forward_env=True)  # as the auto-built form does
        else:  # an image built from the declaring modules (runtime/docker/auto.py)
            from pytest_hud.runtime.docker.auto import AutoDockerRuntime

            provider = by_declaration(AutoDockerRuntime(base=docker_base).serving, _undeclared)
    elif kind == "modal":
        from pytest_hud.runtime.sandbox.modal import ModalRuntime

        provider = ModalRuntime(arg or None)
    elif kind == "ray":  # ray, ray:HOST:PORT, ray://HOST:PORT
        from pytest_hud.runtime.ray.runtime import RayRuntime, address_from_spec

        address = address_from_spec(runtime)
        provider = by_declaration(lambda path: RayRuntime(path, address=address), _undeclared)
    else:  # validated at configure time
        raise ValueError(f"unknown --hud-runtime {runtime!r}")
    if shared:
        return Shared(provider, width=shared)
    if kind in WARM_KINDS:  # its rows' substrates are booted ahead (runtime/warm.py)
        provider.warm_ahead = True
    return provider
