"""Rows for the episodes a test drove itself through :func:`pytest_hud.wrap`.

:mod:`pytest_hud.wrapping` records; this side claims what a test item recorded (at its
``call`` report, in whichever process ran it), turns each episode into a results row
(the same fields as a rollout's, ``wrapped: true``) carried on the report as
``hud_episodes`` (JSON-able, so it crosses xdist), and gives the recorder the episode
animation writer (:class:`~pytest_hud._plugin.video.VideoObserver`, the rollouts' GIFs).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from pytest_hud import wrapping as wrap_mod
from pytest_hud._plugin.state import SessionState
from pytest_hud._plugin.video import VideoObserver

__all__ = ["WrapMixin"]


class WrapMixin(SessionState):
    """The session's side of ``wrap(env)``."""

    def _setup_wrap(self) -> None:
        folder = self.artifacts / "videos"

        def video(name: str, fps: float) -> VideoObserver:
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{name}-{uuid.uuid4().hex[:8]}")
            return VideoObserver(folder / f"{safe}.gif", "frame", fps)

        wrap_mod.configure(video)

    def wrapped_report(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> None:
        """Attach the episodes this item drove to its call report (setup drops leftovers
        of earlier items, e.g. an episode abandoned in a teardown)."""
        if call.when == "setup":
            wrap_mod.take()
        if call.when != "call":
            return
        episodes = wrap_mod.take()
        if episodes:
            report.hud_episodes = [self._wrapped_row(item, ep, report) for ep in episodes]

    def _wrapped_row(self, item: pytest.Item, ep: dict[str, Any], report: Any) -> dict[str, Any]:
        success = ep["success"]
        seed = ep["seed"]
        return {
            "nodeid": item.nodeid,
            "group": item.nodeid.split("[", 1)[0],
            "key": f"{ep['env']}/{ep['name']}",
            "env": ep["env"],
            "task_id": ep["name"],
            "slug": ep["name"],
            "args": {} if seed is None else {"seed": seed},
            "rep": ep["episode"],
            "seed": seed,
            "agent": "wrap",
            "outcome": "failed" if report.failed else "passed",
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
            "repro": self.repro(item.nodeid),
        }
