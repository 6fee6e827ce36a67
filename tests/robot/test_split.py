"""Halves or one batch, chosen by measuring both (issue 18 part 2; robot/agent/split.py).

The unit tests drive :class:`Split` with given timings. The end-to-end ones run eight
rollouts of BatchedAgent over the real wire against a SyncVectorEnv whose copies step
alone, with two cost shapes made from sleeps (a sleep does not get shorter on a loaded
machine, and the margins are 35% or more): a forward that costs the same for 4 rows as
for 8 (a GPU) next to sims that take as long to step a chunk, where the halves must win;
and a forward whose fixed cost dominates next to sims that step at once, where one
batch must.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from pytest_hud.robot import BatchedAgent, GymBridge, Model, RobotAgent
from pytest_hud.robot.agent.split import REPROBE, WINDOW, Split


def feed(
    split: Split,
    seconds_per_row: dict[bool, float],
    live: int,
    chunks: int,
    stall_halves: tuple[int, float] | None = None,
) -> None:
    """Answer ``chunks`` chunks of ``live`` rows, each row taking the way's time; with
    ``stall_halves=(k, s)`` every k-th answer in halves comes ``s`` seconds later still."""
    now, halves_answers = 0.0, 0
    for _ in range(chunks):
        rows = live // 2 if split.halves else live
        for _ in range(live // rows):
            now += rows * seconds_per_row[split.halves]
            if split.halves and stall_halves is not None:
                halves_answers += 1
                if halves_answers % stall_halves[0] == 0:
                    now += stall_halves[1]
            split.answered(rows, now, live, eligible=True)


def test_split_runs_halves_probes_one_batch_and_keeps_the_faster() -> None:
    faster_halves = Split()
    assert faster_halves.halves  # starts in halves
    feed(faster_halves, {False: 0.010, True: 0.007}, live=8, chunks=3 * WINDOW + 4)
    assert [way for way, _ in faster_halves.history[:2]] == [True, False]
    assert faster_halves.halves and faster_halves.chosen
    slower_halves = Split()
    feed(slower_halves, {False: 0.010, True: 0.013}, live=8, chunks=3 * WINDOW + 4)
    assert [way for way, _ in slower_halves.history[:2]] == [True, False]
    assert not slower_halves.halves and not slower_halves.chosen


def test_one_stall_in_a_window_does_not_decide_the_way() -> None:
    """Halves 30% faster, but one answer in every window of the halves comes a second
    late (another process had the machine): without that one gap the halves still win."""
    split = Split()
    stall = (2 * WINDOW, 1.0)  # a window of halves is 2 x WINDOW answers: one stall in each
    feed(split, {False: 0.010, True: 0.007}, live=8, chunks=3 * WINDOW + 4, stall_halves=stall)
    assert [way for way, _ in split.history[:2]] == [True, False]
    assert split.halves and split.chosen
    assert split.rates[True] > split.rates[False]


def test_split_keeps_the_halves_on_a_tie_and_probes_again_later() -> None:
    split = Split()
    feed(split, {False: 0.010, True: 0.0102}, live=8, chunks=3 * WINDOW + 4)
    assert split.halves  # one batch was 2% faster: within the margin, so halves stay
    feed(split, {False: 0.010, True: 0.0102}, live=8, chunks=(REPROBE + 3) * (WINDOW + 1))
    assert [way for way, _ in split.history].count(False) >= 2  # probed one batch again
    assert split.halves


def test_a_probe_is_compared_with_the_window_next_to_it() -> None:
    """Everything slows down over the run (load, or the sims): one batch, probed late,
    is slower than the halves were at the start but faster than they are now."""
    split = Split()
    feed(split, {False: 0.010, True: 0.007}, live=8, chunks=3 * WINDOW + 4)
    assert split.chosen  # halves at the start
    feed(split, {False: 0.020, True: 0.030}, live=8, chunks=(REPROBE + 3) * (WINDOW + 1))
    assert not split.chosen  # the late probe beat the halves' late windows


def test_split_measures_nothing_while_rollouts_cannot_split() -> None:
    split = Split()
    for i in range(50):
        split.answered(8, float(i), 8, eligible=False)
    assert split.history == [] and split.halves


def test_a_fixed_split_never_changes_and_a_bad_one_is_refused() -> None:
    for mode, halves in (("halves", True), ("whole", False)):
        split = Split(mode)
        feed(split, {False: 0.010, True: 0.020 if halves else 0.001}, live=8, chunks=40)
        assert split.halves is halves and split.history == []
    with pytest.raises(ValueError, match="'auto', 'halves' or 'whole'"):
        Split("half")


class SlowStep(gym.Wrapper):
    def __init__(self, seconds: float) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.seconds = seconds

    def step(self, action: Any) -> Any:
        if self.seconds:
            time.sleep(self.seconds)
        return self.env.step(action)


class Sleeper(Model):
    """A forward that sleeps ``fixed + per_row * rows`` and returns a 3-action chunk."""

    def __init__(self, fixed: float, per_row: float) -> None:
        self.fixed, self.per_row = fixed, per_row

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        n = len(batch["observation/state"])
        time.sleep(self.fixed + self.per_row * n)
        return np.zeros((n, 3, 1), np.float32)


async def chosen(model: Model, step_s: float) -> Split:
    bridge = GymBridge(lambda: SlowStep(step_s), num_envs=8, step_slots_alone=True)
    await bridge.start()
    try:
        grants = [await bridge.claim(seed=i) for i in range(8)]
        agent = BatchedAgent(RobotAgent(model, max_steps=45), max_wait_s=10.0)
        await asyncio.gather(*(agent.run_episode(bridge.url, token=g["token"]) for g in grants))
        for g in grants:
            await bridge.release(g["token"])
    finally:
        await bridge.stop()
    return agent.batched.split


@pytest.mark.anyio
async def test_halves_are_chosen_where_a_forward_costs_the_same_for_half_the_rows() -> None:
    # one batch: 0.1 s forward + 8 copies x 3 steps x 10 ms = 0.34 s a chunk; halves:
    # each half's 0.12 s of stepping hides behind the other's forward, 0.22 s a chunk
    split = await chosen(Sleeper(fixed=0.1, per_row=0.0), step_s=0.010)
    assert {way for way, _ in split.history} == {False, True}
    assert split.halves, split.history
    assert split.rates[True] > split.rates[False]


@pytest.mark.anyio
async def test_one_batch_is_chosen_where_a_forward_is_mostly_fixed_cost() -> None:
    # one batch: 0.2 + 8 x 0.01 = 0.28 s a chunk; halves: two of 0.24 s = 0.48 s
    split = await chosen(Sleeper(fixed=0.2, per_row=0.01), step_s=0.0)
    assert {way for way, _ in split.history} == {False, True}
    assert not split.halves, split.history
    assert split.rates[False] > split.rates[True]


SUITE_ENV = """
from pytest_hud import Environment

