"""Env module for the LeRobot tests: PushT with a 96x96 camera (``pixels``) and the
agent's position (``agent_pos``); ``build(num_envs)`` makes a vectorized one."""

from pytest_hud import Environment

PUSHT = "gym_pusht:gym_pusht/PushT-v0"
PROMPT = "Push the T-shaped block onto the T-shaped target."


def build(num_envs: int = 1) -> Environment:
    env = Environment("pusht")
    sim = env.gym(
        PUSHT, num_envs=num_envs, prompt=PROMPT, make_kwargs={"obs_type": "pixels_agent_pos"}
    )

    @env.template()
    async def push(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    return env


env = build()
