"""Episode videos that could not be written (a full disk): gathered from every process and
reported as one session error.
"""

from __future__ import annotations

import pytest

from pytest_hud._plugin.feature_api import Gathered, Hud, write_failures

__all__ = ["KEY", "Settings", "VideosPlugin", "enable"]

#: The workeroutput key a worker's failed videos travel under.
KEY = "pytest_hud_video_failures"

Settings = None


class VideosPlugin(Gathered):
    """Failed episode videos of this process and the workers' (registered in every run)."""

    KEY = KEY

    def own(self) -> list[str]:
        return write_failures(self.hud.videos)

    @pytest.hookimpl
    def pytest_hud_results(self) -> None:
        failed = self.gathered()
        if failed:
            self.hud.fail(
                f"hud videos: {len(failed)} episode video(s) could not be written to "
                f"{self.hud.videos} (first: {failed[0]}); their partial files were removed; "
                "kept: every rollout's result and the videos written before"
            )


def enable(settings: None, hud: Hud) -> VideosPlugin:
    """The feature's plugin (registered in every run)."""
    return VideosPlugin(hud)
