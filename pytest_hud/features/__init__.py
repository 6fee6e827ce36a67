"""pytest-hud's optional features, listed once in :data:`FEATURES`.

A feature is a module of this package with ``enable(session) -> plugin | None`` (the plugin
object whose hooks do its work, or None when its options leave it off) and, if it has
options, an ``OPTIONS`` table (flag, help, kwargs). The core (``pytest_hud._plugin``) never
imports a feature; ``pytest_hud.plugin`` wires them: :func:`addoption` at option time,
:func:`register` at configure, :func:`unregister` at unconfigure. The table's order is the
registration order, which sets the order of their outputs (pluggy calls the last registered
first). Adding a feature: one module here and one line below (docs/contributing.md).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.options import add_options

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["FEATURES", "addoption", "register", "unregister"]

#: Every feature, in registration order (the module's name under ``pytest_hud.features``).
FEATURES: tuple[str, ...] = (
    "abandoned",
    "wrap",
    "videos",
    "recording",
    "replay",
    "resume",
    "ledger",
    "compare",
    "sequential",
    "delegate",
    "session_cluster",
    "crash",
    "trackers",
    "ab",
    "preflight",
    "realtime",
    "robots",
    "sim_process",
)

_REGISTERED = pytest.StashKey[list[str]]()


def feature(name: str) -> ModuleType:
    """The module of feature ``name``."""
    return importlib.import_module(f"{__name__}.{name}")


def addoption(parser: pytest.Parser) -> None:
    """Declare every feature's options (after the core's, in table order)."""
    for name in FEATURES:
        table = getattr(feature(name), "OPTIONS", None)
        if table:
            add_options(parser, table)


def register(session: HudSession) -> list[str]:
    """Register the plugins of the features ``session``'s options enable; their names."""
    pm = session.config.pluginmanager
    names = []
    for short in FEATURES:
        plugin = feature(short).enable(session)
        if plugin is None:
            continue
        name = f"pytest-hud-{short}"
        pm.register(plugin, name)
        names.append(name)
    session.config.stash[_REGISTERED] = names
    return names


def unregister(config: pytest.Config) -> None:
    """Close and unregister the features registered for this run (last first)."""
    pm = config.pluginmanager
    names: list[str] = config.stash.get(_REGISTERED, [])
    for name in reversed(names):
        plugin = pm.get_plugin(name)
        if plugin is None:
            continue
        close = getattr(plugin, "close", None)
        if callable(close):
            close()
        pm.unregister(plugin, name)
    config.stash[_REGISTERED] = []
