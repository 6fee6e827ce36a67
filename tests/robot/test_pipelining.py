"""Slots that step alone, and a BatchedModel that runs them in halves (issue 18 part 2).

A real gymnasium SyncVectorEnv (Pendulum, four copies) served by GymBridge in this
process, driven by BatchedAgent over the real wire: once without the barrier (each slot
steps when its agent acts, the forward starts at half the rows) and once with it (the
old lockstep), and every episode's actions and grade must be the same.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest
from sims import CounterSim

from pytest_hud.robot import BatchedAgent, GymBridge, Model, RobotAgent, RobotClient
from pytest_hud.robot.agent.agent import RunSettings


class Alone(GymBridge):
    """The same sim with ``step_slots_alone`` (what ``env.gym(..., step_slots_alone=True)``
    serves): each slot steps when its agent acts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, step_slots_alone=True, **kwargs)


class Lockstep(GymBridge):
    """The same sim with the barrier: every slot waits for the others' actions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, step_slots_alone=False, **kwargs)


class Swing(Model):
    """Deterministic per row (so batching cannot change a row's chunk): a 3-action chunk."""

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        state = np.asarray(batch["observation/state"], np.float32)  # [N, 3]: cos, sin, omega
        push = np.clip(-2.0 * state[:, 2:3] - state[:, 1:2], -2.0, 2.0)
        return np.stack([push, 0.5 * push, -push], axis=1).astype(np.float32)  # [N, 3, 1]


class Actions:
    """Observer: records the episode's executed actions."""

    def __init__(self, into: list[list[float]]) -> None:
        self.seen: list[float] = []
        into.append(self.seen)

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        self.seen.append(float(action[0]))

    def end(self, ok: bool) -> dict[str, Any]:
        return {}


async def episodes(
    bridge_cls: type[GymBridge], split: int = 4
) -> tuple[list[Any], list[dict], list[int], Any]:
    bridge = bridge_cls("Pendulum-v1", num_envs=4)
    await bridge.start()
    try:
        grants = [await bridge.claim(seed=10 + i) for i in range(4)]
        agent = BatchedAgent(
            RobotAgent(Swing(), max_steps=30), max_wait_s=10.0, split_from=split, split="halves"
        )
        logs: list[list[list[float]]] = [[] for _ in grants]
        reports = await asyncio.gather(
            *(
                agent.run_episode(
                    bridge.url,
                    token=g["token"],
                    settings=RunSettings(observers=(lambda run, spaces, log=log: Actions(log),)),
                )
                for g, log in zip(grants, logs, strict=True)
            )
        )
        grades = [await bridge.release(g["token"]) for g in grants]
    finally:
        await bridge.stop()
    return [log[0] for log in logs], grades, agent.batched.batches, reports


@pytest.mark.anyio
async def test_slots_stepping_alone_give_the_same_episodes_as_the_barrier() -> None:
    actions, grades, batches, reports = await episodes(Alone)
    lock_actions, lock_grades, lock_batches, _ = await episodes(Lockstep)  # the barrier
    assert all(len(a) == 30 for a in actions)
    assert actions == lock_actions  # same seeds -> same actions, step for step
    assert [g["total_reward"] for g in grades] == [g["total_reward"] for g in lock_grades]
    assert [g["steps"] for g in grades] == [g["steps"] for g in lock_grades] == [30] * 4
    # lockstep: once all four are in, every forward takes all four rows; alone: the
    # forwards start at half (2 of 4) and the two halves alternate
    assert lock_batches[-1] == 4 and max(lock_batches) == 4
    assert 2 in batches and len(batches) > len(lock_batches)
    assert all(0.0 < r.extra["policy_busy"]["episode"] <= 1.0 for r in reports)
    # below split_from live rollouts, rows that step alone still go in one forward
    unsplit_actions, _, unsplit, _ = await episodes(Alone, split=5)
    assert unsplit_actions == actions and set(unsplit) == {4}


def test_gym_bridge_steps_one_copy_alone_like_the_vector_env() -> None:
    alone = GymBridge("CartPole-v1", num_envs=3)  # the default, where the env allows it
    lockstep = GymBridge("CartPole-v1", num_envs=3, step_slots_alone=False)
    for bridge in (alone, lockstep):
        bridge.reset(seed=5)
    assert alone.can_step_slots() and not lockstep.can_step_slots()
    for _ in range(4):  # copy 1 steps alone; the others stay where they were
        alone.step_slots([1], np.array([[1.0]], np.float32))
        lockstep.step(np.array([[0.0], [1.0], [0.0]], np.float32))
    a, b = alone.get_observation()[0], lockstep.get_observation()[0]
    np.testing.assert_allclose(a["observation/state"][1], b["observation/state"][1])
    assert not np.allclose(a["observation/state"][0], b["observation/state"][0])
    assert [r["steps"] for r in alone.result_slots()] == [0, 4, 0]
    alone.close()
    lockstep.close()


class SlowEnd:
    """Observer of the rollout that ends first: its ``end`` (on a worker thread, as the
    episode GIF's) waits until the other rollout has stepped after it began."""

    end_in_thread = True

    def __init__(self, began: Any, other_stepped: Any) -> None:
        self.began, self.other_stepped = began, other_stepped

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        pass

    def end(self, ok: bool) -> dict[str, Any]:
        self.began.set()
        return {"other_stepped_meanwhile": self.other_stepped.wait(timeout=30.0)}


class Watch:
    """Observer of the rollout still running: notes a step taken after the end began."""

    def __init__(self, began: Any, other_stepped: Any) -> None:
        self.began, self.other_stepped = began, other_stepped

    def step(self, data: dict[str, Any], action: np.ndarray) -> None:
        if self.began.is_set():
            self.other_stepped.set()

    def end(self, ok: bool) -> dict[str, Any]:
        return {}


@pytest.mark.anyio
async def test_an_observer_end_in_a_thread_does_not_hold_the_other_rollouts() -> None:
    """One rollout's episode-end work (a GIF encode) runs off the event loop: the other
    rollout keeps stepping meanwhile. On the loop, the end would wait out its 30 s bound
    with the other rollout frozen, and report that it never stepped."""

    began, other_stepped = threading.Event(), threading.Event()
    short, long = GymBridge("Pendulum-v1"), GymBridge("Pendulum-v1")
    for bridge in (short, long):
        await bridge.start()
    try:
        grants = [await short.claim(seed=1), await long.claim(seed=2)]
        agent = RobotAgent(Swing())
        ends = (lambda run, spaces: SlowEnd(began, other_stepped),)
        watch = (lambda run, spaces: Watch(began, other_stepped),)
        first, second = await asyncio.gather(
            agent.run_episode(
                short.url,
                token=grants[0]["token"],
                settings=RunSettings(max_steps=3, observers=ends),
            ),
            agent.run_episode(
                long.url,
                token=grants[1]["token"],
                settings=RunSettings(max_steps=150, observers=watch),
            ),
        )
    finally:
        for bridge in (short, long):
            await bridge.stop()
    assert first.steps == 3 and second.steps == 150
    assert first.extra["other_stepped_meanwhile"] is True


class HeldStep(CounterSim):
    """Two slots that step alone on a sim thread. Slot 0's first step waits there until
    slot 1 has acted, so slot 1's action comes while a step is under way."""

    offload = True

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(num_envs=2, length=3)
        self.loop, self.order = loop, []
        self.stepping, self.acted = asyncio.Event(), threading.Event()

    def step_slots(self, indices: list[int], actions: np.ndarray) -> None:
        if indices == [0] and not self.order:
            self.loop.call_soon_threadsafe(self.stepping.set)
            if not self.acted.wait(30):
                raise RuntimeError("slot 1 never acted")
        self.order.append(list(indices))
        for j, i in enumerate(indices):
            self.count[i] += actions[j, 0]
            self.ticks[i] += 1

    async def _on_action(self, slot: Any, frame: object) -> None:
        await super()._on_action(slot, frame)
        if slot.index == 1:
            self.acted.set()


@pytest.mark.anyio
async def test_an_action_that_comes_during_a_step_is_stepped_after_it() -> None:
    """A slot that steps alone steps at once when its agent acts; an action that comes
    while that step waits on the sim thread is stepped after it, not left waiting."""
    bridge = HeldStep(asyncio.get_running_loop())
    await bridge.start()
    try:
        grants = [await bridge.claim(seed=1), await bridge.claim(seed=1)]
        first, second = [await RobotClient.connect(bridge.url, token=g["token"]) for g in grants]
        for client in (first, second):
            await client.get_observation()
        await first.send_action(np.array([1.0, 0.0]))
        await asyncio.wait_for(bridge.stepping.wait(), 30)
        await second.send_action(np.array([2.0, 0.0]))
        one = await first.get_observation(timeout=30)
        two = await second.get_observation(timeout=30)
        for client in (first, second):
            await client.close()
    finally:
        await bridge.stop()
    assert bridge.order == [[0], [1]]
    assert one["data"]["observation/state"][0] == 1.0
    assert two["data"]["observation/state"][0] == 2.0
