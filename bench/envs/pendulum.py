"""Env module for bench/robots.py latency --pendulum: gymnasium's Pendulum-v1 at its own
20 Hz (dt 0.05 s), one slot, 200 steps; success is a reward total above -400 (as the tests'
vector_pendulum.py grades it). ``case`` names the bench's variant; the env ignores it."""

from pytest_hud import Environment

env = Environment("pendulum")
sim = env.gym("Pendulum-v1", fps=20.0)


@env.template()
async def swing_up(seed: int = 0, case: str = ""):
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    grade["success"] = grade["total_reward"] > -400.0
    grade["score"] = float(grade["success"])
    yield grade
