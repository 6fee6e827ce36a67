"""Episode video for reports: the first camera as a GIF (fast octree palettes). A GIF that cannot
be written is removed and noted; the rollout keeps its result.
"""

from __future__ import annotations

import contextlib
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_hud.robot.contract import Spaces

if TYPE_CHECKING:
    from pytest_hud.robot.episode import EpisodeRun

__all__ = ["VideoObserver", "embeddable_gif", "video_factory", "write_failures"]

#: What a GIF file starts with.
GIF_MAGIC = (b"GIF87a", b"GIF89a")
#: The largest episode GIF a report embeds (a report is one self-contained file).
MAX_EMBED_BYTES = 64 << 20


def embeddable_gif(path: object, folder: Path) -> bytes | None:
    """The bytes of an episode GIF a report may embed: a file under the session's video
    ``folder`` that is a GIF, else None. Rows can come from files (``--hud-resume``'s
    ledger, a results JSON): a path in them to anything else is never read into the
    report."""
    if not isinstance(path, str) or not path:
        return None
    try:
        real = Path(path).resolve(strict=True)
        if not real.is_relative_to(folder.resolve()) or not real.is_file():
            return None
        if real.stat().st_size > MAX_EMBED_BYTES:
            return None
        with real.open("rb") as handle:
            data = handle.read()
    except (OSError, ValueError):
        return None
    return data if data[:6] in GIF_MAGIC else None


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

    def step(self, data: Mapping[str, object], action: object) -> None:
        if self.seen % self.stride == 0:
            self.frames.append(np.asarray(data[self.camera]).copy())
            if len(self.frames) >= self.limit:  # keep the whole episode: halve the rate
                self.frames = self.frames[::2]
                self.stride *= 2
        self.seen += 1

    def end(self, ok: bool) -> dict[str, str]:
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


def video_factory(
    folder: Path,
) -> Callable[[EpisodeRun | None, Spaces], VideoObserver | _Nothing]:
    """An observer factory for RobotAgent.observers writing into ``folder``."""

    def make(run: EpisodeRun | None, spaces: Spaces) -> VideoObserver | _Nothing:
        cameras = spaces.cameras
        if not cameras or run is None:
            return _Nothing()
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{run.task.key}-{uuid.uuid4().hex[:8]}")
        fps = float(getattr(spaces, "fps", None) or 10.0)
        return VideoObserver(folder / f"{name}.gif", cameras[0].name, fps)

    return make


class _Nothing:
    def step(self, data: Mapping[str, object], action: object) -> None:
        pass

    def end(self, ok: bool) -> dict[str, str]:
        return {}
