"""A minimal MetaWorld MT1 env module and its scripted expert, for the train/eval loop.

Stand-in until the MetaWorld suite (``pytest_hud/suites/metaworld.py``) lands; keep it
small. State only: the 39-d observation (hand, gripper, two objects, the goal), sent as
``agent_pos`` (4) and ``environment_state`` (35) so a recording has LeRobot's
``observation.state`` and ``observation.environment_state``, and the 4-d action (hand
motion, gripper). Each episode rebuilds the env with ``seed`` as the MT1
seed, because an MT1 env's ``reset(seed=...)`` does not pick its task configuration
(object/goal positions): the first reset after building does, reproducibly. The bridge
keeps the env when the next episode has the same build args (the same row again: a
repeat, or the other arm of an A/B pair), so every reset starts as that first one
(:class:`FirstReset`), whatever ran before. Building
costs ~0.15-0.3 s here. Episodes end on success (``terminate_on_success``) or after
``MAX_STEPS``; the scripted experts need 39-188 steps.

For the report's episode animations the env also sends ``sketch``, a 160x80 picture drawn
from the state (:func:`sketch`: the table from above and from the side, with the hand,
its path, the object and the goal), not a MuJoCo rendering: rendering costs ~0.25 s a
frame here, ~25 CPU-minutes for a 50-episode evaluation, while a sketch costs ~0.4 ms.
A state-only policy reads no camera, so the sketch never reaches it. ``MW_SKETCH=0``
leaves it out (``run.py`` records the demonstrations without it, so the trained policy
stays state-only).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import gymnasium as gym
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


class FirstReset(gym.Wrapper):  # type: ignore[type-arg]
    """Every reset as the first of a freshly built env: MT1 draws the task configuration
    from the env's generator *before* reseeding it, so on a reused env it would draw from
    wherever the previous episode left it; reseeding with the build seed first draws the
    configuration a fresh env draws."""

    def __init__(self, env: Any, seed: int) -> None:
        super().__init__(env)
        self.build_seed = seed

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.env.unwrapped.seed(self.build_seed)  # type: ignore[attr-defined]
        return self.env.reset(**kwargs)


def make(task: str = "reach-v3", variant: int = 0) -> Any:
    """One MT1 env whose every reset is task configuration ``variant`` of ``task``."""
    import metaworld  # noqa: F401  (registers Meta-World/MT1)

    base = FirstReset(
        gym.make(
            "Meta-World/MT1",
            env_name=task,
            seed=variant,
            max_episode_steps=MAX_STEPS,
            terminate_on_success=True,
        ),
        variant,
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
    env = gym.wrappers.TransformObservation(base, split, space)
    return Sketched(env) if os.environ.get("MW_SKETCH", "1") != "0" else env


def split(obs: np.ndarray) -> dict[str, np.ndarray]:
    """MetaWorld's 39 values as LeRobot's two state features."""
    return {"agent_pos": obs[:AGENT], "environment_state": obs[AGENT:]}


def join(agent_pos: np.ndarray, environment_state: np.ndarray) -> np.ndarray:
    """The 39-d MetaWorld observation back (rows: ``[N, 4]`` and ``[N, 35]``)."""
    return np.concatenate([agent_pos, environment_state], axis=-1)


#: The sketch's two panels: (horizontal, vertical) state indices and their ranges in
#: metres, MetaWorld's workspace (hand_low/hand_high, objects on the table, goals above).
_PANELS = (((0, 1), (-0.5, 0.5), (0.3, 1.0)), ((1, 2), (0.3, 1.0), (-0.05, 0.45)))
_SIDE = 80


def _pixel(panel: int, xyz: np.ndarray) -> tuple[float, float]:
    """Where a state point falls in a panel: (column, row), possibly off the panel."""
    (i, j), (x0, x1), (y0, y1) = _PANELS[panel]
    u = (float(xyz[i]) - x0) / (x1 - x0) * (_SIDE - 1)
    v = (1.0 - (float(xyz[j]) - y0) / (y1 - y0)) * (_SIDE - 1)
    return u, v


def _dot(img: np.ndarray, panel: int, xyz: np.ndarray, radius: float, rgb: tuple[int, ...]) -> None:
    """A filled disc at a state point in one panel (clipped to it), drawn in its own small
    window: a whole-panel mask per disc made a sketch cost 2.8 ms, more than a step."""
    u, v = _pixel(panel, xyz)
    r = int(np.ceil(radius))
    left, top = max(int(u) - r, 0), max(int(v) - r, 0)
    right, bottom = min(int(u) + r + 2, _SIDE), min(int(v) + r + 2, _SIDE)
    if left >= right or top >= bottom:
        return
    ys, xs = np.ogrid[top:bottom, left:right]
    window = img[top:bottom, panel * _SIDE + left : panel * _SIDE + right]
    window[(xs - u) ** 2 + (ys - v) ** 2 <= radius**2] = rgb


def sketch(obs: np.ndarray, trail: list[np.ndarray]) -> np.ndarray:
    """The 39-d state as a 160x80 picture: from above (x, y) left, from the side (y, z)
    right; the goal green, the object red (a second one orange), the hand blue (larger
    when the gripper is open) over its path so far."""
    img = np.full((_SIDE, 2 * _SIDE, 3), 235, np.uint8)
    img[:, _SIDE - 1 : _SIDE + 1] = 120
    for panel in (0, 1):
        _dot(img, panel, obs[36:39], 4, (40, 170, 60))
        if np.any(obs[11:14]):
            _dot(img, panel, obs[11:14], 3, (240, 150, 30))
        _dot(img, panel, obs[4:7], 3, (210, 40, 40))
        for point in trail[-90::3]:
            u, v = _pixel(panel, point)
            if 0 <= u < _SIDE and 0 <= v < _SIDE:
                img[int(v), panel * _SIDE + int(u)] = (120, 140, 230)
        _dot(img, panel, obs[0:3], 2 + 2 * float(np.clip(obs[3], 0.0, 1.0)), (30, 60, 200))
    return img


class Sketched(gym.Wrapper):  # type: ignore[type-arg]
    """Adds :func:`sketch` to the observation as camera ``sketch``."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        picture = gym.spaces.Box(0, 255, (_SIDE, 2 * _SIDE, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(
            {**env.observation_space.spaces, "sketch": picture}
        )
        self._trail: list[np.ndarray] = []

    def _add(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        state = join(obs["agent_pos"], obs["environment_state"])
        self._trail.append(state[:3].copy())
        return {**obs, "sketch": sketch(state, self._trail)}

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._trail = []
        obs, info = self.env.reset(**kwargs)
        return self._add(obs), info

    def step(self, action: Any) -> tuple[Any, ...]:
        obs, *rest = self.env.step(action)
        return (self._add(obs), *rest)


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
