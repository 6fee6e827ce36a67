"""Honest and deliberately broken stacks for golden replay (tests/suites/test_replay_metaworld.py),
as files a replay session in a work folder imports.

* ``ENV_VARIANT``: the train/eval example's MetaWorld env with one thing changed
  (``REPLAY_BREAK``): ``damping`` (every joint's damping tripled: a perturbed physics
  parameter) or ``gripper`` (the env negates the gripper action it is sent);
  ``PROVIDER`` (a conftest) serves the replayed rows from it.
* ``AGENTS``: ``negated_gripper`` (the shipped ACT checkpoint whose gripper action the
  adapter negates: a broken wiring), and ``sketch_reach`` / ``sketch_reach_flipped``: a
  visual servo for reach-v3 that reads the example's ``sketch`` camera (hand and goal
  located by colour, from above and from the side), honest or with its image flipped
  upside down on the way in.
"""

from __future__ import annotations

from paths import EXAMPLES

TRAIN_EVAL = EXAMPLES / "train_eval"
CHECKPOINT = TRAIN_EVAL / "policy" / "metaworld_act"

ENV_VARIANT = f"""
import os
import sys

sys.path.insert(0, {str(TRAIN_EVAL)!r})

import gymnasium as gym
import numpy as np
import metaworld_env as base
from pytest_hud import Environment

BREAK = os.environ["REPLAY_BREAK"]


class NegatedGripper(gym.ActionWrapper):
    def action(self, action):
        out = np.array(action, copy=True)
        out[-1] = -out[-1]
        return out


def make(task="reach-v3", variant=0):
    env = base.make(task, variant)
    if BREAK == "damping":
        env.unwrapped.model.dof_damping[:] *= 3
        return env
    return NegatedGripper(env)


env = Environment("metaworld")
sim = env.gym(make, fps=base.FPS)


def _episode(task):
    async def episode(seed: int = 0):
        ep = await sim.reset(task=task, variant=seed, seed=seed)
        yield {{"prompt": task, "robot": {{"token": ep["token"]}}}}
        yield await sim.result(token=ep["token"])

    return episode


for task in base.TASKS:
    env.template(task)(_episode(task))
"""

PROVIDER = """
import pytest
from pytest_hud import LocalRuntime


@pytest.fixture(scope="session")
def hud_provider():
    return LocalRuntime("env_variant.py")
"""

AGENTS = f'''
import numpy as np
from pytest_hud.robot import Adapter, LeRobotAdapter, Model, RobotAgent

CHECKPOINT = {str(CHECKPOINT)!r}


class NegatedGripperAdapter(LeRobotAdapter):
    def action(self, chunk):
        out = np.array(chunk, copy=True)
        out[:, -1] = -out[:, -1]
        return out


def negated_gripper():
    from pytest_hud.robot.agent.lerobot import lerobot_agent

    agent = lerobot_agent(CHECKPOINT)
    agent.adapter = NegatedGripperAdapter(model_image_keys=agent.adapter.model_image_keys)
    return agent


SIDE = 80  # metaworld_env.sketch: two 80x80 panels, above (x, y) and from the side (y, z)
PANELS = (((-0.5, 0.5), (0.3, 1.0)), ((0.3, 1.0), (-0.05, 0.45)))


def _centroid(panel, mask):
    ys, xs = np.nonzero(mask)
    if not len(xs):
        return None
    (x0, x1), (y0, y1) = PANELS[panel]
    return x0 + xs.mean() / (SIDE - 1) * (x1 - x0), y1 - ys.mean() / (SIDE - 1) * (y1 - y0)


def _locate(img):
    img = img.astype(np.int16)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    masks = {{"hand": (b > 150) & (r < 90) & (g < 110), "goal": (g > 130) & (r < 110) & (b < 110)}}
    out = {{}}
    for name, mask in masks.items():
        top, side = _centroid(0, mask[:, :SIDE]), _centroid(1, mask[:, SIDE:])
        if top is None or side is None:
            return None
        out[name] = np.array([top[0], (top[1] + side[0]) / 2, side[1]])
    return out


class SketchReach(Model):
    """Moves the hand toward the goal as the sketch shows them (gain 10, clipped)."""

    def infer(self, batch):
        out = []
        for img in batch["sketch"]:
            found = _locate(np.asarray(img))
            delta = np.zeros(3) if found is None else found["goal"] - found["hand"]
            out.append(np.concatenate([np.clip(10 * delta, -1, 1), [-1.0]]))
        return np.asarray(out, np.float32)[:, None, :]


class UpsideDown(Adapter):
    def observation(self, data, prompt):
        flipped = np.ascontiguousarray(np.asarray(data["sketch"])[::-1])
        return {{**data, "sketch": flipped, "prompt": prompt}}


def sketch_reach():
    return RobotAgent(SketchReach(), name="sketch-reach")


def sketch_reach_flipped():
    return RobotAgent(SketchReach(), UpsideDown(), name="sketch-reach-flipped")
'''
