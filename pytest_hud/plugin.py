"""pytest-hud's hooks, and only hooks: each is one call into the session; the work lives in
:mod:`pytest_hud._plugin`, features register at configure and leave at unconfigure.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_hud import features
from pytest_hud._plugin import heap, loggers
from pytest_hud._plugin.arms import HANDED_AGENTS
from pytest_hud._plugin.collect import Collector
from pytest_hud._plugin.feature_api import Hud
from pytest_hud._plugin.html import HtmlHooks
from pytest_hud._plugin.internals import (
    HudBlockScheduling,
    HudDroppingScheduling,
    HudLoadScheduling,
    WorkerNode,
    hand_to_workers,
    keep_xdist_groups,
)
from pytest_hud._plugin.interrupts import restore_sigterm, sigterm_interrupts
from pytest_hud._plugin.options import HANDED_SEED, HudOptions, addoption
from pytest_hud._plugin.reporting import Reporter
from pytest_hud._plugin.session import PLUGIN, HudSession, restore_auth, sweep_runtime
from pytest_hud._plugin.state import CASE, RESULT
from pytest_hud.errors import EpisodeFailed
from pytest_hud.features.wrap import hud_wrap  # noqa: F401
from pytest_hud.fixtures import hud_agent, hud_provider, hud_result, hud_task  # noqa: F401

__all__ = ["CASE", "PLUGIN", "RESULT", "EpisodeFailed", "HudHooks", "HudSession"]


def pytest_addoption(parser: pytest.Parser) -> None:
    addoption(parser)
    features.addoption(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_hud import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hud(tasks, min_success=None, group=None): evaluate the policy on task rows "
        "(Task objects, a Taskset, or a .json/.jsonl/.py path); each row is one item",
    )
    config.addinivalue_line(
        "markers",
        "hud_expect(agent=None, xfail=None, skip=None): task globs expected to fail or "
        "skipped, for one agent/checkpoint name or all",
    )
    loggers.install()  # before any thread of ours can create a logger
    settings, options = features.configure(config, HudOptions.from_config(config))
    session = HudSession(config, options.finished())
    session.sigterm = sigterm_interrupts()
    config.stash[PLUGIN] = session
    hooks = HudHooks(session)
    config.pluginmanager.register(hooks, "pytest-hud-session")
    if config.pluginmanager.hasplugin("html"):
        config.pluginmanager.register(HtmlHooks(session, hooks.reporter.gates), "pytest-hud-html")
    features.register(config, Hud(session), settings)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(PLUGIN, None)
    if session is not None:
        heap.closed()
        session.evaluator.close()
        loggers.uninstall()
        if not session.is_worker:
            sweep_runtime(session.options.runtime)
        restore_sigterm(session.sigterm)
        restore_auth(session)
        features.unregister(config)  # closes the ledger, stops the session's Ray cluster


class HudHooks:
    """The session's hooks (registered per run, so hooks without a ``config`` argument,
    such as ``pytest_runtest_logreport``, still reach their session)."""

    def __init__(self, session: HudSession) -> None:
        self.session = session
        self.collector = Collector(session)
        self.reporter = Reporter(session)

    # -- collection ---------------------------------------------------------------------
    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        return self.collector.collect_file(file_path, parent)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        self.collector.generate_tests(metafunc)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(
        self, items: list[pytest.Item]
    ) -> Generator[None, None, None]:
        self.collector.collection_modifyitems(items)
        result = yield
        if self.session.is_worker:  # after xdist's own renaming, which pytest 9.2 lost
            keep_xdist_groups(self.session.config, items)
        self.collector.collection_ordered(items)  # after every other plugin's reordering
        return result

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collector.collection_finish(session)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self.collector.setup(item)

    # -- reporting ------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        return self.reporter.make_report(item, call, report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reporter.logreport(report)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.reporter.terminal_summary(terminalreporter)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.reporter.sessionfinish(session, exitstatus)

    # -- xdist ---------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerNode) -> None:
        """Hand a worker about to start what every worker must share: the agents as the
        controller expanded them, and several agents' order seed."""
        hand_to_workers(node, HANDED_AGENTS, self.session.options.agent_texts)
        if self.session.options.ab_seed is not None:
            hand_to_workers(node, HANDED_SEED, self.session.options.ab_seed)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self.collector.node_collection_finished(node, ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(
        self, config: pytest.Config, log: object
    ) -> HudBlockScheduling | HudLoadScheduling | HudDroppingScheduling | None:
        return self.session.make_scheduler(config, log)
