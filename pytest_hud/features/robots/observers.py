"""The attended session's episode observers (``pytest_hud_episode_observers``): each sees
every tick of an episode as the agent runs it, in the agent's loop, so each keeps to a few
assignments per tick."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from pytest_hud.features.robots.operator import Episode
from pytest_hud.runtime.task import Task

__all__ = ["Cameras", "Clock", "Frames", "Reference", "row_label"]


def row_label(task: Task, readable: Callable[[Task], str]) -> str:
    """The row as the operator sees it: its test id's part (``readable``) without the
    hash of the args it cannot show (the set-up text, which the gate shows itself)."""
    return re.sub(r"\[\+[0-9a-f]{8}\]$", "", readable(task))


class Clock:
    """The running episode's first frame (its timer and the budget's clock start there,
    after the robot connected) and its ticks."""

    def __init__(
        self,
        episode: Episode | None,
        first: Callable[[float], None],
        prompt: str = "",
        tick: Callable[[Episode], None] | None = None,
    ) -> None:
        self.episode, self.first, self.tick = episode, first, tick
        if episode is not None and prompt:
            episode.given = prompt  # what the env told the policy: the consoles show it

    def step(self, data: dict[str, object], action: object) -> None:
        episode = self.episode
        if episode is None:
            return
        if episode.started is None:
            episode.started = time.monotonic()
            self.first(episode.started)
        if self.tick is not None:  # a scripted operator acts at a step: on the loop
            self.tick(episode)
        episode.steps += 1

    def end(self, ok: bool) -> dict[str, object]:
        return {}


class Frames:
    """The first and last observations, for a grader."""

    def __init__(self, sink: dict[int, tuple[dict[str, object], dict[str, object]]], key: int):
        self.sink, self.key = sink, key
        self.first: dict[str, object] | None = None
        self.last: dict[str, object] | None = None

    def step(self, data: dict[str, object], action: object) -> None:
        if self.first is None:
            self.first = data
        self.last = data

    def end(self, ok: bool) -> dict[str, object]:
        if self.first is not None and self.last is not None:
            self.sink[self.key] = (self.first, self.last)
        return {}


class Reference:
    """Saves the first frame of the first camera of a row's first episode as its reference
    image (the next gate of the same row shows it, so the scene is set up alike)."""

    def __init__(self, row: str | None, camera: str | None, folder: Path, refs: dict[str, str]):
        self.row, self.camera = row, camera
        self.folder, self.refs = folder, refs
        self.pending = row is not None and camera is not None and row not in refs

    def step(self, data: dict[str, object], action: object) -> None:
        if not self.pending:
            return
        self.pending = False
        assert self.row is not None and self.camera is not None
        from PIL import Image

        frame = np.asarray(data.get(self.camera))
        if frame.ndim != 3 or frame.shape[-1] != 3:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / (re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.row) + ".png")
        Image.fromarray(frame.astype(np.uint8)).save(path)
        self.refs[self.row] = str(path)

    def end(self, ok: bool) -> dict[str, object]:
        return {}


class Cameras:
    """Hands each tick's camera frames to the operator's console (only references: the
    console encodes what it shows, off the loop)."""

    def __init__(self, show: Callable[[Mapping[str, object]], None], names: list[str]) -> None:
        self.show, self.names = show, names

    def step(self, data: dict[str, object], action: object) -> None:
        if self.names:
            self.show({name: data[name] for name in self.names if name in data})

    def end(self, ok: bool) -> dict[str, object]:
        return {}
