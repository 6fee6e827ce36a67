"""A real robot as an env: any robot LeRobot knows (its own, or a third-party
``lerobot_robot_*`` plugin it discovers) built through LeRobot's factory and config classes,
served by a one-slot :class:`RobotBridge`. The contract comes from the robot's
``observation_features`` / ``action_features``, so every agent drives it over the same wire
as a sim. Actions are clamped to declared limits and a per-step move; a fault is the
rollout's error naming the robot; the robot is disconnected whatever happens.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import math
import os
import pkgutil
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from pytest_hud.errors import BridgeError, HudError
from pytest_hud.plumbing.loader import load_object
from pytest_hud.plumbing.printable import printable
from pytest_hud.plumbing.private_dir import open_private, private_dir
from pytest_hud.robot.sim.bridge import RobotBridge
from pytest_hud.robot.sim.endpoint import RobotEndpoint

__all__ = [
    "BRIDGE_OPTIONS",
    "ROBOT_ENV",
    "LeRobotRobotBridge",
    "RobotFault",
    "RobotSpecError",
    "Safety",
    "make_robot",
    "parse_robot_spec",
    "serve_robot",
]

#: ``--hud-robot``'s spec, as env servers and robot processes inherit it: overrides the type
#: and fields an env module's ``env.lerobot_robot(...)`` names.
ROBOT_ENV = "PYTEST_HUD_ROBOT"

#: A robot's observation or action value: a float per motor, an image per camera.
Value = float | np.ndarray
#: Decides from one observation whether the task succeeded (True/False) or cannot tell (None).
Detector = Callable[[Mapping[str, Value]], bool | None]


class Robot(Protocol):
    """What this module uses of LeRobot's ``Robot`` (lerobot.robots.robot)."""

    @property
    def observation_features(self) -> Mapping[str, object]: ...
    @property
    def action_features(self) -> Mapping[str, object]: ...
    @property
    def is_connected(self) -> bool: ...
    @property
    def is_calibrated(self) -> bool: ...
    def connect(self, calibrate: bool = True) -> None: ...
    def get_observation(self) -> Mapping[str, Value]: ...
    def send_action(self, action: Mapping[str, float]) -> Mapping[str, float]: ...
    def disconnect(self) -> None: ...


class RobotSpecError(HudError, ValueError):
    """A robot type LeRobot does not know, or a config field its config class lacks."""


class RobotFault(BridgeError):
    """The robot failed mid-episode (a disconnect, a motor error): the rollout's ERROR."""


def _import_robot_configs() -> None:
    """Register LeRobot's own robot configs (its scripts import them one by one) and the
    third-party ``lerobot_robot_*`` plugins installed here."""
    import lerobot.robots as robots

    with contextlib.suppress(ImportError):
        from lerobot.utils.import_utils import register_third_party_plugins

        register_third_party_plugins()
    for info in pkgutil.walk_packages(robots.__path__, f"{robots.__name__}."):
        if info.name.rsplit(".", 1)[-1].startswith("config"):
            with contextlib.suppress(Exception):  # a robot whose SDK is absent: not ours to use
                importlib.import_module(info.name)


def robot_config(kind: str, fields: Mapping[str, object]) -> object:
    """LeRobot's config object for robot ``kind`` with ``fields``."""
    from lerobot.robots import RobotConfig

    known = RobotConfig.get_known_choices()
    if kind not in known:
        _import_robot_configs()
        known = RobotConfig.get_known_choices()
    if kind not in known:
        raise RobotSpecError(
            f"LeRobot knows no robot {kind!r}; known here: {', '.join(sorted(known))}. "
            "Fix: name one of them, or install its plugin (a package named lerobot_robot_*)"
        )
    cls = RobotConfig.get_choice_class(kind)
    try:
        return cls(**fields)
    except TypeError as exc:
        names = sorted(getattr(cls, "__dataclass_fields__", {}))
        raise RobotSpecError(
            f"robot {kind!r}: {exc}; its config ({cls.__name__}) has the fields {', '.join(names)}"
        ) from None


def make_robot(kind: str, **fields: object) -> Robot:
    """A LeRobot robot of type ``kind`` built by LeRobot's ``make_robot_from_config``."""
    from lerobot.robots.utils import make_robot_from_config

    robot: Robot = make_robot_from_config(robot_config(kind, fields))
    return robot


