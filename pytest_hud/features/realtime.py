"""Timed control loops for sims: ``--hud-realtime`` steps the env on the wall clock at its
control rate whether or not the policy answered (as a robot would be driven), and
``--hud-latency=MS`` gives each inference a fixed delay in sim time, deterministically, so
what latency costs a policy is measured before a robot is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.options import OptionTable, read_flag, read_option
from pytest_hud.robot.agent.timed import Timing

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession

__all__ = ["OPTIONS", "RealtimePlugin", "enable", "read_timing"]

OPTIONS: OptionTable = [
    (
        "--hud-realtime",
        "step each env on the wall clock at its contract's control rate whether or not the "
        "policy answered: the rest of the current chunk, then the last action, is held "
        "while the next chunk is computed; held steps, deadline misses and latencies are "
        "reported per episode",
        {"action": "store_true"},
    ),
    (
        "--hud-latency",
        "give each inference a fixed delay of MS milliseconds in sim time (deterministic: "
        "its chunk is used that many ticks after the observation it read); 0 is chunk-ahead "
        "execution without delay",
        {"metavar": "MS"},
    ),
    (
        "--hud-rate",
        "the control rate (Hz) of the timed loop when the env's contract has none",
        {"metavar": "HZ"},
    ),
]


def read_timing(config: pytest.Config) -> Timing | None:
    """The session's timed loop, or None (lockstep); a bad value is a usage error."""
    realtime = read_flag(config, "hud_realtime")
    latency = read_option(config, "hud_latency", str)
    rate = read_option(config, "hud_rate", str)
    if not realtime and latency is None:
        if rate is not None:
            raise pytest.UsageError(
                "--hud-rate sets the timed loop's rate; add --hud-realtime or --hud-latency=MS"
            )
        return None
    if realtime and latency is not None:
        raise pytest.UsageError(
            "--hud-realtime and --hud-latency are two clocks (wall time, or sim time with a "
            "fixed delay); pass one of them"
        )
    return Timing(
        realtime=realtime,
        latency=_number("--hud-latency", latency, 0.0) / 1000.0 if latency is not None else 0.0,
        rate=_number("--hud-rate", rate, None) if rate is not None else None,
    )


def _number(flag: str, text: str, low: float | None) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if (
        value != value
        or value == float("inf")
        or (low is not None and value < low)
        or (low is None and value <= 0)
    ):
        bound = f">= {low:g}" if low is not None else "> 0"
        raise pytest.UsageError(f"{flag} takes a number {bound}, got {text!r}")
    return value


class RealtimePlugin:
    """Hands the session's :class:`Timing` to every rollout's agent."""

    def __init__(self, timing: Timing) -> None:
        self.timing = timing

    @pytest.hookimpl
    def pytest_hud_timing(self) -> Timing:
        return self.timing

    @pytest.hookimpl
    def pytest_report_header(self) -> str:
        return f"hud: timed control loop in {self.timing.describe()}"


def enable(session: HudSession) -> object | None:
    timing = read_timing(session.config)
    return RealtimePlugin(timing) if timing is not None else None