env = Environment("swing")
sim = env.gym("Pendulum-v1", num_envs=8)  # a SyncVectorEnv: its slots step alone


@env.template()
async def swing(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
"""

SUITE_AGENT = """
import numpy as np
from pytest_hud.robot import Model, RobotAgent


class Chunks(Model):
    def infer(self, batch):
        return np.zeros((len(batch["observation/state"]), 3, 1), np.float32)


def make():
    return RobotAgent(Chunks(), max_steps=24)
"""

SUITE_TESTS = """
import pytest
from swing_env import swing


@pytest.mark.hud(tasks=[swing.task(seed=s) for s in range(8)])
def test_swing(hud_result):
    assert hud_result.steps == 24
"""


@pytest.mark.parametrize("way", ["halves", "whole"])
def test_hud_split_pins_the_way_the_batched_forwards_run(pytester, way: str) -> None:
    pytester.makepyfile(swing_env=SUITE_ENV, swing_agent=SUITE_AGENT, test_swing=SUITE_TESTS)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--hud-agent=swing_agent:make",
        "--hud-concurrency=8",
        "--hud-shared=8",
        f"--hud-split={way}",
        "--hud-results=results.json",
        timeout=600,
    )
    result.assert_outcomes(passed=8)
    rows = json.loads((pytester.path / "results.json").read_text())["rollouts"]
    assert {r["policy_busy"]["halves"] for r in rows} == {way == "halves"}


def test_a_bad_hud_split_is_one_usage_error(pytester) -> None:
    pytester.makepyfile(swing_env=SUITE_ENV, swing_agent=SUITE_AGENT, test_swing=SUITE_TESTS)
    result = pytester.runpytest_subprocess("--hud-split=half", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hud-split is auto, halves or whole, got 'half'*"])