def parse_robot_spec(text: str) -> tuple[str, dict[str, object]]:
    """``TYPE[:key=value,...]`` (``--hud-robot``): the type and its config fields; values
    read as JSON scalars where they parse (numbers, true/false), else strings."""
    kind, _, rest = text.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", kind):
        raise RobotSpecError(
            f"--hud-robot takes TYPE[:key=value,...] (e.g. so101_follower:port=/dev/ttyACM0,"
            f"id=arm), got {text!r}"
        )
    fields: dict[str, object] = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise RobotSpecError(f"--hud-robot: {part!r} is not key=value (in {text!r})")
        fields[key.strip()] = _scalar(value.strip())
    return kind, fields


def _scalar(text: str) -> object:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


class Safety:
    """Clamps each action to ``limits`` (per name: low, high) and its move per step to
    ``max_step`` (per name, or one number for all) from the last command (the present
    position before the first); counts what it changed."""

    def __init__(
        self,
        names: Sequence[str],
        limits: Mapping[str, tuple[float, float]] | None = None,
        max_step: float | Mapping[str, float] | None = None,
    ) -> None:
        unknown = sorted(set(limits or {}) - set(names))
        if isinstance(max_step, Mapping):
            unknown += sorted(set(max_step) - set(names))
        if unknown:
            raise RobotSpecError(
                f"safety limits name {', '.join(unknown)}, which the robot's actions do not "
                f"have; its actions: {', '.join(names)}"
            )
        inf = np.inf
        self.low = np.array([(limits or {}).get(n, (-inf, inf))[0] for n in names], np.float64)
        self.high = np.array([(limits or {}).get(n, (-inf, inf))[1] for n in names], np.float64)
        if np.any(self.low > self.high):
            raise RobotSpecError("a safety limit's low is above its high")
        if isinstance(max_step, Mapping):
            self.step = np.array([max_step.get(n, inf) for n in names], np.float64)
        else:
            self.step = np.full(len(names), inf if max_step is None else float(max_step))
        if np.any(self.step <= 0):
            raise RobotSpecError("a max move per step must be positive")
        self.reset()

    def reset(self) -> None:
        """A new episode: no last command, nothing counted."""
        self.last: np.ndarray | None = None
        self.clamped = 0  # actions changed by the limits
        self.limited = 0  # actions changed by the max move per step

    def apply(self, action: np.ndarray, present: np.ndarray | None) -> np.ndarray:
        out = np.asarray(action, np.float64)
        if not np.all(np.isfinite(out)):
            raise BridgeError(
                "the policy sent a non-finite action (NaN or inf); it was not sent to the robot"
            )
        bounded = np.clip(out, self.low, self.high)
        self.clamped += int(not np.array_equal(bounded, out))
        base = self.last if self.last is not None else present
        if base is not None:
            moved = np.clip(bounded, base - self.step, base + self.step)
            self.limited += int(not np.array_equal(moved, bounded))
            bounded = moved
        self.last = bounded
        return bounded


#: An episode's default length in the robot's seconds (control ticks over ``fps``): LeRobot's
#: ``lerobot-record`` records 60 s an episode by default (``--dataset.episode_time_s``)
EPISODE_SECONDS = 60.0


