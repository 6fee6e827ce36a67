"""A minimal MetaWorld MT1 env module and its scripted expert, for the train/eval loop.

Stand-in until the MetaWorld suite (``pytest_hud/suites/metaworld.py``) lands; keep it
small. State only: the 39-d observation (hand, gripper, two objects, the goal), sent as
``agent_pos`` (4) and ``environment_state`` (35) so a recording has LeRobot's
``observation.state`` and ``observation.environment_state``, and the 4-d action (hand
motion, gripper). Each episode rebuilds the env with ``seed`` as the MT1
seed, because an MT1 env's ``reset(seed=...)`` does not pick its task configuration
(object/goal positions): the first reset after building does, reproducibly. Building
costs ~0.15-0.3 s here. Episodes end on success (``terminate_on_success``) or after
``MAX_STEPS``; the scripted experts need 39-188 steps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np

from pytest_hud import Environment
from pytest_hud.robot import Model, RobotAgent

#: The tasks the loop records and evaluates (MetaWorld v3 names).
TASKS = (
    "reach-v3",
    "push-v3",
    "drawer-open-v3",
    "button-press-topdown-v3",
    "window-open-v3",
)
MAX_STEPS = 200
FPS = 80  # MetaWorld's render_fps; lerobot's metaworld env uses the same
#: The robot's own values: hand position (3) and gripper opening (1), as lerobot's
#: metaworld env's ``agent_pos``; the other 35 (objects, their previous frame, the goal)
#: are the environment's state.
AGENT = 4


def make(task: str = "reach-v3", variant: int = 0) -> Any:
    """One MT1 env whose first reset is task configuration ``variant`` of ``task``."""
    import gymnasium as gym
    import metaworld  # noqa: F401  (registers Meta-World/MT1)

    base = gym.make(
        "Meta-World/MT1",
        env_name=task,
        seed=variant,
        max_episode_steps=MAX_STEPS,
        terminate_on_success=True,
    )
    box = base.observation_space
    assert isinstance(box, gym.spaces.Box), box
    low, high = box.low, box.high
    space = gym.spaces.Dict(
        {
            "agent_pos": gym.spaces.Box(low[:AGENT], high[:AGENT], dtype=np.float64),
            "environment_state": gym.spaces.Box(low[AGENT:], high[AGENT:], dtype=np.float64),
        }
    )
    return gym.wrappers.TransformObservation(base, split, space)


def split(obs: np.ndarray) -> dict[str, np.ndarray]:
    """MetaWorld's 39 values as LeRobot's two state features."""
    return {"agent_pos": obs[:AGENT], "environment_state": obs[AGENT:]}


def join(agent_pos: np.ndarray, environment_state: np.ndarray) -> np.ndarray:
    """The 39-d MetaWorld observation back (rows: ``[N, 4]`` and ``[N, 35]``)."""
    return np.concatenate([agent_pos, environment_state], axis=-1)


env = Environment("metaworld")
sim = env.gym(make, fps=FPS)


def _episode(task: str) -> Callable[..., AsyncIterator[dict[str, Any]]]:
    async def episode(seed: int = 0) -> AsyncIterator[dict[str, Any]]:
        """One MT1 episode of the task (the prompt is its name); success is MetaWorld's."""
        ep = await sim.reset(task=task, variant=seed, seed=seed)
        yield {"prompt": task, "robot": {"token": ep["token"]}}
        yield await sim.result(token=ep["token"])

    return episode


#: One template per task, so a row reads ``metaworld/push-v3`` (its slug ``push-v3-<hash>``):
#: expectation globs (``metaworld/push-v3*``) and comparisons pool a task's seeds by name.
MT1 = {task: env.template(task)(_episode(task)) for task in TASKS}


class ExpertModel(Model):
    """MetaWorld's scripted policy for the row's task (the prompt), one action per call."""

    def __init__(self) -> None:
        self._policies: dict[str, Any] = {}

    def _policy(self, task: str) -> Any:
        if task not in self._policies:
            from metaworld.policies import ENV_POLICY_MAP

            if task not in ENV_POLICY_MAP:
                raise KeyError(f"no scripted MetaWorld policy for {task!r}; the prompt names it")
            self._policies[task] = ENV_POLICY_MAP[task]()  # type: ignore[abstract]
        return self._policies[task]

    def infer(self, batch: dict[str, Any]) -> np.ndarray:
        states = join(
            np.asarray(batch["agent_pos"], np.float64),
            np.asarray(batch["environment_state"], np.float64),
        )
        prompts = batch["prompt"]
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        actions = [self._policy(p).get_action(s) for p, s in zip(prompts, states, strict=True)]
        return np.asarray(actions, np.float32)[:, None, :]


def expert(arg: str | None = None) -> RobotAgent:
    """``--hud-agent=examples/train_eval/metaworld_env.py:expert``."""
    return RobotAgent(ExpertModel(), name="metaworld-expert")
