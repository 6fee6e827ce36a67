"""What the suites' scripted experts share: rotations as matrices (from a quaternion, the error
between two as one axis-angle vector, a frame from its approach and finger axes), a
proportional step toward a target and the check that an env's contract names the state an
expert reads. Pure NumPy, so an expert needs no sim to run.
"""

from __future__ import annotations

import numpy as np

from pytest_hud.robot import ContractError, Spaces

__all__ = ["frame", "named_state", "quat_xyzw_matrix", "rotation_error", "rotz", "toward"]


def named_state(
    spaces: Spaces, expert: str, keys: tuple[str, str], means: str, rows: str
) -> dict[str, int]:
    """Where each named element of the state ``keys[0]`` is, for an ``expert`` that reads it
    and ``keys[1]`` (``means``: what the two are); ContractError naming the fix (run it on the
    suite's ``rows``) when the contract lacks either or leaves the state unnamed."""
    state, other = (spaces.observation.get(k) for k in keys)
    if state is None or other is None or not state.names:
        raise ContractError(
            f"{expert} reads a named {keys[0]!r} and {keys[1]!r} ({means}); got "
            f"{list(spaces.observation)}. Fix: run it on {rows} rows"
        )
    return {name: i for i, name in enumerate(state.names)}


def toward(at: np.ndarray, target: np.ndarray, gain: float) -> np.ndarray:
    """``gain * (target - at)``, each element clipped to the unit action box."""
    return np.clip(gain * (np.asarray(target) - np.asarray(at)), -1.0, 1.0)


def quat_xyzw_matrix(q: np.ndarray) -> np.ndarray:
    """The rotation matrix of a quaternion in ``(x, y, z, w)`` order (robosuite's)."""
    x, y, z, w = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def rotation_error(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """The axis-angle vector (world frame) that turns ``current`` into ``target``."""
    r = target @ current.T
    angle = float(np.arccos(np.clip((np.trace(r) - 1.0) / 2.0, -1.0, 1.0)))
    axis = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    norm = float(np.linalg.norm(axis))
    if norm < 1e-9:
        if angle < 1e-6:
            return np.zeros(3)
        # a half turn: the axis is the column of r + I with the largest norm
        cols = r + np.eye(3)
        axis = cols[:, int(np.argmax(np.linalg.norm(cols, axis=0)))]
        return axis / np.linalg.norm(axis) * angle
    return axis / norm * angle


def frame(approach: np.ndarray, fingers: np.ndarray) -> np.ndarray:
    """A gripper's orientation (columns x, y, z) pointing along ``approach`` with its fingers
    closing along ``fingers`` (made orthogonal to the approach), the Panda's convention in
    robosuite and in the kitchen's model alike."""
    z = np.asarray(approach, np.float64) / np.linalg.norm(approach)
    y = np.asarray(fingers, np.float64) - float(np.dot(fingers, z)) * z
    y /= np.linalg.norm(y)
    return np.stack([np.cross(y, z), y, z], axis=1)


def rotz(angle: float, v: np.ndarray) -> np.ndarray:
    """``v`` turned by ``angle`` about the world's vertical axis."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1], v[2]])
