"""Env module for the compatibility preflight tests: one small sim (``ShapedSim``) whose
contract is what its arguments say (a camera or none, a state of some size and value,
an action of some size and range, an episode length), declared as several envs, each
built to meet the tiny ACT of ``lerobot_fixtures.make_tiny_act`` (one 96x96 camera
``observation.image``, a 2-dim state and action, PushT's stats over [0, 512], 8 actions
per inference) in one way.

=====================  =========================================================
env                    what it does to that ACT
=====================  =========================================================
``compat-honest``      fits: camera 96x96 rgb, state 2 at 256, action 2 in a wide range
``compat-nocam``       no camera (a hard mismatch)
``compat-action3``     a 3-dim action (a hard mismatch)
``compat-resize``      a 64x48 camera (resize)
``compat-far``         a state of 1e5, hundreds of sds from the stats (warn)
``compat-range``       an action range of [-1, 1]: the ACT emits hundreds (warn)
``compat-short``       episodes of 3 steps, shorter than the 8-step chunk (warn)
=====================  =========================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_hud import Environment
from pytest_hud.robot import RobotBridge, RobotEndpoint

#: An action range no ACT of PushT's stats leaves (the honest env's).
WIDE = 1.0e4


class ShapedSim(RobotBridge):
    """A one-slot sim: a constant state, a gray camera, ``length`` steps per episode,
    every episode a success (the preflight is what these envs test)."""

    def __init__(
        self,
        camera: list[int] | None = (96, 96),
        state_dim: int = 2,
        state_value: float = 256.0,
        action_dim: int = 2,
        action_range: float = WIDE,
        length: int = 12,
    ) -> None:
        self.camera = list(camera) if camera else None
        self.state = np.full((1, state_dim), state_value, np.float32)
        self.length = length
        self.t = 0
        features: dict[str, Any] = {}
        if self.camera:
            h, w = self.camera
            features["observation/image"] = {
                "role": "observation",
                "type": "rgb",
                "shape": [h, w, 3],
            }
        features["observation/state"] = {"role": "observation", "shape": [state_dim]}
        features["action"] = {
            "role": "action",
            "shape": [action_dim],
            "stats": {"min": [-action_range] * action_dim, "max": [action_range] * action_dim},
        }
        self.contract = {"control_rate": 10, "features": features}

    def reset(self, seed: int = 0) -> str:
        self.t = 0
        return "push the block"

    def step(self, actions: np.ndarray) -> None:
        self.t += 1

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        obs = {"observation/state": self.state}
        if self.camera:
            h, w = self.camera
            obs["observation/image"] = np.full((1, h, w, 3), 128, np.uint8)
        return obs, np.array([self.t >= self.length])

    def result_slots(self) -> list[dict[str, Any]]:
        return [{"score": 1.0, "success": True, "total_reward": 0.0, "steps": self.t}]


def build(name: str, **kwargs: Any) -> Environment:
    env = Environment(name)
    sim = RobotEndpoint(ShapedSim, kwargs=kwargs)
    env.add_capability(sim)

    @env.template()
    async def episode(seed: int = 0):
        ep = await sim.reset(seed=seed)
        yield {"prompt": ep["prompt"], "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    episode.task(seed=0)  # the row a preflight runs when no test names one
    return env


honest = build("compat-honest")
nocam = build("compat-nocam", camera=None)
action3 = build("compat-action3", action_dim=3)
resize = build("compat-resize", camera=(48, 64))
far = build("compat-far", state_value=1.0e5)
short_range = build("compat-range", action_range=1.0)
short = build("compat-short", length=3)

ENVS = {e.name: e for e in (honest, nocam, action3, resize, far, short_range, short)}
