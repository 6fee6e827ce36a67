"""``wrap(env)``: a hand-written gym loop's episodes, recorded as hud rows inside pytest and a
transparent wrapper outside. Knows nothing of pytest (the plugin uses :func:`take`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypedDict

__all__ = ["FrameWriter", "HudEnv", "WrappedEpisode", "configure", "episodes", "take", "wrap"]


class WrappedEpisode(TypedDict):
    """One episode driven through a wrapped env (the feature makes its row)."""

    name: str
    env: str
    episode: int
    seed: int | None
    steps: int
    total_reward: float
    success: bool | None
    terminated: bool
    truncated: bool
    duration: float
    finished: bool  # False: abandoned (reset or closed before it ended)
    video: str | None


class FrameWriter(Protocol):
    """An episode's animation: ``step({"frame": array}, None)`` per rendered frame, then
    ``end(ok)``, whose ``"video"`` is the file written (the plugin's VideoObserver)."""

    def step(self, data: dict[str, object], action: None) -> None: ...

    def end(self, ok: bool) -> Mapping[str, object]: ...


#: what ``info`` and the episode's return give a ``success=`` callable
SuccessFn = Callable[[dict[str, Any], float], bool]

_finished: list[WrappedEpisode] = []
#: name, fps -> the frame writer of one episode's animation
_video: Callable[[str, float], FrameWriter] | None = None


def configure(video: Callable[[str, float], FrameWriter] | None) -> None:
    """Set (or clear) the frame writer the plugin uses for episode animations."""
    global _video
    _video = video


def take() -> list[WrappedEpisode]:
    """The episodes finished since the last call (the plugin's, per test item)."""
    out = list(_finished)
    _finished.clear()
    return out


def episodes() -> list[WrappedEpisode]:
    """The finished episodes not yet claimed (outside pytest: everything recorded)."""
    return list(_finished)


def _success(info: Mapping[str, object]) -> bool | None:
    for name in ("success", "is_success"):
        if name in info:
            return bool(info[name])
    return None


class HudEnv:
    """A gym env that records its episodes; every attribute not defined here is the env's."""

    def __init__(
        self,
        env: Any,
        *,
        success: SuccessFn | None = None,
        name: str | None = None,
        video: bool = True,
    ) -> None:
        self.env = env
        self._grade = success
        spec = getattr(env, "spec", None)
        self.env_id = str(getattr(spec, "id", None) or type(env).__name__)
        self.name = name or self.env_id
        self._video = video and getattr(env, "render_mode", None) == "rgb_array"
        self._live: WrappedEpisode | None = None
        self._started = 0.0
        self._frames: FrameWriter | None = None
        self._count = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def _begin(self, seed: int | None) -> None:
        self._live = {
            "name": self.name,
            "env": self.env_id,
            "episode": self._count,
            "seed": None if seed is None else int(seed),
            "steps": 0,
            "total_reward": 0.0,
            "success": None,
            "terminated": False,
            "truncated": False,
            "duration": 0.0,
            "finished": False,
            "video": None,
        }
        self._started = time.monotonic()
        self._count += 1
        self._frames = None
        if self._video and _video is not None:
            fps = float((getattr(self.env, "metadata", None) or {}).get("render_fps") or 30)
            self._frames = _video(f"{self.name}-{self._live['episode']}", fps)

    def _frame(self) -> None:
        if self._frames is None:
            return
        frame = self.env.render()
        if frame is not None:
            self._frames.step({"frame": frame}, None)

    def reset(self, *args: object, **kwargs: Any) -> Any:
        self._finish({})
        out = self.env.reset(*args, **kwargs)
        self._begin(kwargs.get("seed"))
        self._frame()
        return out

    def step(self, action: object) -> Any:
        out = self.env.step(action)
        if self._live is None:  # stepping without reset: the env will complain itself
            return out
        _obs, reward, terminated, truncated, info = out
        self._live["steps"] += 1
        self._live["total_reward"] += float(reward)
        self._frame()
        if terminated or truncated:
            self._live["terminated"], self._live["truncated"] = bool(terminated), bool(truncated)
            self._finish(dict(info))
        return out

    def _finish(self, info: dict[str, Any]) -> None:
        """Close the live episode (at its end, or at the next reset/close when abandoned)."""
        ep, self._live = self._live, None
        if ep is None:
            return
        ended = ep["terminated"] or ep["truncated"]
        if self._grade is not None and ended:
            ep["success"] = bool(self._grade(info, ep["total_reward"]))
        elif ended:
            ep["success"] = _success(info)
        ep["duration"] = round(time.monotonic() - self._started, 3)
        ep["finished"] = ended
        ep["video"] = None
        if self._frames is not None:
            video = self._frames.end(bool(ep["success"])).get("video")
            ep["video"] = None if video is None else str(video)
            self._frames = None
        _finished.append(ep)

    def close(self) -> Any:
        self._finish({})
        return self.env.close()

    def __enter__(self) -> HudEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wrap(
    env: object,
    *,
    success: SuccessFn | None = None,
    name: str | None = None,
    video: bool = True,
) -> HudEnv:
    """Record the episodes driven through ``env`` (see the module doc)."""
    return HudEnv(env, success=success, name=name, video=video)
