# mypy: disable-error-code="empty-body"
"""pytest-hud's hooks: implement them in a ``conftest.py`` or a plugin (docs/reference/hooks.md).
Episode hooks run where rollouts run; row hooks where rows are collected (the controller under
``-n``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_hud._plugin.cases import HudCase
    from pytest_hud._plugin.report_images import Figure
    from pytest_hud.evaluation.results import Gate, ResultsDocument, Row
    from pytest_hud.evaluation.verdict import CoveredGate
    from pytest_hud.robot.agent.agent import ObserverFactory
    from pytest_hud.robot.agent.timed import Timing
    from pytest_hud.runtime.provider import Provider
    from pytest_hud.runtime.rollout import Agent, RolloutResult
    from pytest_hud.runtime.task import Task

__all__ = [
    "pytest_hud_agent",
    "pytest_hud_blinded",
    "pytest_hud_case_agent",
    "pytest_hud_dataset_link",
    "pytest_hud_dataset_parts",
    "pytest_hud_decided",
    "pytest_hud_episode_observers",
    "pytest_hud_episode_result",
    "pytest_hud_finish_rows",
    "pytest_hud_gates",
    "pytest_hud_html_figures",
    "pytest_hud_html_sections",
    "pytest_hud_results",
    "pytest_hud_results_meta",
    "pytest_hud_rollout_finished",
    "pytest_hud_row",
    "pytest_hud_run_rollout",
    "pytest_hud_skip_case",
    "pytest_hud_summary_table",
    "pytest_hud_terminal_summary",
    "pytest_hud_timing",
    "pytest_hud_unrun",
]


@pytest.hookspec(firstresult=True)
def pytest_hud_agent(config: pytest.Config, spec: str) -> Agent | None:
    """The agent object for ``--hud-agent=spec`` (an agent already in memory), or None."""


@pytest.hookspec(firstresult=True)
def pytest_hud_case_agent(config: pytest.Config, nodeid: str, case: HudCase) -> Agent | None:
    """The agent this case's rollout runs with instead of its ``hud_agent`` (an arm's), or None."""


@pytest.hookspec(firstresult=True)
def pytest_hud_skip_case(config: pytest.Config, nodeid: str, case: HudCase) -> str | None:
    """The reason not to run this case's rollout (resumed, a decided task), or None."""


@pytest.hookspec(firstresult=True)
def pytest_hud_unrun(config: pytest.Config, nodeid: str) -> str | None:
    """Why a feature skipped an item (``budget``, ``decided``, ``put off``, ``quit``...)."""


@pytest.hookspec(firstresult=True)
def pytest_hud_decided(config: pytest.Config, nodeid: str) -> str | None:
    """Why an item need not run (its task is decided), asked by the xdist controller; or None."""


@pytest.hookspec()
def pytest_hud_episode_observers(config: pytest.Config) -> Sequence[ObserverFactory]:
    """Observer factories ``(run, spaces) -> observer`` every rollout's agent runs with."""


@pytest.hookspec(firstresult=True)
def pytest_hud_timing(config: pytest.Config) -> Timing | None:
    """The timed loop rollouts run (``--hud-realtime``, ``--hud-latency``); None: lockstep."""


@pytest.hookspec(firstresult=True)
def pytest_hud_run_rollout(
    config: pytest.Config,
    task: Task,
    agent: Agent,
    provider: Provider,
    index: int,
    timeout: float | None,
) -> Awaitable[RolloutResult] | None:
    """Run one rollout another way (``--hud-delegate``, an attended one): its awaitable, or None."""


@pytest.hookspec()
def pytest_hud_episode_result(config: pytest.Config, result: RolloutResult) -> None:
    """A rollout of this process ended, before its item reads the result."""


@pytest.hookspec()
def pytest_hud_row(config: pytest.Config, item: pytest.Item, row: Row) -> None:
    """Add fields to the row of an item that ran, before it goes on the report."""


@pytest.hookspec()
def pytest_hud_finish_rows(config: pytest.Config, rows: Mapping[str, Row]) -> None:
    """Amend rows once the session's outputs are final (a merged dataset), before the gates."""


@pytest.hookspec()
def pytest_hud_rollout_finished(config: pytest.Config, row: Row, report: pytest.TestReport) -> None:
    """A row was reported: once per rollout, skipped or resumed item, or wrapped episode."""


@pytest.hookspec()
def pytest_hud_gates(config: pytest.Config, rows: list[Row]) -> Sequence[Gate | CoveredGate]:
    """Gates for the verdict; a failed one fails the run, a CoveredGate owns its items' FAILs."""


@pytest.hookspec()
def pytest_hud_results_meta(config: pytest.Config) -> Mapping[str, object]:
    """Top-level fields to add to the results JSON (asked after the gates)."""


@pytest.hookspec()
def pytest_hud_results(config: pytest.Config, document: ResultsDocument) -> None:
    """The session's finished results document (written to ``--hud-results`` if given)."""


@pytest.hookspec(firstresult=True)
def pytest_hud_summary_table(config: pytest.Config, rows: list[Row]) -> list[str] | None:
    """The terminal summary's title and table lines in place of the per-task table, or None."""


@pytest.hookspec()
def pytest_hud_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Write lines under the hud table and its verdict."""


@pytest.hookspec()
def pytest_hud_html_sections(config: pytest.Config, rows: list[Row]) -> Sequence[str]:
    """HTML sections for pytest-html's summary, placed before the session's own table."""


@pytest.hookspec()
def pytest_hud_html_figures(config: pytest.Config) -> Sequence[Figure]:
    """Figures (PNG plots with a caption) for pytest-html's summary, shown even without rows."""


@pytest.hookspec(firstresult=True)
def pytest_hud_dataset_parts(config: pytest.Config) -> Mapping[str, str] | None:
    """Each env's folder for dataset parts recorded elsewhere, or None when not recording."""


@pytest.hookspec(firstresult=True)
def pytest_hud_blinded(config: pytest.Config) -> bool | None:
    """True while no output may name an arm's agent (the operator sees codes until the end)."""


@pytest.hookspec(firstresult=True)
def pytest_hud_dataset_link(config: pytest.Config, row: Row) -> str | None:
    """Where pytest-html links an item's dataset episode, in place of the row's own root."""
