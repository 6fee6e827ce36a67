"""Adapter: env observations to model inputs and actions back, wired from the contract alone;
bound per episode, so concurrent rollouts never share bound state.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import numpy as np

from pytest_hud.errors import AdapterError
from pytest_hud.robot.agent.model import Row
from pytest_hud.robot.contract import Spaces

#: LeRobot's key for the environment's state (object poses, goals).
ENV_STATE_KEY = "observation.environment_state"

__all__ = ["Adapter", "AdapterError", "LeRobotAdapter", "OpenPIAdapter"]


class Adapter:
    """Pass-through: observation keys as the env names them, plus ``prompt``."""

    spaces: Spaces | None = None

    def bind(self, spaces: Spaces) -> Adapter:
        """A copy of this adapter wired to ``spaces``."""
        bound = copy.copy(self)
        bound.spaces = spaces
        bound._wire(spaces)
        return bound

    def _wire(self, spaces: Spaces) -> None:
        """Subclasses check and record the mapping here."""

    def observation(self, data: Mapping[str, object], prompt: str) -> Row:
        """One row of model input from one observation."""
        return {**data, "prompt": prompt}

    def action(self, chunk: np.ndarray) -> np.ndarray:
        """A ``[T, A_model]`` chunk in the env's action space ``[T, A_env]``."""
        return chunk


class OpenPIAdapter(Adapter):
    """openpi's convention: flat slash keys as the env sends them, plus ``prompt``.

    ``rename`` maps env keys onto the policy's keys (e.g. ``{"pixels":
    "observation/image"}``); images stay HWC uint8, state goes as float32.
    """

    def __init__(self, rename: dict[str, str] | None = None) -> None:
        self.rename = dict(rename or {})

    def _wire(self, spaces: Spaces) -> None:
        missing = [k for k in self.rename if k not in spaces.observation]
        if missing:
            raise AdapterError(
                f"OpenPIAdapter renames {missing}, but the env observes only "
                f"{list(spaces.observation)}"
            )

    def observation(self, data: Mapping[str, object], prompt: str) -> Row:
        row: dict[str, object] = {}
        for key, value in data.items():
            arr = np.asarray(value)
            row[self.rename.get(key, key)] = (
                arr if arr.dtype == np.uint8 else arr.astype(np.float32)
            )
        row["prompt"] = prompt
        return row


def _same_names(cameras: Sequence[str], keys: Sequence[str]) -> bool:
    """Whether the env's cameras are the policy's image keys, written with slashes."""
    return bool(keys) and sorted(c.replace("/", ".") for c in cameras) == sorted(keys)


class LeRobotAdapter(Adapter):
    """LeRobot's convention: env cameras onto the policy's image keys as CHW float in
    [0, 1] (by name when the env's names are the policy's, e.g. LIBERO's
    ``observation/images/image`` for ``observation.images.image``; else in contract
    order); the state as float32 ``observation.state``, observations named
    ``environment_state`` as ``observation.environment_state`` (what ACT and Diffusion need
    to act without a camera); the prompt as ``task``. A policy that reads no image
    (``model_image_keys=[]``: state-only ACT/Diffusion) gets none of the env's cameras, as
    LeRobot's own policies ignore features they were not configured with: an env may send
    a camera for the report's animations only (``examples/train_eval/metaworld_env.py``).
    """

    def __init__(
        self,
        model_image_keys: Sequence[str] | None = None,
        *,
        state_key: str = "observation.state",
        camera_map: dict[str, str] | None = None,
    ) -> None:
        self.model_image_keys = list(model_image_keys or [])
        self.state_key = state_key
        self.camera_map = dict(camera_map or {})
        self._images: list[tuple[str, str]] = []
        self._states: list[str] = []
        self._env_states: list[str] = []

    def _wire(self, spaces: Spaces) -> None:
        cameras = [f.name for f in spaces.cameras]
        if self.camera_map:
            unknown = [c for c in self.camera_map if c not in cameras]
            if unknown:
                raise AdapterError(
                    f"camera_map names env cameras {unknown}; the env's cameras are {cameras}"
                )
            self._images = list(self.camera_map.items())
        elif not self.model_image_keys:  # the policy reads no image
            self._images = []
        elif _same_names(cameras, self.model_image_keys):
            # the env already uses the policy's names (LIBERO's observation/images/image ->
            # observation.images.image): map by name, whatever the order
            self._images = [(c, c.replace("/", ".")) for c in cameras]
        else:
            keys = self.model_image_keys
            if len(keys) != len(cameras):
                raise AdapterError(
                    f"the policy expects {len(keys)} camera(s) {keys} but the env has "
                    f"{len(cameras)} {cameras}: pass camera_map={{env camera: policy key}} "
                    "or use an env with matching cameras"
                )
            self._images = list(zip(cameras, keys, strict=True))
        self._states = [f.name for f in spaces.robot_states]
        self._env_states = [f.name for f in spaces.env_states]

    def observation(self, data: Mapping[str, object], prompt: str) -> Row:
        row: dict[str, object] = {}
        for env_key, model_key in self._images:
            img = np.asarray(data[env_key])
            if img.ndim == 2:
                img = img[..., None]
            chw = np.ascontiguousarray(img.transpose(2, 0, 1))
            row[model_key] = chw.astype(np.float32) / 255.0 if img.dtype == np.uint8 else chw
        for key, names in ((self.state_key, self._states), (ENV_STATE_KEY, self._env_states)):
            if names:
                parts = [np.asarray(data[k], np.float32).reshape(-1) for k in names]
                row[key] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        row["task"] = prompt
        return row
