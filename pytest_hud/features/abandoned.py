"""One terminal summary line per model thread the session gave up on and still running; workers
hand theirs over through ``workeroutput``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.internals import is_worker, worker_id, worker_output
from pytest_hud.plumbing.threads import abandoned

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["KEY", "AbandonedPlugin", "abandoned_lines", "enable"]

#: The workeroutput key a worker's lines travel under.
KEY = "pytest_hud_abandoned"


def abandoned_lines(where: str = "") -> list[str]:
    """One line per model thread still running after its caller gave up."""
    return [
        f"model thread {a.thread}{where} abandoned in {a.what} after {a.seconds:.0f} s"
        for a in abandoned()
    ]


class AbandonedPlugin:
    """Collects abandoned model threads (this process's and the workers') for the
    summary (registered in every run: any rollout may time out)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.is_worker = is_worker(config)
        self.from_workers: list[str] = []

    @pytest.hookimpl  # after the session's own (tryfirst), which closes the rollout loop
    def pytest_sessionfinish(self) -> None:
        """On a worker: send the lines to the controller."""
        if self.is_worker:
            lines = abandoned_lines(f" (on {worker_id(self.config)})")
            worker_output(self.config)[KEY] = lines

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object) -> None:
        """On the controller, a worker finished: keep the lines it sent."""
        lines = worker_output(node).get(KEY) or []
        self.from_workers.extend(str(x) for x in lines)

    @pytest.hookimpl  # registered after the session: its lines come before the hud table
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.is_worker:
            return
        for line in [*self.from_workers, *abandoned_lines()]:
            terminalreporter.write_line(line, yellow=True, bold=True)


def enable(session: HudSession) -> object | None:
    """The feature's plugin: registered in every run (any rollout may time out)."""
    return AbandonedPlugin(session.config)
