"""What the bridge reads from and writes to an agent connection, as plain functions:
decoding a frame and an action, one slot's row of a batched observation, errors as text
frames. The bridge's serve loop keeps only the state machine."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from pytest_hud.errors import BridgeError, WireError
from pytest_hud.robot.sim.hooks import Batched
from pytest_hud.robot.sim.slots import AgentConnection
from pytest_hud.robot.wire.codec import unpack

__all__ = ["decode_action", "decode_frame", "slot_row"]


def decode_frame(frame: Any) -> object:
    """A msgpack binary frame decoded; a text frame or bad msgpack is a BridgeError."""
    if isinstance(frame, dict):  # passed by an in-process agent, already decoded
        return frame
    if isinstance(frame, str):
        raise BridgeError(
            f"got a text frame ({frame[:80]!r}); text frames are errors on openpi/0, "
            "send msgpack binary frames"
        )
    try:
        return unpack(frame)
    except WireError as exc:
        raise BridgeError(str(exc)) from None


def decode_action(frame: object, size: int | None) -> np.ndarray:
    """One ``{"actions": [A]}`` frame as a flat float32 action of the contract's size."""
    msg = decode_frame(frame)
    if not isinstance(msg, dict) or "actions" not in msg:
        raise BridgeError(f'expected {{"actions": array}}, got {_describe(msg)}')
    action = msg["actions"]
    if type(action) is not np.ndarray or action.dtype != np.float32:
        try:
            action = np.asarray(action, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise BridgeError(f"actions must be numeric: {exc}") from None
    flat = action if action.ndim == 1 else action.reshape(-1)
    if action.ndim > 2 or (action.ndim == 2 and action.shape[0] != 1):
        raise BridgeError(
            f"got an action of shape {action.shape}; this bridge steps one action per "
            f"tick: send shape [{size or 'A'}] (use an agent-side chunk queue for chunks)"
        )
    if size is not None and flat.size != size:
        raise BridgeError(
            f"action has {flat.size} values, the contract's action space has {size}; "
            f"send shape [{size}]"
        )
    if not (math.isfinite(flat[0]) if flat.size == 1 else np.isfinite(flat).all()):
        raise BridgeError("action contains NaN or inf")
    return flat


def slot_row(batch: Batched, i: int, n: int) -> tuple[dict[str, object], bool]:
    """Slot ``i``'s row of a batched ``(data, terminated[, reward])`` observation of ``n``
    slots, as the message an agent receives, and whether that slot terminated."""
    data, terminated = batch[0], batch[1]
    msg: dict[str, object] = {}
    for key, value in data.items():
        arr = value if type(value) is np.ndarray else np.asarray(value)
        msg[key] = arr[i] if arr.ndim >= 1 and arr.shape[0] == n else arr
    at = i if n > 1 else 0
    done = bool(_item(terminated, at))
    msg["terminated"] = done
    reward = batch[2] if len(batch) > 2 else None
    if reward is not None:
        msg["reward"] = float(_item(reward, at))
    return msg, done


def _item(values: ArrayLike, at: int) -> float:
    """Element ``at`` of a flat array, a list or a scalar (as ``np.ravel(values)[at]``)."""
    if type(values) is np.ndarray and values.ndim == 1:  # the common case: no ravel
        return float(values[at])
    return float(np.ravel(values)[at])


def _describe(obj: object) -> str:
    if isinstance(obj, dict):
        return f"a map with keys {sorted(map(str, obj))[:8]}"
    return f"a {type(obj).__name__}"


async def _send_error(ws: AgentConnection, message: str) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(5):
            await ws.send(message)
