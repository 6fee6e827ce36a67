"""ManiSkill's own motion-planning solutions (mplib) as a planner: from the simulator's full
state and the episode's seed, the joint-position actions that solve the task.

The solution runs on a private copy of the env reset with the episode's seed (the scene:
PegInsertionSide's peg and hole sizes) and set to the observed state (its ``reset`` is made
to land there), and its actions are recorded. mplib 0.1.1 (the version mani-skill 3.0.1
pins) is built against numpy 1 and crashes in ``ArticulatedModel`` under numpy 2, so where
this process has numpy >= 2 the planning runs in a worker process on another python
(``$PYTEST_HUD_MANISKILL_PLANNER``: one with numpy < 2 and mani-skill, e.g. a venv of its
own), running :mod:`.planner_worker`.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.suites.maniskill.planner_worker import solve_here

__all__ = ["PLANNER_VAR", "PlannerError", "plan"]

PLANNER_VAR = "PYTEST_HUD_MANISKILL_PLANNER"
#: Longest a plan may take (a PegInsertion plan is ~20-60 s on a loaded CPU).
TIMEOUT = 900.0


class PlannerError(HudError, RuntimeError):
    """The planner could not run (no python for it, a crashed or silent worker)."""


def _mplib_fits() -> bool:
    return int(np.__version__.split(".")[0]) < 2


# -- the worker on another python ---------------------------------------------------------------
class _Worker:
    def __init__(self, python: str) -> None:
        self.python = python
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).with_name("planner_worker.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "DISPLAY": ""},
        )

    def ask(self, task: str, env_state: np.ndarray, seed: int) -> tuple[np.ndarray, bool]:
        """One plan; concurrent episodes (rows on several substrates, one agent) take
        turns: the worker answers one request at a time, in order."""
        with self.lock:
            return self._ask(task, env_state, seed)

    def _ask(self, task: str, env_state: np.ndarray, seed: int) -> tuple[np.ndarray, bool]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        state = np.asarray(env_state, float).tolist()
        request = {"task": task, "state": state, "seed": int(seed)}
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
_STARTING = threading.Lock()


def plan(task: str, env_state: np.ndarray, seed: int) -> tuple[np.ndarray, bool]:
    """ManiSkill's solution for ``task`` from ``env_state`` in the scene of episode ``seed``:
    (actions [T, 8], planned ok)."""
    if _mplib_fits():
        return solve_here(task, env_state, seed)
    python = os.environ.get(PLANNER_VAR)
    if not python:
        raise PlannerError(
            f"ManiSkill's motion planner (mplib 0.1.1) needs numpy < 2, this process has "
            f"numpy {np.__version__}; fix: set ${PLANNER_VAR} to a python with numpy < 2 and "
            "mani-skill==3.0.1, e.g. python -m venv planner && planner/bin/pip install "
            "'numpy<2' mani-skill==3.0.1, then the venv's bin/python"
        )
    with _STARTING:
        if not _WORKER or _WORKER[0].proc.poll() is not None or _WORKER[0].python != python:
            _WORKER[:] = [_Worker(python)]
        worker = _WORKER[0]
    return worker.ask(task, env_state, seed)
