"""Episode video for reports: the first camera as a GIF (fast octree palettes). A GIF that cannot
be written is removed and noted; the rollout keeps its result.
"""

from __future__ import annotations

import contextlib
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.robot.contract import Spaces

__all__ = ["VideoObserver", "video_factory", "write_failures"]

_failures: dict[Path, list[str]] = {}
_failures_lock = threading.Lock()


def write_failures(folder: Path) -> list[str]:
    """The videos that could not be written into ``folder`` since the last call, one
    ``"NAME: reason"`` each (and forgets them)."""
    with _failures_lock:
        return _failures.pop(Path(folder), [])


class VideoObserver:
    """Keeps every ``stride``-th frame of one camera (at most ``limit``) and writes a GIF
    (on a worker thread: ``end`` reads only its own frames)."""

    end_in_thread = True

    def __init__(self, path: Path, camera: str, fps: float, limit: int = 150) -> None:
        self.path = path
        self.camera = camera
        self.fps = fps
        self.limit = limit
        self.frames: list[np.ndarray] = []
        self.seen = 0
        self.stride = 1

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        if self.seen % self.stride == 0:
            self.frames.append(np.asarray(data[self.camera]).copy())
            if len(self.frames) >= self.limit:  # keep the whole episode: halve the rate
                self.frames = self.frames[::2]
                self.stride *= 2
        self.seen += 1

    def end(self, ok: bool) -> dict[str, Any]:
        if not self.frames:
            return {}
        from PIL import Image

        images = []
        for frame in self.frames:
            img = frame if frame.ndim == 3 else frame[..., None]
            if img.shape[-1] == 1:
                img = np.repeat(img, 3, axis=-1)
            if img.dtype != np.uint8:
                img = np.clip(img * (255 if img.max() <= 1.0 else 1), 0, 255).astype(np.uint8)
            images.append(Image.fromarray(img).quantize(256, method=Image.Quantize.FASTOCTREE))
        duration = int(1000 * self.stride / max(self.fps, 1e-3))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            images[0].save(
                self.path, save_all=True, append_images=images[1:], duration=duration, loop=0
            )
        except OSError as exc:  # a full disk: no partial GIF, the rollout's result stands
            with contextlib.suppress(OSError):
                self.path.unlink()
            with _failures_lock:
                reason = exc.strerror or str(exc)
                _failures.setdefault(self.path.parent, []).append(f"{self.path.name}: {reason}")
            return {}
        return {"video": str(self.path)}


def video_factory(folder: Path):
    """An observer factory for RobotAgent.observers writing into ``folder``."""

    def make(run: Any, spaces: Spaces) -> Any:
        cameras = spaces.cameras
        if not cameras or run is None:
            return _Nothing()
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{run.task.key}-{uuid.uuid4().hex[:8]}")
        fps = float(getattr(spaces, "fps", None) or 10.0)
        return VideoObserver(folder / f"{name}.gif", cameras[0].name, fps)

    return make


class _Nothing:
    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        pass

    def end(self, ok: bool) -> dict[str, Any]:
        return {}
