"""vla-eval's wire, protocol version 1: msgpack with its numpy codec (string keys, unlike
openpi/0's byte keys); PNG/JPEG images decode to HWC uint8.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from pytest_hud.errors import HudError
from pytest_hud.plumbing.parsing import parse_errors_as

__all__ = [
    "MESSAGE_TYPES",
    "PROTOCOL_VERSION",
    "Message",
    "VlaEvalWireError",
    "hello_payload",
    "pack_message",
    "unpack_message",
]

PROTOCOL_VERSION = 1
MESSAGE_TYPES = ("hello", "observation", "action", "episode_start", "episode_end", "error")
_ALLOWED_KINDS = frozenset("biuf")


class VlaEvalWireError(HudError, ValueError):
    """A frame that is not a vla-eval protocol-1 message (names what was wrong)."""


@dataclass
class Message:
    type: str
    payload: dict[str, object]
    seq: int = 0
    timestamp: float = 0.0


def hello_payload(**extra: object) -> dict[str, object]:
    """Our HELLO: the protocol version plus who we are (vla-eval reads ``harness_version``)."""
    from pytest_hud import __version__

    return {"harness_version": f"pytest-hud {__version__}", "protocol_version": 1, **extra}


def _encode(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _ALLOWED_KINDS:
            raise VlaEvalWireError(f"cannot send a numpy array of dtype {obj.dtype.str!r}")
        return {
            "__ndarray__": True,
            "data": np.ascontiguousarray(obj).tobytes(),
            "dtype": obj.dtype.str,
            "shape": list(obj.shape),
        }
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    raise TypeError(f"cannot encode {type(obj).__name__} for the vla-eval wire")


def _array(obj: dict[str, Any]) -> np.ndarray:
    dtype = np.dtype(obj["dtype"])
    if dtype.kind not in _ALLOWED_KINDS:
        raise VlaEvalWireError(f"refused a numpy array of dtype {dtype.str!r}")
    return np.frombuffer(obj["data"], dtype=dtype).reshape(obj["shape"]).copy()


def _decode(obj: dict[str, Any]) -> object:
    if "__ndarray__" in obj:
        return _array(obj)
    if "__image__" in obj:
        if obj.get("format") == "raw":
            return _array(obj)
        from PIL import Image

        return np.array(Image.open(io.BytesIO(obj["data"])))
    return obj


def pack_message(kind: str, payload: dict[str, object], seq: int = 0) -> bytes:
    """One message as vla-eval's ``pack_message`` would write it."""
    if kind not in MESSAGE_TYPES:
        raise VlaEvalWireError(f"unknown message type {kind!r}; valid: {', '.join(MESSAGE_TYPES)}")
    raw = {"type": kind, "payload": payload, "seq": seq, "timestamp": time.time()}
    return msgpack.packb(raw, default=_encode, use_bin_type=True)


def unpack_message(data: bytes | bytearray | memoryview) -> Message:
    """A received frame as a Message; VlaEvalWireError when it is not one."""
    with parse_errors_as(VlaEvalWireError, f"not a msgpack message ({len(data)} bytes)"):
        raw = msgpack.unpackb(data, object_hook=_decode, raw=False)
    if not isinstance(raw, dict):
        raise VlaEvalWireError(f"expected a msgpack map, got {type(raw).__name__}")
    missing = [k for k in ("type", "payload", "seq", "timestamp") if k not in raw]
    if missing:
        raise VlaEvalWireError(f"message without {missing}; got keys {sorted(raw)}")
    if raw["type"] not in MESSAGE_TYPES:
        raise VlaEvalWireError(f"unknown message type {raw['type']!r}")
    return Message(raw["type"], raw["payload"], int(raw["seq"]), float(raw["timestamp"]))
