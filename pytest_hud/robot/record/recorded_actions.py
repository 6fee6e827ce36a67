"""A recorded episode's actions as an agent (:func:`replay_agent`), and what the env answered,
laid out as the recorder did.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pytest_hud.errors import DatasetError
from pytest_hud.robot.agent.agent import RobotAgent
from pytest_hud.robot.agent.model import Batch, Model
from pytest_hud.robot.contract import Spaces
from pytest_hud.robot.record.reader import Frames
from pytest_hud.robot.record.schema import _build_schema

__all__ = ["RecordedActions", "replay_agent"]

#: ``(live RGB frame, recorded RGB frame) -> error``; the caller's metric.
ImageError = Callable[[np.ndarray, np.ndarray], float]


class RecordedActions(Model):
    """Every recorded action of one episode as a single ``[1, T, A]`` chunk."""

    batchable = False

    def __init__(self, actions: np.ndarray) -> None:
        self.actions = np.asarray(actions, np.float32)

    def infer(self, batch: Batch) -> np.ndarray:
        return self.actions[None].copy()


class _LiveFrames:
    """Sees the replayed episode: the live observations laid out as recorded."""

    def __init__(self, spaces: Spaces, frames: Frames, fps: int, image_error: ImageError) -> None:
        recorded = frames.actions.shape[1]
        size = spaces.action_feature.size
        if size is not None and size != recorded:
            raise DatasetError(
                f"the env's action has {size} values but the episode recorded {recorded}: "
                "this env is not the one the dataset was recorded from"
            )
        self.schema = _build_schema(
            spaces, fps=fps, robot_type=None, video=False, camera_keys={}, warn=None
        )
        self.frames = frames
        self.image_error = image_error
        self.vectors: dict[str, list[np.ndarray]] = {}
        self.images: dict[str, list[float]] = {}
        self.terminated = False
        self._resolved = False
        self._t = 0  # the tick being stepped

    def step(self, data: dict[str, object], action: np.ndarray) -> None:
        if not self._resolved:
            self.schema = self.schema.resolve(data, action)
            self._resolved = True
        t, self._t = self._t, self._t + 1
        frame = self.schema.frame(data, action)
        for key, value in frame.items():
            if key.startswith("observation.images."):
                recorded = self.frames.images.get(key)
                if recorded is not None and t < len(recorded):
                    self.images.setdefault(key, []).append(self.image_error(value, recorded[t]))
            elif key.startswith("observation."):
                self.vectors.setdefault(key, []).append(value)

    def outcome(self, reward: float | None, terminated: bool) -> None:
        self.terminated = terminated

    def end(self, ok: bool) -> dict[str, object]:
        return {
            "replay": {
                "vectors": {k: np.stack(v) for k, v in self.vectors.items()},
                "image_error": {k: np.asarray(v, np.float64) for k, v in self.images.items()},
                "terminated": self.terminated,
                "keys": self.schema.keys(),
            }
        }


def replay_agent(frames: Frames, fps: int, image_error: ImageError, name: str) -> RobotAgent:
    """An agent sending ``frames``' recorded actions, one per tick, then stopping."""
    actions = frames.actions
    agent = RobotAgent(RecordedActions(actions), max_steps=len(actions), name=name)

    def observer(run: object, spaces: Spaces) -> _LiveFrames:
        return _LiveFrames(spaces, frames, fps, image_error)

    agent.observers.append(observer)
    return agent
