"""ManiSkill's own motion-planning solutions (mplib) run on a private copy of the env, reset
with the observed episode's seed (its scene) and set to its observed simulator state, their
actions recorded; and the worker serving them on a python with numpy < 2 (``python
planner_worker.py``: one JSON request a line in, one reply a line out). It imports nothing
of pytest-hud: that python need not have it (see :mod:`.planner`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

__all__ = ["solve_here"]

# -- the planning itself (in whichever process has a numpy-1 mplib) --------------------------
_ENVS: dict[str, Any] = {}


def _solution(task: str) -> Any:
    from mani_skill.examples.motionplanning.panda import solutions

    table = {
        "PickCube-v1": solutions.solvePickCube,
        "PushCube-v1": solutions.solvePushCube,
        "StackCube-v1": solutions.solveStackCube,
        "PegInsertionSide-v1": solutions.solvePegInsertionSide,
    }
    return table[task]


def solve_here(task: str, env_state: Any, seed: int) -> tuple[np.ndarray, bool]:
    """(actions [T, 8], whether the plan succeeded on the private copy). ``seed`` is the
    episode's: PegInsertionSide rebuilds its scene (peg and hole sizes) from it at each
    reset, and ``get_state()`` has poses only."""
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401
    import torch

    env = _ENVS.get(task)
    if env is None:
        env = _ENVS[task] = gym.make(
            task,
            obs_mode="state",
            control_mode="pd_joint_pos",
            render_mode=None,
            sim_backend="physx_cpu",
            num_envs=1,
        ).unwrapped
    state = torch.as_tensor(np.asarray(env_state, np.float32)).reshape(1, -1)
    actions: list[np.ndarray] = []

    class AtState(gym.Wrapper):  # type: ignore[type-arg]
        """The private env whose reset lands on the observed episode; steps recorded."""

        def reset(self, **kwargs: Any) -> Any:
            _, info = self.env.reset(**kwargs)
            inner: Any = self.env.unwrapped  # ManiSkill's BaseEnv
            inner.set_state(state)
            return inner.get_obs(), info

        def step(self, action: Any) -> Any:
            actions.append(np.asarray(action, np.float32).reshape(-1).copy())
            return self.env.step(action)

    result = _solution(task)(AtState(env), seed=seed, debug=False, vis=False)
    ok = not isinstance(result, int) and bool(result[-1]["success"].item())
    return np.stack(actions) if actions else np.zeros((0, 8), np.float32), ok


def _serve() -> None:
    """The worker: one JSON request a line on stdin, one reply a line on stdout."""
    out = sys.stdout
    sys.stdout = sys.stderr  # the solutions print; replies alone go to the real stdout
    for line in sys.stdin:
        try:
            request = json.loads(line)
            actions, ok = solve_here(request["task"], request["state"], request["seed"])
            reply: dict[str, Any] = {"actions": actions.tolist(), "success": ok}
        except Exception as exc:  # the caller raises it with the task's name
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve()
