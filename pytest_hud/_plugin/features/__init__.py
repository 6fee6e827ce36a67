"""pytest-hud's optional features: plugin objects registered only when enabled (list:
docs/reference/hooks.md). Registration order sets their outputs' order (pluggy calls the last
registered first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["register", "unregister"]

_REGISTERED = pytest.StashKey[list[str]]()


def _enabled(session: HudSession) -> list[tuple[str, object]]:
    """The feature plugins this session enables, in registration order."""
    from pytest_hud._plugin.features.abandoned import AbandonedPlugin
    from pytest_hud._plugin.features.videos import VideosPlugin
    from pytest_hud._plugin.features.wrap import WrapPlugin

    config, options = session.config, session.options
    controller = not session.is_worker
    identity = session.identity
    out: list[tuple[str, object]] = [
        ("abandoned", AbandonedPlugin(config)),
        ("wrap", WrapPlugin(session.videos, identity.repro)),
        ("videos", VideosPlugin(config, session.videos, session.failures)),
    ]
    if options.record is not None:
        from pytest_hud._plugin.features.recording import RecordingPlugin, record_root

        out.append(("recording", RecordingPlugin(session, record_root(options.record))))
    from pytest_hud._plugin.features.replay import ReplayPlugin, read_replay

    replay = read_replay(config)
    if replay is not None:
        out.append(("replay", ReplayPlugin(session, replay)))
    if options.resume is not None:
        from pytest_hud._plugin.features.resume import ResumePlugin

        out.append(("resume", ResumePlugin(options.resume, identity)))
    if options.ledger is not None and controller:
        from pytest_hud._plugin.features.ledger import LedgerPlugin

        ledger = LedgerPlugin(options.ledger, identity, options.resume, session.failures)
        out.append(("ledger", ledger))
    if options.compare is not None and controller:
        from pytest_hud._plugin.features.compare import ComparePlugin

        label = session.agent_label
        out.append(("compare", ComparePlugin(config, options, label, session.artifacts)))
    if options.gate == "sequential" and not session.arms:  # arms: paired, in .arms
        from pytest_hud._plugin.features.sequential import SequentialPlugin

        cache = session.artifacts / "step-tables"
        seq = SequentialPlugin(config, options, lambda: session.order, session.baseline, cache)
        out.append(("sequential", seq))
    if options.delegate == "ray":
        from pytest_hud._plugin.features.delegate import DelegatePlugin

        out.append(("delegate", DelegatePlugin(session)))
    if options.runtime == "ray":
        from pytest_hud._plugin.features.ray_session import RaySessionPlugin, session_cluster

        head = session_cluster(config, options)  # -n K on ray: one cluster
        if head is not None:
            out.append(("ray", RaySessionPlugin(head)))
    if controller and config.getoption("dist", "no") != "no":
        from pytest_hud._plugin.features.crash import CrashPlugin

        out.append(("crash", CrashPlugin(session.agent_label)))
    if options.log and controller:
        from pytest_hud._plugin.features.trackers import TrackerPlugin, step_of

        step = options.log_step if options.log_step is not None else step_of(options.agent)
        where = options.log_dir or session.artifacts / "trackers"
        out.append(("trackers", TrackerPlugin(options.log, where, step, session.agent_label)))
    if session.arms:
        from pytest_hud._plugin.features.arms import ArmsPlugin

        out.append(("arms", ArmsPlugin(session)))
    from pytest_hud._plugin.features.preflight import PreflightPlugin, read_preflight

    preflight = read_preflight(config)
    if controller and preflight != "off":
        out.append(("preflight", PreflightPlugin(session, preflight)))
    return out


def register(session: HudSession) -> list[str]:
    """Register the features ``session``'s options enable; their plugin names."""
    pm = session.config.pluginmanager
    names = []
    for short, plugin in _enabled(session):
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
