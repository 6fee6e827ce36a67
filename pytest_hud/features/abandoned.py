"""One terminal summary line per model thread the session gave up on and still running; workers
hand theirs over through ``workeroutput``.
"""

from __future__ import annotations

import pytest

from pytest_hud._plugin.feature_api import Gathered, Hud
from pytest_hud.plumbing.threads import abandoned

__all__ = ["KEY", "AbandonedPlugin", "Settings", "abandoned_lines", "enable"]

Settings = None

#: The workeroutput key a worker's lines travel under.
KEY = "pytest_hud_abandoned"


def abandoned_lines(where: str = "") -> list[str]:
    """One line per model thread still running after its caller gave up."""
    return [
        f"model thread {a.thread}{where} abandoned in {a.what} after {a.seconds:.0f} s"
        for a in abandoned()
    ]


class AbandonedPlugin(Gathered):
    """Collects abandoned model threads (this process's and the workers') for the
    summary (registered in every run: any rollout may time out)."""

    KEY = KEY

    def own(self) -> list[str]:
        return abandoned_lines(f" (on {self.hud.worker_id})" if self.hud.is_worker else "")

    @pytest.hookimpl  # registered after the session: its lines come before the hud table
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.hud.is_worker:
            return
        for line in self.gathered():
            terminalreporter.write_line(line, yellow=True, bold=True)


def enable(settings: None, hud: Hud) -> AbandonedPlugin:
    """The feature's plugin: registered in every run (any rollout may time out)."""
    return AbandonedPlugin(hud)
