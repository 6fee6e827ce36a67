"""Env module: the CartPole vla-eval StepBenchmark served with ``env.vla_eval``."""

from __future__ import annotations

import os

from cartpole_bench import CartPoleBenchmark

from pytest_hud import Environment
from pytest_hud.interop.vla_eval.bridge import benchmark_rows

EPISODES = int(os.environ.get("VLA_EPISODES", "2"))
MAX_STEPS = int(os.environ.get("VLA_MAX_STEPS", "100"))
NUM_ENVS = int(os.environ.get("VLA_NUM_ENVS", "1"))

env = Environment("vla-cartpole")
sim = env.vla_eval(CartPoleBenchmark, max_steps=MAX_STEPS, num_envs=NUM_ENVS)


@env.template()
async def episode(task: dict):
    ep = await sim.reset(task=task)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])


ROWS = [episode.task(**row) for row in benchmark_rows(CartPoleBenchmark, episodes=EPISODES)]
