"""The gate's live camera: while the reset gate waits for the operator, the robot's cameras are
read a few times a second through the session's own substrate (its env server's ``cameras``,
which the robot bridge answers without claiming an episode slot) and handed to the console.
Where no read can be had, the gate's reference image stands in, and the console says which
it shows (operator.GateView). The feed stops when the gate closes, before the episode
leases the substrate."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping

import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.features.robots.operator import GateView
from pytest_hud.robot.sim.cameras import decode_frames
from pytest_hud.runtime.control import ControlClient
from pytest_hud.runtime.provider import Provider, Runtime
from pytest_hud.runtime.shared import Shared
from pytest_hud.runtime.task import Task

__all__ = [
    "INTERVAL",
    "LIVE",
    "READING",
    "REFERENCES",
    "STOP_WAIT",
    "GateFeed",
    "Show",
    "static_view",
]

#: Seconds between two reads of the cameras while a gate waits (a few frames a second).
INTERVAL = 0.25
#: Seconds one read may take (the first may connect the robot, as its first episode would).
READ_TIMEOUT = 120.0
#: Seconds a closing gate waits for a read in flight before it cuts the feed off.
STOP_WAIT = 30.0
#: The longest reason shown for a missing live view (one line, no traceback).
MAX_WHY = 200

LIVE = "live: the robot's camera now"
#: What the gate says until the first read comes back.
READING = GateView("reading", "reading the robot's camera …")
#: What a gate's reference image is, by where it came from.
REFERENCES = {
    "row": "reference: the row's own image",
    "episode": "reference: first frame of an earlier episode",
}

#: A console's ``gate_view(view, frames)``: frames only with a live view.
Show = Callable[[GateView, "Mapping[str, np.ndarray] | None"], None]


def static_view(reference: str | None, why: str) -> GateView:
    """What the gate shows without a live read: its reference image (and why not live), or
    nothing and why."""
    why = _one_line(why)
    if reference is not None:
        return GateView("reference", f"{reference} (no live camera: {why})")
    if why == "this robot has no camera":
        return GateView("none", why)
    return GateView("none", f"no live camera: {why}")


class GateFeed:
    """Reads ``task``'s robot cameras through ``provider`` (a Shared substrate or a Runtime:
    one that is leased, not booted per use) until :attr:`stopped` is set, handing each read
    to ``show``. ``reference`` names the gate's reference image where it has one."""

    def __init__(self, provider: Provider, task: Task, show: Show, reference: str | None) -> None:
        self.provider, self.task, self.show = provider, task, show
        self.reference = reference
        self.stopped = threading.Event()  # set from the console's thread when the gate closes
        self.reads = 0  # frames shown

    async def run(self) -> None:
        """Read until stopped; a failed read shows the reference (never raises but for
        cancellation)."""
        try:
            await self._read()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the console shows one line; the episode reports for real
            if not self.stopped.is_set():  # pytest-hud's errors say what they are
                said = str(exc) if isinstance(exc, HudError) else f"{type(exc).__name__}: {exc}"
                self.show(static_view(self.reference, said), None)

    async def _read(self) -> None:
        if not isinstance(self.provider, Shared | Runtime):
            why = "the session's provider boots a substrate per episode (use --hud-shared)"
            self.show(static_view(self.reference, why), None)
            return
        async with self.provider(self.task) as runtime:
            if self.stopped.is_set():
                return
            control = await ControlClient.connect(runtime, timeout=30.0)
            try:
                while not self.stopped.is_set():
                    reply = await control.cameras(self.task.env, timeout=READ_TIMEOUT)
                    if self.stopped.is_set():
                        return
                    cameras = reply.get("cameras")
                    if cameras is None:
                        why = str(reply.get("why") or "the robot did not say")
                        self.show(static_view(self.reference, why), None)
                        return
                    if not cameras:
                        self.show(static_view(self.reference, "this robot has no camera"), None)
                        return
                    self.show(GateView("live", LIVE), decode_frames(cameras))
                    self.reads += 1
                    await asyncio.sleep(INTERVAL)
            finally:
                await control.close()


def _one_line(text: str) -> str:
    line = (text.strip().splitlines() or [""])[0].strip()
    return line if len(line) <= MAX_WHY else line[: MAX_WHY - 1] + "…"
