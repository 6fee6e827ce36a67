"""Env module: the CartPole vla-eval benchmark served with ``env.vla_eval``.

``$VLA_EPISODES`` episodes per task of ``$VLA_MAX_STEPS`` steps over ``$VLA_NUM_ENVS``
slots; ``VLA_CAMERA=1`` adds the benchmark's tiny camera (``VLA_CAMERA=N``: N x N
frames), ``VLA_ASYNC=1`` serves the same episodes through vla-eval's async ``Benchmark``
API (cartpole_async.py); ``VLA_INLINE=1`` serves it inline (no sim process), ``VLA_INLINE=0``
in a sim process of its own, unset: where the session puts it (the default placement).
"""

from __future__ import annotations

import os
from typing import Any

from cartpole_bench import CartPoleBenchmark

from pytest_hud import Environment
from pytest_hud.interop.vla_eval.bridge import benchmark_rows

EPISODES = int(os.environ.get("VLA_EPISODES", "2"))
MAX_STEPS = int(os.environ.get("VLA_MAX_STEPS", "100"))
NUM_ENVS = int(os.environ.get("VLA_NUM_ENVS", "1"))
CAMERA = os.environ.get("VLA_CAMERA", "")
PARAMS: dict[str, Any] = {"camera": True if CAMERA == "1" else int(CAMERA)} if CAMERA else {}
BENCHMARK: type = CartPoleBenchmark
if os.environ.get("VLA_ASYNC") == "1":
    from cartpole_async import AsyncCartPoleBenchmark

    BENCHMARK = AsyncCartPoleBenchmark

env = Environment("vla-cartpole")
INLINE = {"1": True, "0": False}.get(os.environ.get("VLA_INLINE", ""))
sim = env.vla_eval(BENCHMARK, max_steps=MAX_STEPS, num_envs=NUM_ENVS, inline=INLINE, **PARAMS)


@env.template()
async def episode(task: dict):
    ep = await sim.reset(task=task)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])


ROWS = [episode.task(**row) for row in benchmark_rows(BENCHMARK, episodes=EPISODES)]
