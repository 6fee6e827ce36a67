"""A vectorized env for shared-substrate tests: one pendulum sim with four slots."""

from pytest_hud import Environment

env = Environment("vector_pendulum")
sim = env.gym("Pendulum-v1", num_envs=4)


@env.template()
async def swing_up(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    grade["success"] = grade["total_reward"] > -400.0
    grade["score"] = float(grade["success"])
    yield grade
