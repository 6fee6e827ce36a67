"""Env module for the LeRobot-env tests: any of LeRobot's own envs through
``env.lerobot(type, ...)``; ``build(type, num_envs, **config)`` makes one."""

from typing import Any

from pytest_hud import Environment


def build(env_type: str = "pusht", num_envs: int = 1, **config: Any) -> Environment:
    env = Environment(f"lerobot-{env_type}")
    sim = env.lerobot(env_type, num_envs=num_envs, **config)

    @env.template()
    async def episode(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    return env


env = build()
