"""Timed control loops for sims: ``--hud-realtime`` steps the env on the wall clock at its
control rate whether or not the policy answered (as a robot would be driven), and
``--hud-latency=MS`` gives each inference a fixed delay in sim time, deterministically, so
what latency costs a policy is measured before a robot is touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, option
from pytest_hud.robot.agent.timed import Timing

__all__ = ["RealtimePlugin", "Settings", "enable"]


def _number(low: float, strict: bool) -> Callable[[str], float]:
    """A parse of a finite number at least (or, ``strict``, above) ``low``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < low or (strict and value == low):
            raise ValueError(f"takes a number {'>' if strict else '>='} {low:g}, got {text!r}")
        return value

    return parse


class Settings(FeatureSettings):
    realtime: bool = option(
        "--hud-realtime",
        "step each env on the wall clock at its contract's control rate whether or not the "
        "policy answered: the rest of the current chunk, then the last action, is held "
        "while the next chunk is computed; held steps, deadline misses and latencies are "
        "reported per episode",
        default=False,
        kind="flag",
    )
    latency_ms: float | None = option(
        "--hud-latency",
        "give each inference a fixed delay of MS milliseconds in sim time (deterministic: "
        "its chunk is used that many ticks after the observation it read); 0 is chunk-ahead "
        "execution without delay",
        parse=_number(0.0, strict=False),
        metavar="MS",
    )
    rate: float | None = option(
        "--hud-rate",
        "the control rate (Hz) of the timed loop when the env's contract has none",
        parse=_number(0.0, strict=True),
        metavar="HZ",
    )

    def __post_init__(self) -> None:
        if not self.realtime and self.latency_ms is None and self.rate is not None:
            raise ValueError(
                "--hud-rate sets the timed loop's rate; add --hud-realtime or --hud-latency=MS"
            )
        if self.realtime and self.latency_ms is not None:
            raise ValueError(
                "--hud-realtime and --hud-latency are two clocks (wall time, or sim time with "
                "a fixed delay); pass one of them"
            )

    @property
    def timing(self) -> Timing | None:
        """The session's timed loop, or None (lockstep)."""
        if not self.realtime and self.latency_ms is None:
            return None
        latency = self.latency_ms / 1000.0 if self.latency_ms is not None else 0.0
        return Timing(realtime=self.realtime, latency=latency, rate=self.rate)


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


def enable(settings: Settings, hud: Hud) -> RealtimePlugin | None:
    timing = settings.timing
    return RealtimePlugin(timing) if timing is not None else None
