"""The env's answers and the episode's grade as dataset columns; a ``graded=True`` writer commits
an episode only once its grade arrived (bounded wait).
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["GRADE_WAIT_S", "NEXT_FEATURES", "Grades", "episode_grade"]

#: Per frame, what the env answered to the frame's action (lerobot's names).
NEXT_FEATURES: dict[str, dict[str, object]] = {
    "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
    "next.done": {"dtype": "bool", "shape": (1,), "names": None},
    "next.success": {"dtype": "bool", "shape": (1,), "names": None},
}
#: How long the writer thread waits for an episode's grade (``graded=True``): longer than
#: any grading the plugin bounds (``--hud-timeout`` covers the whole rollout).
GRADE_WAIT_S = 600.0

GradeFuture = concurrent.futures.Future[Mapping[str, object] | None]


def empty_outcome() -> dict[str, np.ndarray]:
    """A frame's ``next.*`` columns before the env answers (set by ``set_outcome``)."""
    return {
        "next.reward": np.zeros(1, np.float32),
        "next.done": np.zeros(1, bool),
        "next.success": np.zeros(1, bool),
    }


def set_outcome(frame: dict[str, np.ndarray], reward: float | None, terminated: bool) -> None:
    """The env's answer to ``frame``'s action (no reward sent: 0)."""
    frame["next.reward"] = np.array([reward or 0.0], np.float32)
    frame["next.done"] = np.array([terminated])


class Grades:
    """Episode index -> the future its commit waits on, handed over by :meth:`grade`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[int, GradeFuture] = {}

    def expect(self, index: int) -> GradeFuture:
        future: GradeFuture = concurrent.futures.Future()
        with self._lock:
            self._futures[index] = future
        return future

    def grade(self, index: int, grade: Mapping[str, object] | None) -> None:
        with self._lock:
            future = self._futures.pop(index, None)
        if future is not None and not future.done():
            future.set_result(grade)

    def release(self) -> None:
        """Nobody will grade the rest now (finalize): they commit without a grade."""
        with self._lock:
            futures, self._futures = list(self._futures.values()), {}
        for future in futures:
            if not future.done():
                future.set_result(None)


def wait_grade(future: GradeFuture | None, index: int) -> Mapping[str, object] | None:
    """The grade ``future`` resolves to, or None (ungraded, or none within the bound)."""
    if future is None:
        return None
    try:
        return future.result(timeout=GRADE_WAIT_S)
    except concurrent.futures.TimeoutError:
        warnings.warn(
            f"DatasetWriter: episode {index} got no grade within {GRADE_WAIT_S} s; "
            "recorded without one",
            stacklevel=2,
        )
        return None


def episode_grade(
    frames: list[dict[str, np.ndarray]], grade: Mapping[str, Any] | None
) -> dict[str, object]:
    """The episode's metadata columns from its grade; sets the last frame's next.success."""
    grade = grade or {}
    success = bool(grade.get("success", False))
    if frames:
        frames[-1]["next.success"] = np.array([success])
    steps, reward, score = grade.get("steps"), grade.get("total_reward"), grade.get("score")
    return {
        "grade/success": success,
        "grade/score": float(score) if score is not None else math.nan,
        "grade/steps": int(steps) if steps is not None else len(frames),
        "grade/total_reward": float(reward)
        if reward is not None
        else float(sum(float(f["next.reward"][0]) for f in frames)),
    }


def save_with_metadata(meta: Any, columns: Mapping[str, object]) -> None:
    """Make ``meta.save_episode`` merge ``columns`` into each episode's row.

    lerobot 0.4.4's ``LeRobotDataset.save_episode`` takes no episode metadata of its own;
    its metadata's ``save_episode(index, length, tasks, stats, episode_metadata)`` merges
    that dict into the episode's row, so the grade goes in there. ``columns`` is read at
    each call (the writer updates it in place per episode)."""
    save_episode = meta.save_episode

    def save(
        index: int, length: int, tasks: object, stats: object, extra: dict[str, object]
    ) -> None:
        save_episode(index, length, tasks, stats, {**extra, **columns})

    meta.save_episode = save
