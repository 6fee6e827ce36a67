"""Example env module: classic-control envs served over the robot wire.

Serve it on its own with ``python -m pytest_hud.serve examples/envs/pendulum.py``.
"""

from pytest_hud import Environment

env = Environment("pendulum")
sim = env.gym("Pendulum-v1")


@env.template()
async def swing_up(seed: int = 0):
    """Swing the pendulum up; the grade is the episode's return (success: above -400)."""
    ep = await sim.reset(seed=seed)
    yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
    grade = await sim.result(token=ep["token"])
    grade["success"] = grade["total_reward"] > -400.0
    grade["score"] = float(grade["success"])
    yield grade


cartpole = Environment("cartpole")
pole = cartpole.gym("CartPole-v1", success_threshold=25)


@cartpole.template()
async def balance(seed: int = 0):
    """Keep the pole up for 25 steps."""
    ep = await pole.reset(seed=seed)
    yield {"prompt": "balance the pole", "robot": {"token": ep["token"]}}
    yield await pole.result(token=ep["token"])


TASKS = [swing_up.task(seed=s) for s in range(3)] + [balance.task(seed=s) for s in range(3)]
