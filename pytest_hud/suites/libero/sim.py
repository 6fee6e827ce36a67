"""The LIBERO sim: one task as a gymnasium env, laid out as lerobot's LIBERO env and openpi feed
pi0/pi0.5. libero is imported inside :func:`make_env` only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from pytest_hud.suites.libero.tasks import MAX_STEPS, prompt_of, suite_of
from pytest_hud.suites.sims import CheckedSteps, Observation

__all__ = ["ACTION_SIZE", "CAMERAS", "CONTROL_RATE", "STATE_SIZE", "LiberoEnv", "make_env"]

STATE_SIZE = 8
ACTION_SIZE = 7
#: robosuite's control_freq in LIBERO.
CONTROL_RATE = 20.0
#: LIBERO camera -> our observation key (lerobot's ``observation.images.image``/``image2``).
CAMERAS = {
    "agentview_image": "observation/images/image",
    "robot0_eye_in_hand_image": "observation/images/image2",
}
#: No-op steps after setting the initial state (lerobot's ``num_steps_wait``).
SETTLE_STEPS = 10
_NOOP = np.array([0.0] * 6 + [-1.0])


def quat_to_axis_angle(quat: np.ndarray) -> np.ndarray:
    """robosuite's xyzw quaternion as an axis-angle vector (robosuite's ``quat2axisangle``)."""
    x, y, z, w = (float(v) for v in quat)
    w = min(max(w, -1.0), 1.0)
    den = np.sqrt(1.0 - w * w)
    if den < 1e-8:
        return np.zeros(3, np.float32)
    return (np.array([x, y, z]) * 2.0 * np.arccos(w) / den).astype(np.float32)


class LiberoEnv(CheckedSteps):
    """One LIBERO task (of LIBERO-PRO's ``perturbation`` of its suite, if given);
    ``reset(options={"init_state": k})`` starts from fixed state k."""

    metadata = {"render_modes": [], "render_fps": CONTROL_RATE}

    def __init__(self, task: str, size: int = 224, perturbation: str = "") -> None:
        base = suite_of(task)
        self.suite = f"{base}_{perturbation}" if perturbation else base
        self.task = task
        self.prompt = prompt_of(task, perturbation)
        self.max_steps = MAX_STEPS[base]
        os.environ.setdefault("MUJOCO_GL", "egl")  # read when robosuite is imported
        _jit_only_if_cached()
        from libero.libero import benchmark, get_libero_path
        from libero.libero.envs import OffScreenRenderEnv

        bench = benchmark.get_benchmark_dict()[self.suite]()
        index = bench.get_task_names().index(task)
        spec = bench.get_task(index)
        bddl = os.path.join(get_libero_path("bddl_files"), spec.problem_folder, spec.bddl_file)
        self.init_states = np.asarray(bench.get_task_init_states(index))
        self.sim = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=size, camera_widths=size)
        spaces: dict[str, gym.Space[object]] = {
            key: gym.spaces.Box(0, 255, (size, size, 3), np.uint8) for key in CAMERAS.values()
        }
        spaces["observation/state"] = gym.spaces.Box(-np.inf, np.inf, (STATE_SIZE,), np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_SIZE,), np.float32)
        self.steps = 0

    def _obs(self, raw: Mapping[str, np.ndarray]) -> Observation:
        obs = {key: np.ascontiguousarray(raw[cam][::-1, ::-1]) for cam, key in CAMERAS.items()}
        obs["observation/state"] = np.concatenate(
            [
                np.asarray(raw["robot0_eef_pos"], np.float32),
                quat_to_axis_angle(raw["robot0_eef_quat"]),
                np.asarray(raw["robot0_gripper_qpos"], np.float32),
            ]
        )
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, object]]:
        k = int((options or {}).get("init_state", 0))
        if not 0 <= k < len(self.init_states):
            raise ValueError(
                f"init_state {k}: expected 0..{len(self.init_states) - 1} "
                f"(one of {self.task}'s fixed initial states)"
            )
        if seed is not None:
            self.sim.seed(int(seed))
        self.sim.reset()
        raw = self.sim.set_init_state(self.init_states[k])
        for _ in range(SETTLE_STEPS):
            raw, _, _, _ = self.sim.step(_NOOP)
        self.steps = 0
        return self._obs(raw), {"init_state": k, "success": False}

    def _action(self, action: np.ndarray) -> np.ndarray:
        return np.asarray(action, np.float64).reshape(ACTION_SIZE)

    def _check(self) -> bool:
        return bool(self.sim.check_success())


def _jit_only_if_cached() -> None:
    """Run robosuite's numba functions as plain Python unless numba's cache of them exists.

    Why: robosuite compiles five controller functions (``cache=True``) on first use,
    which takes far longer than an episode's worth of plain-Python calls, and a fresh
    container (one per row under the docker runtime) never has that cache. A venv
    whose cache exists (``robosuite/utils/__pycache__/*.nbi``) keeps the JIT; set
    ``NUMBA_DISABLE_JIT=0`` (in a container: a row's ``runtime_config.env``) to compile
    anyway (and write the cache where it can).
    """
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("robosuite")
    where = list(spec.submodule_search_locations or []) if spec else []
    if not any((Path(p) / "utils" / "__pycache__").glob("*.nbi") for p in where):
        os.environ.setdefault("NUMBA_DISABLE_JIT", "1")


def make_env(task: str, size: int = 224, perturbation: str = "") -> LiberoEnv:
    """The factory ``env.gym`` serves (its parameters are the build args)."""
    return LiberoEnv(task, size, perturbation)
