"""Small sims written for the tests: custom RobotBridges and gym factories.

They live in a module (not in a test function) because sims run in their own
process and are imported there by reference.
"""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np

from pytest_hud.robot import RobotBridge

COUNTER_CONTRACT = {
    "control_rate": 50,
    "robot_type": "counter",
    "features": {
        "observation/state": {"role": "observation", "names": ["count", "slot"], "shape": [2]},
        "observation/image": {"role": "observation", "type": "rgb", "shape": [4, 4, 3]},
        "action": {"role": "action", "names": ["inc", "aux"], "shape": [2]},
    },
}


class CounterSim(RobotBridge):
    """Each slot counts the sum of its actions' first element; an episode lasts ``length`` ticks.

    Records every batch it was stepped with, so tests can see hold actions. Success: the
    count reached ``target``. ``fail_at`` makes step raise at that tick; ``crash_at`` kills
    the process there (a crashed sim).
    """

    contract = COUNTER_CONTRACT

    def __init__(
        self,
        num_envs: int = 1,
        length: int = 5,
        target: float = 3.0,
        fail_at: int | None = None,
        crash_at: int | None = None,
        fail_reset: bool = False,
        per_slot_reset: bool = False,
    ) -> None:
        self.num_envs = num_envs
        self.length = length
        self.target = target
        self.fail_at = fail_at
        self.crash_at = crash_at
        self.fail_reset = fail_reset
        self.per_slot_reset = per_slot_reset
        self.count = np.zeros(num_envs, np.float64)
        self.ticks = np.zeros(num_envs, np.int64)
        self.seed = np.zeros(num_envs, np.int64)
        self.batches: list[np.ndarray] = []

    def reset(self, seed: int = 0, **_: Any) -> str:
        if self.fail_reset:
            raise ValueError("reset exploded on purpose")
        self.count[:] = 0
        self.ticks[:] = 0
        self.seed[:] = seed
        return f"count to {self.target} (seed {seed})"

    def can_reset_slot(self) -> bool:
        return self.per_slot_reset

    def reset_slot(self, index: int, seed: int = 0, **_: Any) -> str:
        self.count[index] = 0
        self.ticks[index] = 0
        self.seed[index] = seed
        return f"count to {self.target} (seed {seed}, slot {index})"

    def step(self, actions: np.ndarray) -> None:
        tick = int(self.ticks.max())
        if self.crash_at is not None and tick >= self.crash_at:
            os._exit(17)
        if self.fail_at is not None and tick >= self.fail_at:
            raise RuntimeError("the sim blew up on purpose")
        self.batches.append(actions.copy())
        live = self.ticks < self.length
        self.count += np.where(live, actions[:, 0], 0.0)
        self.ticks += live

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        n = self.num_envs
        state = np.stack([self.count, np.arange(n)], axis=1).astype(np.float32)
        image = np.zeros((n, 4, 4, 3), np.uint8)
        image[:, 0, 0, 0] = np.minimum(self.ticks, 255)
        return {"observation/state": state, "observation/image": image}, self.ticks >= self.length

    def result_slots(self) -> list[dict[str, Any]]:
        return [
            {
                "score": float(self.count[i] >= self.target),
                "success": bool(self.count[i] >= self.target),
                "total_reward": float(self.count[i]),
                "ticks": int(self.ticks[i]),
                "seed": int(self.seed[i]),
            }
            for i in range(self.num_envs)
        ]


class SlotResetCounterSim(CounterSim):
    """A CounterSim whose slots can be reset one at a time (different args per slot)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(per_slot_reset=True, **kwargs)


def make_pendulum(g: float = 10.0) -> gym.Env:
    """A factory with one build arg (``g``); everything else is episodic."""
    return gym.make("Pendulum-v1", g=g)


class SucceedAt(gym.Env):
    """Reports info['is_success'] only at step ``at``; ends at step ``at + 2``."""

    metadata = {"render_fps": 7}

    def __init__(self, at: int = 3) -> None:
        self.at = at
        self.t = 0
        self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.options = options
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        info = {"is_success": self.t == self.at}
        return np.full(2, self.t, np.float32), 1.0, self.t >= self.at + 2, False, info


def make_succeed_at(at: int = 3) -> gym.Env:
    return SucceedAt(at)


class CountingSim(CounterSim):
    """Counts its constructions and resets in process-global state (class attributes), and
    reports them with the grade: a sim process reused across rollouts, or state copied
    from a zygote that had counted, would show a count above 1."""

    builds = 0
    resets = 0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        type(self).builds += 1

    def reset(self, seed: int = 0, **kwargs: Any) -> str:
        type(self).resets += 1
        return super().reset(seed=seed, **kwargs)

    def result_slots(self) -> list[dict[str, Any]]:
        with open("/proc/self/comm") as f:
            comm = f.read().strip()
        extra = {"builds": self.builds, "resets": self.resets, "pid": os.getpid(), "comm": comm}
        return [{**row, **extra} for row in super().result_slots()]


class BootFails(CounterSim):
    """A sim whose construction prints a reason and exits with code 3."""

    def __init__(self, **kwargs: Any) -> None:
        print("missing GPU driver", flush=True)
        raise SystemExit(3)


class BootHangs(CounterSim):
    """A sim whose construction never returns (it never announces itself)."""

    def __init__(self, **kwargs: Any) -> None:
        import time

        time.sleep(600)


class LearningSim(CounterSim):
    """Imports a library module (``colorsys``) nothing else imports, and reports whether it
    was already loaded when the sim was built (a zygote that learned it preloads it)."""

    def __init__(self, **kwargs: Any) -> None:
        import sys

        self.preloaded = "colorsys" in sys.modules
        import colorsys  # noqa: F401

        super().__init__(**kwargs)

    def result_slots(self) -> list[dict[str, Any]]:
        return [{**row, "preloaded": self.preloaded} for row in super().result_slots()]
