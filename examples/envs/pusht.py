"""Example image env: gym-pusht's PushT (96x96 camera + 2-d agent position).

The camera is what the html report shows as the episode's animation.
"""

from pytest_hud import Environment

env = Environment("pusht")
sim = env.gym("gym_pusht:gym_pusht/PushT-v0", make_kwargs={"obs_type": "pixels_agent_pos"})


@env.template()
async def push_t(seed: int = 0):
    """Push the T onto its target outline (success: coverage above 95%)."""
    ep = await sim.reset(seed=seed)
    yield {
        "prompt": "Push the T-shaped block onto the T-shaped target.",
        "robot": {"token": ep["token"]},
    }
    yield await sim.result(token=ep["token"])
