"""The timed control loop (robot/agent/timed.py, robot/clock.py): one action per tick whether
or not the policy answered, late chunks aligned to the clock, held ticks counted; in sim time
(--hud-latency) the run is the same every time, on the wall clock (--hud-realtime) the
alignment holds whatever the machine's speed."""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_hud import Task, run
from pytest_hud.robot import Model, RobotAgent
from pytest_hud.robot.agent.agent import RunSettings
from pytest_hud.robot.agent.timed import STOP, Timing
from pytest_hud.robot.clock import SimClock, WallClock, percentile
from pytest_hud.runtime import LocalRuntime

TICKS = Path(__file__).resolve().parents[1] / "helpers" / "envs" / "ticks_env.py"


class TickModel(Model):
    """Each chunk's action i is meant for tick (observed tick + i): its second element says
    which, so the executed stream shows whether late chunks were aligned. ``delay`` seconds
    of wall time per forward (a slow policy); ``hold_for`` ticks: every forward after the
    first returns only once the env has stepped that many more ticks (event-driven, so
    a test does not depend on the machine's speed)."""

    def __init__(self, horizon: int = 4, delay: float = 0.0, hold_for: int = 0) -> None:
        self.horizon = horizon
        self.delay = delay
        self.hold_for = hold_for
        self.observed: list[int] = []
        self.stepped = 0
        self.over = False
        self.changed = threading.Condition()

    def ticked(self) -> None:
        with self.changed:
            self.stepped += 1
            self.changed.notify_all()

    def infer(self, batch):
        tick = int(np.asarray(batch["observation/image"])[0, 0, 0, 0])
        self.observed.append(tick)
        if self.delay:
            time.sleep(self.delay)
        if self.hold_for and len(self.observed) > 1:
            with self.changed:
                until = self.stepped + self.hold_for
                assert self.changed.wait_for(lambda: self.stepped >= until or self.over, timeout=60)
        out = np.zeros((1, self.horizon, 2), np.float32)
        out[0, :, 0] = 1.0
        out[0, :, 1] = tick + np.arange(self.horizon)
        return out


class Executed:
    """Observer: (tick of the observation, the action's intended tick) per executed step."""

    def __init__(self, model: TickModel) -> None:
        self.pairs: list[tuple[int, int]] = []
        self.model = model

    def __call__(self, run, spaces):
        return self

    def step(self, data, action):
        self.pairs.append((int(data["observation/image"][0, 0, 0]), int(action[1])))
        self.model.ticked()

    def end(self, ok):
        with self.model.changed:
            self.model.over = True
            self.model.changed.notify_all()
        return {}


def episode(model: TickModel, timing: Timing | None, max_steps: int | None = None):
    seen = Executed(model)
    agent = RobotAgent(model)
    settings = RunSettings(timing=timing, observers=(seen,), max_steps=max_steps)
    bound = functools.partial(agent, settings=settings)
    results = asyncio.run(run([Task("ticks", "count", {})], bound, LocalRuntime(TICKS)))
    (result,) = results
    assert result.error is None, result.error
    return result, seen.pairs


def held_ticks(pairs: list[tuple[int, int]]) -> int:
    return sum(1 for tick, meant in pairs if meant != tick)


def test_sim_latency_aligns_each_chunk_and_holds_in_between() -> None:
    """50 Hz, 60 ms: each chunk is used 3 ticks after the observation it read, its first 3
    actions dropped; with 4-action chunks asked at 2 left, one tick in each cycle is held."""
    result, pairs = episode(TickModel(horizon=4), Timing(latency=0.060))
    timing = result.agent_info["timing"]
    assert timing["delay_ticks"] == 3
    assert len(pairs) == 40 == timing["ticks"]
    fresh = [(tick, meant) for tick, meant in pairs if meant == tick]
    held = [pair for pair in pairs if pair[1] != pair[0]]
    # every action executed is the one meant for its tick, or a held repeat of the last
    for (prev_tick, prev_meant), (tick, meant) in itertools.pairwise(pairs):
        assert meant in (tick, prev_meant), (prev_tick, prev_meant, tick, meant)
    assert held and fresh
    assert timing["held_steps"] == len(held)
    assert timing["dropped_actions"] > 0


def test_sim_latency_is_deterministic_and_zero_latency_never_holds() -> None:
    first = episode(TickModel(horizon=5), Timing(latency=0.1))[1]
    again = episode(TickModel(horizon=5), Timing(latency=0.1))[1]
    assert first == again
    result, pairs = episode(TickModel(horizon=5), Timing(latency=0.0))
    assert held_ticks(pairs) == 0 and result.agent_info["timing"]["held_steps"] == 0
    assert all(meant == tick for tick, meant in pairs)


def test_more_latency_holds_more() -> None:
    held = [
        episode(TickModel(horizon=4), Timing(latency=ms / 1000))[0].agent_info["timing"][
            "held_steps"
        ]
        for ms in (0, 40, 100, 200)
    ]
    assert held == sorted(held) and held[0] < held[-1], held