class LeRobotRobotBridge(RobotBridge):
    """One robot, one slot. ``detector`` (optional) grades an episode from the robot's
    observations and ends it on success; without one the grade is left to the operator.
    An episode also ends when the agent stops (max steps, the operator) or after
    ``episode_seconds`` of the robot's time (``fps`` ticks a second; None: no limit), so
    one that nothing else ends does not run until the session's ``--hud-timeout``."""

    num_envs = 1

    def __init__(
        self,
        robot_type: str,
        config: Mapping[str, object] | None = None,
        *,
        fps: float = 30.0,
        prompt: str | None = None,
        limits: Mapping[str, tuple[float, float]] | None = None,
        max_step: float | Mapping[str, float] | None = None,
        detector: Detector | str | None = None,
        calibrate: bool = False,
        episode_seconds: float | None = EPISODE_SECONDS,
    ) -> None:
        if not fps > 0:
            raise RobotSpecError(f"fps must be positive, got {fps!r}")
        if episode_seconds is not None and not episode_seconds > 0:
            raise RobotSpecError(
                f"episode_seconds must be positive, got {episode_seconds!r}; fix: a length in "
                "seconds, or None for episodes that end only by the detector, --hud-max-steps "
                "or the operator"
            )
        #: the episode's last tick (None: no limit)
        self.max_ticks = None if episode_seconds is None else math.ceil(episode_seconds * fps)
        self.robot_type = robot_type
        self.fields = dict(config or {})
        self.fps = fps
        self.prompt = prompt
        # MODULE:NAME is imported here, in the robot's process
        self.detector: Detector | None = (
            load_object(detector) if isinstance(detector, str) else detector
        )
        self.calibrate = calibrate
        self.robot = make_robot(robot_type, **self.fields)
        self.label = f"{robot_type} {self.fields['id']!r}" if self.fields.get("id") else robot_type
        obs = dict(self.robot.observation_features)
        self.state_keys = [k for k, v in obs.items() if v is float]
        self.cameras = [k for k, v in obs.items() if isinstance(v, tuple) and len(v) == 3]
        self.action_keys = [k for k, v in dict(self.robot.action_features).items() if v is float]
        if not self.action_keys:
            raise RobotSpecError(f"robot {self.label} declares no float action features")
        self.safety = Safety(self.action_keys, limits, max_step)
        self.contract = self._contract()
        self._latest: Mapping[str, Value] | None = None
        self._success: bool | None = None
        self._steps = 0
        self._halted = False
        self._claim: _RobotLock | None = None

    def _contract(self) -> dict[str, object]:
        features: dict[str, object] = {}
        for cam in self.cameras:
            shape = dict(self.robot.observation_features)[cam]
            assert isinstance(shape, tuple)
            features[f"observation/images/{cam}"] = {
                "role": "observation",
                "type": "rgb",
                "shape": list(shape),
                "names": ["height", "width", "channel"],
            }
        if self.state_keys:
            features["observation/state"] = {
                "role": "observation",
                "shape": [len(self.state_keys)],
                "names": self.state_keys,
            }
        low, high = self.safety.low, self.safety.high
        action: dict[str, object] = {
            "role": "action",
            "shape": [len(self.action_keys)],
            "names": self.action_keys,
        }
        if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
            action["stats"] = {"min": low.tolist(), "max": high.tolist()}
        features["action"] = action
        return {"control_rate": self.fps, "robot_type": self.robot_type, "features": features}

    def _timed_out(self) -> bool:
        """The episode reached its time limit without the detector's success."""
        return self.max_ticks is not None and self._steps >= self.max_ticks and not self._success

    # -- the robot's calls, each a fault naming the robot when it raises ----------------
    def _call(self, what: str, fn: Callable[[], object]) -> object:
        try:
            return fn()
        except BridgeError:
            raise
        except Exception as exc:
            raise RobotFault(
                f"robot {self.label} faulted during {what}: {type(exc).__name__}: {exc}. The "
                "episode is an error, not a failure; the robot is disconnected at the end of "
                "the session. Fix: check its power, cable and port, then rerun"
            ) from exc

    def _connect(self) -> None:
        """Claim the robot for this process and connect it (once)."""
        if self._claim is None:
            self._claim = _RobotLock.take(self.robot_type, self.fields)
        if not self.robot.is_connected:
            self._call("connect", lambda: self.robot.connect(calibrate=self.calibrate))
            if not self.robot.is_calibrated:
                raise RobotFault(
                    f"robot {self.label} is not calibrated; fix: run lerobot-calibrate "
                    f"--robot.type={self.robot_type} with the same id first"
                )

    def camera_frames(self) -> dict[str, np.ndarray]:
        """The robot's cameras now, between episodes (the reset gate shows them live); a
        robot not yet connected is connected here, as its first episode would. Nothing else
        is touched: the detector and the episode's last observation stay as they were."""
        if not self.cameras:
            return {}
        self._connect()
        obs = self._call("get_observation", self.robot.get_observation)
        assert isinstance(obs, Mapping)
        return {cam: np.asarray(obs[cam], np.uint8) for cam in self.cameras}

    def reset(self, **task_args: object) -> str:
        self._connect()
        scene = getattr(self.robot, "reset_scene", None)
        if callable(scene):  # a sim-backed robot puts its scene back itself
            self._call("reset_scene", lambda: scene(**task_args))
        self.safety.reset()
        self._steps, self._success, self._halted = 0, None, False
        self._latest = self._read()
        task = task_args.get("task") or task_args.get("instruction")
        return str(task or self.prompt or f"{self.robot_type} episode")

    def _read(self) -> Mapping[str, Value]:
        obs = self._call("get_observation", self.robot.get_observation)
        assert isinstance(obs, Mapping)
        if self.detector is not None and self._success is not True:
            verdict = self.detector(obs)
            if verdict is not None:
                self._success = bool(verdict)
        return obs

    def _present(self) -> np.ndarray | None:
        """The robot's present position per action name, where its observation has it."""
        latest = self._latest or {}
        if all(k in latest for k in self.action_keys):
            return np.array([float(latest[k]) for k in self.action_keys])  # type: ignore[arg-type]
        return None

    def step(self, actions: np.ndarray) -> None:
        action = self.safety.apply(np.asarray(actions)[0], self._present())
        command = {k: float(v) for k, v in zip(self.action_keys, action, strict=True)}
        self._call("send_action", lambda: self.robot.send_action(command))
        self._steps += 1
        self._latest = self._read()

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        obs = self._latest if self._latest is not None else self._read()
        data: dict[str, np.ndarray] = {}
        for cam in self.cameras:
            data[f"observation/images/{cam}"] = np.asarray(obs[cam], np.uint8)[None]
        if self.state_keys:
            state = [float(obs[k]) for k in self.state_keys]  # type: ignore[arg-type]
            data["observation/state"] = np.asarray(state, np.float32)[None]
        return data, np.array([self._success is True or self._timed_out()])

    def halt(self, index: int) -> None:
        """The agent left the episode before it ended (operator stop, max steps, an error):
        bring the robot to rest with its own API (``stop()`` where it has one), else by
        commanding its present position."""
        if self._halted or not self.robot.is_connected:
            return
        self._halted = True
        stop = getattr(self.robot, "stop", None)
        if callable(stop):
            self._call("stop", stop)
            return
        with contextlib.suppress(RobotFault):
            self._latest = self._read()
        present = self._present()
        if present is not None:
            command = {k: float(v) for k, v in zip(self.action_keys, present, strict=True)}
            self._call("holding still", lambda: self.robot.send_action(command))

    def result_slots(self) -> list[dict[str, object]]:
        graded = self._success is not None
        return [
            {
                "success": self._success if graded else None,
                "score": (1.0 if self._success else 0.0) if graded else None,
                "steps": self._steps,
                "grade_source": "detector" if graded else None,
                "truncated": self._timed_out(),
                "robot": self.label,
                "safety": {"clamped": self.safety.clamped, "limited": self.safety.limited},
            }
        ]

    def close(self) -> None:
        try:
            if self.robot.is_connected:
                self.halt(0)
        finally:
            with contextlib.suppress(Exception):
                if self.robot.is_connected:
                    self.robot.disconnect()
            if self._claim is not None:
                self._claim.release()
                self._claim = None


