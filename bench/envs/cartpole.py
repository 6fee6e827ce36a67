"""A short CartPole episode behind one sim slot: the per-rollout overhead benchmark's env."""

from pytest_hud import Environment

env = Environment("cartpole")
sim = env.gym("CartPole-v1")


@env.template()
async def balance(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": "balance the pole", "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
