"""pytest-hud's optional features, listed once in :data:`FEATURES`.

A feature is a module (or package) of this package with a ``Settings`` class declaring its
options (or None), an optional ``configure(settings, options)`` returning the core's options
as it changes them, and ``enable(settings, hud)`` returning its plugin object or None (the
door it gets, :class:`pytest_hud._plugin.feature_api.Hud`, is all it sees of the session).
The core (``pytest_hud._plugin``) never imports a feature; ``pytest_hud.plugin`` wires them:
:func:`addoption` at option time, :func:`configure` and :func:`register` at configure,
:func:`unregister` at unconfigure. The table's order is the registration order, which sets
the order of their outputs (pluggy calls the last registered first). Adding a feature: one
module here and one line below (docs/contributing.md).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from pytest_hud._plugin.feature_api import Hud, HudOptions, add_options, read_settings

__all__ = ["FEATURES", "Settings", "addoption", "configure", "register", "unregister"]

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
    "devices",
    "crash",
    "trackers",
    "ab",
    "preflight",
    "realtime",
    "robots",
    "sim_process",
)

_REGISTERED = pytest.StashKey[list[str]]()

#: each feature's settings as read at configure, by feature name
Settings = dict[str, object]


def feature(name: str) -> ModuleType:
    """The module of feature ``name``."""
    return importlib.import_module(f"{__name__}.{name}")


def addoption(parser: pytest.Parser) -> None:
    """Declare every feature's options (after the core's, in table order)."""
    for name in FEATURES:
        settings = getattr(feature(name), "Settings", None)
        if settings is not None:
            add_options(parser, settings)


def configure(config: pytest.Config, options: HudOptions) -> tuple[Settings, HudOptions]:
    """Every feature's settings read from ``config``, and the core's options as the features'
    ``configure`` hooks change them (in table order, each given the last one's result)."""
    found: Settings = {}
    for name in FEATURES:
        module = feature(name)
        cls = getattr(module, "Settings", None)
        settings = read_settings(config, cls) if cls is not None else None
        found[name] = settings
        change = getattr(module, "configure", None)
        if change is not None:
            options = change(settings, options)
    return found, options


def register(config: pytest.Config, hud: Hud, settings: Settings) -> list[str]:
    """Register the plugins of the features the session's settings enable; their names."""
    pm = config.pluginmanager
    names = []
    for short in FEATURES:
        plugin = feature(short).enable(settings[short], hud)
        if plugin is None:
            continue
        name = f"pytest-hud-{short}"
        pm.register(plugin, name)
        names.append(name)
    config.stash[_REGISTERED] = names
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
