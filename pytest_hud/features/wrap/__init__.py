"""``wrap(env)`` (:mod:`.episodes`) and the plugin's side of it: a test's own gym loop, through
the ``hud_wrap`` fixture or :func:`pytest_hud.wrap`, gives episodes that become rows on its
report (crossing xdist). Registered in every run.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_hud._plugin.feature_api import Hud, VideoObserver
from pytest_hud.evaluation.results import Row
from pytest_hud.features.wrap import episodes as wrap_mod
from pytest_hud.features.wrap.episodes import HudEnv, WrappedEpisode, wrap

__all__ = ["Settings", "WrapPlugin", "enable", "hud_wrap", "wrapped_row"]

Settings = None


@pytest.fixture
def hud_wrap() -> Iterator[Callable[..., HudEnv]]:
    """``env = hud_wrap(gym.make(...))``: the episodes the test drives become its rows;
    an episode still running when the test ends is dropped, not reported."""
    made: list[HudEnv] = []

    def make(env: object, **kwargs: Any) -> HudEnv:
        wrapped = wrap(env, **kwargs)
        made.append(wrapped)
        return wrapped

    yield make
    for wrapped in made:
        wrapped._finish({})


def wrapped_row(nodeid: str, ep: WrappedEpisode, failed: bool, repro: str) -> Row:
    """The results row of one episode ``wrap(env)`` recorded in item ``nodeid``."""
    success = ep["success"]
    seed = ep["seed"]
    return {
        "nodeid": nodeid,
        "group": nodeid.split("[", 1)[0],
        "key": f"{ep['env']}/{ep['name']}",
        "env": ep["env"],
        "task_id": ep["name"],
        "slug": ep["name"],
        "args": {} if seed is None else {"seed": seed},
        "rep": ep["episode"],
        "seed": seed,
        "agent": "wrap",
        "outcome": "failed" if failed else "passed",
        "score": None if success is None else float(success),
        "success": success,
        "total_reward": float(ep["total_reward"]),
        "steps": int(ep["steps"]),
        "duration": float(ep["duration"]),
        "prompt": None,
        "error": None if ep["finished"] else "episode abandoned before it ended",
        "error_type": None,
        "phase": None,
        "infer_s": None,
        "env_s": None,
        "video": ep["video"],
        "dataset": None,
        "wrapped": True,
        "repro": repro,
    }


class WrapPlugin:
    """Claims each item's wrapped episodes; ``repro`` gives an item's replay command."""

    def __init__(self, videos: Path, repro: Callable[[str], str]) -> None:
        self.repro = repro

        def video(name: str, fps: float) -> VideoObserver:
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{name}-{uuid.uuid4().hex[:8]}")
            return VideoObserver(videos / f"{safe}.gif", "frame", fps)

        wrap_mod.configure(video)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        """Attach the episodes this item drove to its call report (setup drops leftovers
        of earlier items, e.g. an episode abandoned in a teardown)."""
        report = yield
        if call.when == "setup":
            wrap_mod.take()
        if call.when == "call":
            episodes = wrap_mod.take()
            if episodes:
                repro = self.repro(item.nodeid)
                report.hud_episodes = [
                    wrapped_row(item.nodeid, ep, report.failed, repro) for ep in episodes
                ]
        return report


def enable(settings: None, hud: Hud) -> WrapPlugin:
    """The feature's plugin (registered in every run)."""
    return WrapPlugin(hud.videos, hud.identity.repro)
