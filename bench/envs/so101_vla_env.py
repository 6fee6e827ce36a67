"""Env module for bench/robots.py vla-eval: the SO-101 vla-eval benchmark (so101_vla_bench.py)
served by pytest-hud with ``env.vla_eval`` at ``$SO101_VLA_FPS`` Hz, ``$SO101_VLA_SEEDS``
tasks of at most ``$SO101_VLA_MAX_STEPS`` steps."""

import os

from so101_vla_bench import SO101Benchmark

from pytest_hud import Environment

SEEDS = int(os.environ.get("SO101_VLA_SEEDS", "2"))
MAX_STEPS = int(os.environ.get("SO101_VLA_MAX_STEPS", "150"))

env = Environment("so101-vla")
sim = env.vla_eval(
    SO101Benchmark,
    max_steps=MAX_STEPS,
    fps=float(os.environ.get("SO101_VLA_FPS", "30")),
    seeds=SEEDS,
)


@env.template()
async def episode(task: dict):
    ep = await sim.reset(task=task)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
