"""A cheap env for placement benchmarks: CartPole, vectorized to 8 slots."""

from pytest_hud import Environment

env = Environment("cheap")
sim = env.gym("CartPole-v1", num_envs=8)


@env.template()
async def balance(seed: int = 0):
    ep = await sim.reset(seed=seed)
    yield {"prompt": "balance", "robot": {"token": ep["token"]}}
    yield await sim.result(token=ep["token"])