#: The folder of the robots' lock files, when set (else this user's own pytest-hud folder).
LOCKS_ENV = "PYTEST_HUD_ROBOT_LOCKS"


class _RobotLock:
    """A lock per robot (type and id/port) for this user's processes, in a folder of this
    user's own (``$PYTEST_HUD_ROBOT_LOCKS``, default ``pytest-hud/robot-locks`` in
    ``$XDG_RUNTIME_DIR`` or the temp folder, mode 0700): a second process that tries to
    drive the same robot (an xdist worker, another session) gets one clear error. The file
    is never followed through a link, and what it says is shown only as a pid."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    @classmethod
    def take(cls, kind: str, fields: Mapping[str, object]) -> _RobotLock:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{kind}-{fields.get('id') or fields.get('port')}")
        path = private_dir("robot-locks", LOCKS_ENV) / f"robot-{name}.lock"
        fd = open_private(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            said = os.read(fd, 64).decode(errors="replace").strip()
            os.close(fd)
            holder = f"pid {said}" if said.isascii() and said.isdigit() else "another process"
            robot = printable(f"{kind}{' ' + str(fields['id']) if fields.get('id') else ''}")
            raise BridgeError(
                f"robot {robot} is already driven by {holder}: one robot is one slot. Fix: "
                "run its rows in one process, without -n and with --hud-concurrency=1"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return cls(path, fd)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


#: ``serve_robot``'s options that are the bridge's own; every other one is a config field
BRIDGE_OPTIONS = ("fps", "prompt", "limits", "max_step", "detector", "calibrate", "episode_seconds")


def serve_robot(
    robot_type: str, *, start_timeout: float = 120.0, **options: object
) -> RobotEndpoint:
    """The endpoint serving LeRobot robot ``robot_type`` in a process of its own:
    ``options`` are :class:`LeRobotRobotBridge`'s (``fps``, ``prompt``, ``limits``,
    ``max_step``, ``detector``, ``calibrate``, ``episode_seconds``) and its RobotConfig's
    fields (``port=``, ``id=``, ``cameras=``...); ``$PYTEST_HUD_ROBOT`` (``--hud-robot``)
    overrides the type and fields."""
    bridge = {k: options.pop(k) for k in BRIDGE_OPTIONS if k in options}
    config = options
    override = os.environ.get(ROBOT_ENV)
    if override:
        robot_type, fields = parse_robot_spec(override)
        config = {**config, **fields}
    return RobotEndpoint(
        LeRobotRobotBridge,
        kwargs={"robot_type": robot_type, "config": config, **bridge},
        start_timeout=start_timeout,
    )
