"""Env module for the interrupt tests and bench (tests/helpers/interrupted.py): ``intr/quick``
rows finish in a few CartPole steps; ``intr-forever/endless`` rows step a Pendulum that never
ends (about 50 steps a second, actions flowing over the wire) until the session is
interrupted. With
``$INTERRUPT_DIR`` set (every runtime but docker, whose containers do not see it), a row
writes ``started-N`` once its rollout starts and ``done-N`` just before its result."""

import os
import time
from pathlib import Path

import gymnasium

from pytest_hud import Environment

env = Environment("intr")
pole = env.gym("CartPole-v1")
forever = Environment("intr-forever")


class _Paced(gymnasium.Wrapper):
    def step(self, action):  # type: ignore[no-untyped-def]
        time.sleep(0.02)
        return self.env.step(action)


def endless_pendulum() -> gymnasium.Env:
    """A Pendulum with no step limit, paced at about 50 steps a second."""
    return _Paced(gymnasium.make("Pendulum-v1", max_episode_steps=10**9))


pendulum = forever.gym(endless_pendulum)


def _mark(what: str, n: int) -> None:
    folder = os.environ.get("INTERRUPT_DIR")
    if folder:
        Path(folder, f"{what}-{n}").write_text(str(os.getpid()))


@env.template()
async def quick(n: int = 0):
    ep = await pole.reset(seed=n)
    _mark("started", n)
    yield {"prompt": "balance", "robot": {"token": ep["token"]}}
    result = await pole.result(token=ep["token"])
    _mark("done", n)
    yield result


@forever.template()
async def endless(n: int = 0):
    ep = await pendulum.reset(seed=n)
    _mark("started", n)
    yield {"prompt": "swing up, forever", "robot": {"token": ep["token"]}}
    yield await pendulum.result(token=ep["token"])
