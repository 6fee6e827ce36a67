"""The episode GIF (pytest_hud/_plugin/video.py): what it keeps of a camera, frame by frame."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageSequence

from pytest_hud._plugin.video import VideoObserver


def textured(size: int, shift: int) -> np.ndarray:
    """A camera-like frame: gradients, grain and a moving bright square."""
    y, x = np.mgrid[0:size, 0:size]
    img = np.stack([(x * 3 + shift) % 256, (y * 2) % 256, ((x + y) + 2 * shift) % 256], -1)
    img = img + np.random.default_rng(shift).integers(-6, 7, img.shape)
    img[shift % size : shift % size + 8, :8] = 255
    return np.clip(img, 0, 255).astype(np.uint8)


def decode(path: Path) -> list[np.ndarray]:
    with Image.open(path) as gif:
        return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)]


def test_every_frame_is_kept_close_to_the_camera(tmp_path: Path) -> None:
    frames = [textured(96, i) for i in range(12)]
    video = VideoObserver(tmp_path / "ep.gif", "cam", fps=10)
    for frame in frames:
        video.step({"cam": frame}, np.zeros(1))
    assert video.end(True) == {"video": str(tmp_path / "ep.gif")}
    got = decode(tmp_path / "ep.gif")
    assert len(got) == len(frames)
    for want, have in zip(frames, got, strict=True):
        assert have.shape == want.shape
        error = np.abs(have.astype(int) - want.astype(int)).mean()
        assert error < 6.0, error  # 256 colours per frame: a few levels off on average


def gray(i: int) -> np.ndarray:  # a float depth/gray image in [0, 1]
    return np.roll(np.linspace(0.0, 1.0, 32 * 32).reshape(32, 32), 4 * i, axis=1)


def one_channel(i: int) -> np.ndarray:
    return textured(32, i)[..., :1]


def rgba(i: int) -> np.ndarray:
    return np.dstack([textured(32, i), np.full((32, 32), 255, np.uint8)])


@pytest.mark.parametrize("camera", [gray, one_channel, rgba])
def test_other_camera_layouts_become_rgb_frames(tmp_path: Path, camera: object) -> None:
    assert callable(camera)
    video = VideoObserver(tmp_path / "ep.gif", "cam", fps=5)
    for i in range(3):
        video.step({"cam": camera(i)}, np.zeros(1))
    assert video.end(True)
    got = decode(tmp_path / "ep.gif")
    assert len(got) == 3 and all(f.shape == (32, 32, 3) for f in got)
