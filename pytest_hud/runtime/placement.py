"""Which provider serves a batch of rows: the one given, one inferred from where their envs
are declared (:func:`resolve_placement`), or the one an ``--hud-runtime`` value names
(:func:`provider_for`, through runtime/backends.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_hud.errors import PlacementError
from pytest_hud.plumbing.loader import load_module
from pytest_hud.runtime.backends import RuntimeSpec, parse
from pytest_hud.runtime.local import LocalRuntime
from pytest_hud.runtime.modules import environments_in
from pytest_hud.runtime.provider import Provider
from pytest_hud.runtime.routing import by_declaration, declaring_file, undeclared
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task

__all__ = [
    "PlacementError",
    "by_declaration",
    "declaring_file",
    "provider_for",
    "resolve_placement",
]


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
    return by_declaration(LocalRuntime, undeclared)


def provider_for(runtime: RuntimeSpec | str, shared: int | None = None) -> Provider:
    """The provider an ``--hud-runtime`` value names (runtime/backends.py; a string is parsed
    here), wrapped in Shared for ``--hud-shared``."""
    spec = runtime if isinstance(runtime, RuntimeSpec) else parse(runtime)
    provider: Any = spec.build()
    if shared:
        return Shared(provider, width=shared)
    if spec.backend.warm:  # its rows' substrates are booted ahead (runtime/warm.py)
        provider.warm_ahead = True
    return provider
