"""ManiSkill's own motion-planning solutions (mplib) as a planner: from the simulator's full
state, the joint-position actions that solve the task.

The solution runs on a private copy of the env set to the observed state (its ``reset`` is
made to land there), and its actions are recorded. mplib 0.1.1 (the version mani-skill 3.0.1
pins) is built against numpy 1 and crashes in ``ArticulatedModel`` under numpy 2, so where
this process has numpy >= 2 the planning runs in a worker process on another python
(``$PYTEST_HUD_MANISKILL_PLANNER``: one with numpy < 2 and mani-skill, e.g. the venv
``scripts/setup --all`` makes at .ci/venvs/maniskill). This file is also that worker
(``python planner.py``: JSON lines in, JSON lines out) and imports nothing of pytest-hud.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

import numpy as np

__all__ = ["PLANNER_VAR", "PlannerError", "plan"]

PLANNER_VAR = "PYTEST_HUD_MANISKILL_PLANNER"
#: Longest a plan may take (a PegInsertion plan is ~20-60 s on a loaded CPU).
TIMEOUT = 900.0


class PlannerError(RuntimeError):
    """The planner could not run (no python for it, a crashed or silent worker)."""


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


def solve_here(task: str, env_state: Any) -> tuple[np.ndarray, bool]:
    """(actions [T, 8], whether the plan succeeded on the private copy)."""
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
        """The private env whose reset lands on the observed state; steps recorded."""

        def reset(self, **kwargs: Any) -> Any:
            _, info = self.env.reset(**kwargs)
            inner: Any = self.env.unwrapped  # ManiSkill's BaseEnv
            inner.set_state(state)
            return inner.get_obs(), info

        def step(self, action: Any) -> Any:
            actions.append(np.asarray(action, np.float32).reshape(-1).copy())
            return self.env.step(action)

    result = _solution(task)(AtState(env), seed=0, debug=False, vis=False)
    ok = not isinstance(result, int) and bool(result[-1]["success"].item())
    return np.stack(actions) if actions else np.zeros((0, 8), np.float32), ok


def _mplib_fits() -> bool:
    return int(np.__version__.split(".")[0]) < 2


# -- the worker on another python ---------------------------------------------------------------
class _Worker:
    def __init__(self, python: str) -> None:
        self.python = python
        self.proc = subprocess.Popen(
            [python, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "DISPLAY": ""},
        )

    def ask(self, task: str, env_state: np.ndarray) -> tuple[np.ndarray, bool]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"task": task, "state": np.asarray(env_state, float).tolist()}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise PlannerError(f"the planner worker ({self.python}) exited") from None
        deadline = time.monotonic() + TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise PlannerError(f"the planner worker gave no plan within {TIMEOUT:.0f} s")
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 5.0))
            if ready:
                break
            if self.proc.poll() is not None:
                raise PlannerError(
                    f"the planner worker ({self.python}) exited with {self.proc.returncode}"
                )
        line = self.proc.stdout.readline()
        if not line:
            raise PlannerError(f"the planner worker ({self.python}) closed its output")
        reply = json.loads(line)
        if "error" in reply:
            raise PlannerError(f"ManiSkill's {task} solution failed: {reply['error']}")
        return np.asarray(reply["actions"], np.float32).reshape(-1, 8), bool(reply["success"])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


_WORKER: list[_Worker] = []


def plan(task: str, env_state: np.ndarray) -> tuple[np.ndarray, bool]:
    """ManiSkill's solution for ``task`` from ``env_state``: (actions [T, 8], planned ok)."""
    if _mplib_fits():
        return solve_here(task, env_state)
    python = os.environ.get(PLANNER_VAR)
    if not python:
        raise PlannerError(
            f"ManiSkill's motion planner (mplib 0.1.1) needs numpy < 2, this process has "
            f"numpy {np.__version__}; fix: set ${PLANNER_VAR} to a python with numpy < 2 and "
            "mani-skill==3.0.1 (scripts/setup --all makes .ci/venvs/maniskill)"
        )
    if not _WORKER or _WORKER[0].proc.poll() is not None or _WORKER[0].python != python:
        _WORKER[:] = [_Worker(python)]
    return _WORKER[0].ask(task, env_state)


def _serve() -> None:
    """The worker: one JSON request a line on stdin, one reply a line on stdout."""
    out = sys.stdout
    sys.stdout = sys.stderr  # the solutions print; replies alone go to the real stdout
    for line in sys.stdin:
        try:
            request = json.loads(line)
            actions, ok = solve_here(request["task"], request["state"])
            reply: dict[str, Any] = {"actions": actions.tolist(), "success": ok}
        except Exception as exc:  # the caller raises it with the task's name
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve()
