"""Episode videos that could not be written (a full disk): gathered from every process and
reported as one session error.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.internals import is_worker, worker_output
from pytest_hud._plugin.video import write_failures

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["KEY", "VideosPlugin", "enable"]

#: The workeroutput key a worker's failed videos travel under.
KEY = "pytest_hud_video_failures"


class VideosPlugin:
    """Failed episode videos of this process and the workers' (registered in every run)."""

    def __init__(self, config: pytest.Config, folder: Path, failures: list[str]) -> None:
        self.config = config
        self.folder = folder
        self.failures = failures  # the session's: a line here fails it
        self.is_worker = is_worker(config)
        self.failed: list[str] = []

    @pytest.hookimpl  # after the session's own (tryfirst), which closes the rollout loop
    def pytest_sessionfinish(self) -> None:
        """On a worker: send the failed videos to the controller."""
        if self.is_worker:
            worker_output(self.config)[KEY] = write_failures(self.folder)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object) -> None:
        """On the controller, a worker finished: keep its failed videos."""
        self.failed.extend(str(x) for x in worker_output(node).get(KEY) or [])

    @pytest.hookimpl
    def pytest_hud_results(self) -> None:
        failed = [*self.failed, *write_failures(self.folder)]
        if failed:
            self.failures.append(
                f"hud videos: {len(failed)} episode video(s) could not be written to "
                f"{self.folder} (first: {failed[0]}); their partial files were removed; "
                "kept: every rollout's result and the videos written before"
            )


def enable(session: HudSession) -> object | None:
    """The feature's plugin for this session (registered in every run), else None."""
    return VideosPlugin(session.config, session.videos, session.failures)
