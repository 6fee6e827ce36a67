"""Pacing (issue 18): a batch waits for the live rollouts predicted to ask within a
forward, so rollouts on two sims that step out of phase share forwards again.

The model's forward sleeps (a fixed cost plus a cost per row, like a policy's on a CPU)
and each rollout "steps its chunk" by sleeping: what is under test is only when the
batcher starts a forward, which these timings decide the same way on any machine as long
as a sleep is not late by a large fraction of a forward.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import numpy as np
import pytest

from pytest_hud.robot.agent.batching import BatchedModel
from pytest_hud.robot.agent.model import Model
from pytest_hud.robot.agent.pacing import SLACK, Arrivals, Rollout

pytestmark = pytest.mark.anyio
FIXED, PER_ROW = 0.08, 0.03  # a forward of 5 rows: 0.23 s; of 10: 0.38 s


class Sleepy(Model):
    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        n = len(batch["x"])
        time.sleep(FIXED + PER_ROW * n)
        return np.zeros((n, 8, 1), np.float32)


async def two_sims(pace: bool, chunks: int = 10) -> list[int]:
    """Two groups of 5 rollouts (two sims of 5 copies), the second starting 0.1 s late;
    each group steps a chunk in 0.07 s, well inside a forward. The batch sizes run."""
    model = BatchedModel(Sleepy(), pace=pace)

    async def rollout(start: float) -> None:
        with model.session():
            await asyncio.sleep(start)
            for _ in range(chunks):
                await model.ainfer({"x": np.zeros(1, np.float32)})
                await asyncio.sleep(0.07)

    await asyncio.gather(*(rollout(0.1 * (i // 5)) for i in range(10)))
    return model.batches


async def test_without_pacing_two_sims_out_of_phase_split_every_forward() -> None:
    """The fixed 50 ms window: the half that asks first runs alone, the other half steps
    meanwhile and asks while that forward runs, so it runs alone next, for good."""
    batches = await two_sims(pace=False)
    assert Counter(batches) == Counter({5: 20}), batches


async def test_pacing_waits_for_the_other_sim_and_forwards_run_full() -> None:
    batches = await two_sims(pace=True)
    assert sum(batches) == 100
    assert batches[-5:] == [10] * 5, batches  # in phase once one forward took both halves
    assert len(batches) <= 13, batches  # against 20 forwards without pacing


def test_a_missing_rollout_is_waited_for_until_its_usual_stepping_time_has_passed() -> None:
    arrivals = Arrivals()
    here, there = Rollout(), Rollout()
    arrivals.live |= {here, there}
    assert arrivals.hold_until([here], now=0.0) is None  # nothing measured yet
    arrivals.answered([here, there], seconds=0.4, now=1.0)
    arrivals.asked(here, now=1.1)  # here stepped its chunk in 0.1 s
    arrivals.asked(there, now=1.3)  # there in 0.3 s: there is the slower sim
    arrivals.answered([here, there], seconds=0.4, now=2.0)
    arrivals.asked(here, now=2.1)
    # there is waited for until 1.5 times its own stepping time after its answer
    assert arrivals.hold_until([here], now=2.1) == pytest.approx(2.0 + SLACK * 0.3)


def test_no_wait_for_a_rollout_that_cannot_be_predicted_or_comes_too_late() -> None:
    arrivals = Arrivals()
    here, there, fresh = Rollout(), Rollout(), Rollout()
    arrivals.live |= {here, there}
    arrivals.answered([here, there], seconds=0.2, now=1.0)
    arrivals.asked(here, now=1.1)
    arrivals.asked(there, now=2.0)  # there steps a chunk in 1.0 s: longer than a forward
    arrivals.answered([here, there], seconds=0.2, now=3.0)
    arrivals.asked(here, now=3.1)
    assert arrivals.hold_until([here], now=3.1) is None  # 1.5 s away, a forward is 0.2 s
    arrivals.live.add(fresh)  # a rollout that never asked yet
    assert arrivals.hold_until([here, there], now=3.1) is None