def test_wall_clock_keeps_ticking_while_a_slow_policy_thinks() -> None:
    """Each forward after the first answers only after the env stepped 5 more ticks: the
    env still gets one action per tick, each the one meant for its tick or a held repeat
    of the last, and the counters say how many were held."""
    model = TickModel(horizon=8, delay=0.02, hold_for=5)
    result, pairs = episode(model, Timing(realtime=True))
    timing = result.agent_info["timing"]
    assert timing["mode"] == "realtime" and timing["rate_hz"] == 50
    assert len(pairs) == 40
    for (_, prev_meant), (tick, meant) in itertools.pairwise(pairs):
        assert meant in (tick, prev_meant)
    # asked with 4 actions left, a forward answers 5 or more ticks later: its first 5
    # actions are stale (dropped) and at least one tick in between is held
    answered = len(model.observed) - 2  # the first is awaited; the last may be cut off
    assert answered > 0
    assert timing["held_steps"] == held_ticks(pairs) >= answered
    assert timing["dropped_actions"] >= 5 * answered
    assert timing["infer_ms_p50"] >= 20.0


def test_wall_clock_with_a_fast_policy_holds_nothing() -> None:
    """The next chunk is asked for with 25 ticks (half a second) to spare."""
    result, pairs = episode(TickModel(horizon=30), Timing(realtime=True, ahead=25))
    assert result.agent_info["timing"]["held_steps"] == 0
    assert all(meant == tick for tick, meant in pairs)


def test_lockstep_is_unchanged_by_the_refactor() -> None:
    result, pairs = episode(TickModel(horizon=4), None)
    assert "timing" not in result.agent_info
    assert all(meant == tick for tick, meant in pairs) and len(pairs) == 40


def test_max_steps_and_operator_stop_end_a_timed_episode() -> None:
    result, pairs = episode(TickModel(horizon=4), Timing(latency=0.02), max_steps=7)
    assert len(pairs) == 7 and result.agent_info["truncated_by_agent"]

    ticks = {"n": 0}

    def stop() -> bool:
        ticks["n"] += 1
        return ticks["n"] > 5

    token = STOP.set(stop)
    try:
        result, pairs = episode(TickModel(horizon=4), Timing(latency=0.02))
    finally:
        STOP.reset(token)
    assert len(pairs) == 5 and result.agent_info["stopped"] == "operator"


def test_clock_arithmetic() -> None:
    assert SimClock(50, 0.06).delay == 3
    assert SimClock(50, 0.04).delay == 2  # exactly two periods: two ticks, not three
    assert SimClock(10, 0.0).delay == 0
    with pytest.raises(ValueError, match="control rate"):
        SimClock(0)
    with pytest.raises(ValueError, match=">= 0"):
        SimClock(10, -1)
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0


def test_wall_clock_skips_missed_deadlines_instead_of_bursting() -> None:
    async def main() -> WallClock:
        clock = WallClock(100)
        await clock.tick()
        clock.sent()
        await asyncio.sleep(0.055)  # five periods and a half without a tick
        await clock.tick()
        clock.sent()
        return clock

    clock = asyncio.run(main())
    assert clock.stats.skipped >= 4
    assert clock.stats.misses >= 1


def test_a_one_action_policy_still_acts_when_its_answers_are_late() -> None:
    """One action a chunk, 5 ticks of latency: each answer is late, and it is still sent
    (the freshest action there is) rather than dropped, so the executed actions follow the
    policy instead of repeating its first answer for the whole episode."""
    result, pairs = episode(TickModel(horizon=1), Timing(latency=0.1))
    sent = [meant for _, meant in pairs]
    assert len(set(sent)) > 5, sent
    for tick, meant in pairs:
        assert meant <= tick  # never an action meant for a later tick
    assert result.agent_info["timing"]["dropped_actions"] == 0


def test_a_remote_policy_keeps_one_connection_per_timed_episode() -> None:
    """The timed loop runs each inference in a task of its own; a policy server's
    connection is still the episode's one (not one per inference)."""
    from pytest_hud.robot.agent.policy_server import PolicyServer
    from pytest_hud.robot.agent.remote import RemoteModel

    async def main() -> tuple[int, dict]:
        async with PolicyServer(TickModel(horizon=4, delay=0.01)) as server:
            model = RemoteModel(server.url.removeprefix("ws://"))
            opened = 0
            original = model._open

            async def counted():
                nonlocal opened
                opened += 1
                return await original()

            model._open = counted  # type: ignore[method-assign]
            agent = functools.partial(
                RobotAgent(model), settings=RunSettings(timing=Timing(realtime=True))
            )
            (result,) = await run([Task("ticks", "count", {})], agent, LocalRuntime(TICKS))
            await model.aclose()
            return opened, result.agent_info

    opened, info = asyncio.run(main())
    assert info["inferences"] > 3
    assert opened == 1
