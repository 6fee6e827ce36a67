"""Episode videos that could not be written (a full disk): gathered from every process and
reported as one session error.
"""

from __future__ import annotations

import pytest

from pytest_hud._plugin.feature_api import Hud, write_failures

__all__ = ["KEY", "Settings", "VideosPlugin", "enable"]

#: The workeroutput key a worker's failed videos travel under.
KEY = "pytest_hud_video_failures"

Settings = None


class VideosPlugin:
    """Failed episode videos of this process and the workers' (registered in every run)."""

    def __init__(self, hud: Hud) -> None:
        self.hud = hud
        self.failed: list[str] = []

    @pytest.hookimpl  # after the session's own (tryfirst), which closes the rollout loop
    def pytest_sessionfinish(self) -> None:
        """On a worker: send the failed videos to the controller."""
        if self.hud.is_worker:
            self.hud.to_controller(KEY, write_failures(self.hud.videos))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: object) -> None:
        """On the controller, a worker finished: keep its failed videos."""
        self.failed.extend(self.hud.from_worker(node, KEY))

    @pytest.hookimpl
    def pytest_hud_results(self) -> None:
        failed = [*self.failed, *write_failures(self.hud.videos)]
        if failed:
            self.hud.fail(
                f"hud videos: {len(failed)} episode video(s) could not be written to "
                f"{self.hud.videos} (first: {failed[0]}); their partial files were removed; "
                "kept: every rollout's result and the videos written before"
            )


def enable(settings: None, hud: Hud) -> VideosPlugin:
    """The feature's plugin (registered in every run)."""
    return VideosPlugin(hud)
