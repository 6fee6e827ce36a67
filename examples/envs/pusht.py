"""Example image env: gym-pusht's PushT (96x96 camera + 2-d agent position).

The camera is what the html report shows as the episode's animation. ``requires`` and
``apt`` are what an image serving this module needs (``--hud-runtime=docker`` builds
it): gym-pusht pinned with its simulation deps, and the system libraries opencv-python
links (libGL, GLib).
"""

from pytest_hud import Environment

env = Environment(
    "pusht",
    requires=["gym-pusht==0.1.8", "pymunk==6.11.1", "shapely==2.2.0", "pygame==2.6.1"],
    apt=["libgl1", "libglib2.0-0"],
)
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
