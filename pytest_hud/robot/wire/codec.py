"""The openpi/0 wire codec: msgpack with openpi's numpy extension, byte for byte. Only
bool/int/float arrays travel, and shapes must fit the data: it never pickles or guesses.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import msgpack
import numpy as np

from pytest_hud.errors import WireError

__all__ = [
    "PROTOCOL",
    "SMALL_FRAME_BYTES",
    "WireError",
    "carry",
    "frame_ceiling",
    "frame_limit",
    "pack",
    "pack_chunks",
    "release_memory",
    "unpack",
    "ws_options",
]

PROTOCOL = "openpi/0"

_NDARRAY = b"__ndarray__"
_NPGENERIC = b"__npgeneric__"
_ALLOWED_KINDS = frozenset("biuf")
_KIND_NAMES = {
    "O": "object",
    "V": "void/structured",
    "c": "complex",
    "U": "unicode string",
    "S": "byte string",
    "M": "datetime",
    "m": "timedelta",
}


def _refusal(kind: str, shown: str) -> WireError:
    return WireError(
        f"cannot send a numpy array of {kind} dtype {shown} over openpi/0: "
        "only bool, integer, unsigned and float arrays travel; convert it first "
        "(e.g. arr.astype(np.float32), or split complex into real and imaginary parts; "
        "send text as a plain str, times as float seconds)"
    )


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.kind not in _ALLOWED_KINDS or dtype.fields is not None:
        raise _refusal(_KIND_NAMES.get(dtype.kind, dtype.kind), repr(dtype.str))


#: Every dtype a peer may name, by the strings it may name it with: numpy's ``dtype.str``
#: in either byte order (``"<f4"``, ``">i2"``, ``"|u1"``) and the dtype's name
#: (``"float32"``). A received dtype is looked up here, never parsed: ``np.dtype()`` on a
#: peer's string parses structured dtypes of any size (about 1.9 s of a frozen loop per
#: MiB of ``"f4,f4,..."``) before a check on the result could refuse it.
_PLAIN = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.longdouble)  # fmt: skip
WIRE_DTYPES: dict[str, np.dtype] = {
    **{np.dtype(t).newbyteorder("<").str: np.dtype(t).newbyteorder("<") for t in _PLAIN},
    **{np.dtype(t).newbyteorder(">").str: np.dtype(t).newbyteorder(">") for t in _PLAIN},
    **{np.dtype(t).name: np.dtype(t) for t in _PLAIN},
}


def _wire_dtype(name: object) -> np.dtype:
    """The dtype a frame names, looked up in :data:`WIRE_DTYPES` (bytes or str); anything
    else is refused without being parsed, whatever its length."""
    key = name.decode("latin-1") if isinstance(name, bytes) and len(name) <= 16 else name
    dtype = WIRE_DTYPES.get(key) if isinstance(key, str) else None
    if dtype is not None:
        return dtype
    if isinstance(name, str | bytes):  # a 64 MiB repr would cost too: 40 characters of it
        shown = repr(name[:40]) + ("..." if len(name) > 40 else "")
    else:
        shown = repr(name)[:40]
    letter = key.lstrip("<>|=")[:1] if isinstance(key, str) and len(key) <= 16 else ""
    raise _refusal(_KIND_NAMES.get(letter, "unknown"), shown)


#: The most dims an ndarray on the wire may have: numpy's own limit. Checked before any
#: arithmetic on the shape, so a frame of 20,000 huge dims costs nothing to refuse.
MAX_DIMS = 64


def _check_shape(shape: object, dtype: np.dtype, data: Any) -> tuple[int, ...]:
    """A decoded shape: at most :data:`MAX_DIMS` non-negative ints whose product fills
    ``data`` exactly (no -1)."""
    if isinstance(shape, list | tuple) and len(shape) > MAX_DIMS:
        raise WireError(
            f"ndarray shape has {len(shape)} dims, more than numpy's {MAX_DIMS}; send the "
            "array's real shape"
        )
    if not isinstance(shape, list | tuple) or not all(type(d) is int and d >= 0 for d in shape):
        raise WireError(
            f"ndarray shape must be a list of non-negative integers, got {shape!r}; "
            "send the array's real shape (no -1)"
        )
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: a huge shape cannot wrap
    size = len(data) if isinstance(data, bytes | bytearray) else memoryview(data).nbytes
    if nbytes != size:
        raise WireError(
            f"ndarray shape {list(shape)} of dtype {dtype.str!r} needs {nbytes} bytes, "
            f"the frame carries {size}; send arr.tobytes() with arr.shape"
        )
    return tuple(shape)


def _encode(obj: object) -> object:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        # a contiguous array is packed straight from its buffer (no tobytes() copy)
        contiguous = obj.flags.c_contiguous
        data: object = obj.reshape(-1).view(np.uint8).data if contiguous else obj.tobytes()
        return {
            _NDARRAY: True,
            b"data": data,
            b"dtype": obj.dtype.str,
            b"shape": obj.shape,
        }
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {_NPGENERIC: True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise WireError(f"cannot encode {type(obj).__name__} over openpi/0 (no pickling)")


def _decode(obj: dict) -> object:
    if _NDARRAY in obj:
        dtype = _wire_dtype(obj[b"dtype"])
        shape = _check_shape(obj[b"shape"], dtype, obj[b"data"])
        return np.ndarray(buffer=obj[b"data"], dtype=dtype, shape=shape)
    if _NPGENERIC in obj:
        dtype = _wire_dtype(obj[b"dtype"])
        return dtype.type(obj[b"data"])
    return obj


_local = threading.local()


def _packer() -> msgpack.Packer:
    # One Packer per thread: msgpack.packb() builds a fresh 256 KiB buffer per call,
    # which glibc mmaps and unmaps each time (page faults on every camera frame).
    packer = getattr(_local, "packer", None)
    if packer is None:
        packer = _local.packer = msgpack.Packer(default=_encode)
    return packer


def pack(obj: object) -> bytes:
    """Encode a frame (dicts, lists, scalars, str, bytes, numpy arrays)."""
    try:
        return _packer().pack(obj)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError(f"cannot encode frame over openpi/0: {exc}") from exc


#: Arrays at least this large are referenced by :func:`pack_chunks`, not copied.
CHUNK_BYTES = 4096
_ND_HEAD = b"\x84" + msgpack.packb(_NDARRAY) + msgpack.packb(True) + msgpack.packb(b"data")


def pack_chunks(obj: object) -> list[Any]:
    """Encode like :func:`pack`, as buffers whose concatenation is ``pack(obj)``.

    Large contiguous arrays are referenced in place rather than copied, so a
    vectored write can send a camera frame with no copy in user space. The
    buffers are only valid while the arrays they reference are unchanged.
    """
    try:
        chunks: list[object] = []
        small = _scatter(obj, _packer(), [], chunks)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError(f"cannot encode frame over openpi/0: {exc}") from exc
    if small:
        chunks.append(b"".join(small))
    return chunks


def _scatter(
    obj: object, packer: msgpack.Packer, small: list[bytes], chunks: list[Any]
) -> list[bytes]:
    """Append ``obj``'s encoding: small pieces to ``small``, big arrays as chunks of their own."""
    if isinstance(obj, dict):
        small.append(packer.pack_map_header(len(obj)))
        for key, value in obj.items():
            small.append(packer.pack(key))
            small = _scatter(value, packer, small, chunks)
    elif isinstance(obj, list | tuple):
        small.append(packer.pack_array_header(len(obj)))
        for value in obj:
            small = _scatter(value, packer, small, chunks)
    elif isinstance(obj, np.ndarray) and obj.nbytes >= CHUNK_BYTES and obj.flags.c_contiguous:
        _check_dtype(obj.dtype)
        n = obj.nbytes
        head = b"\xc6" + n.to_bytes(4, "big") if n > 0xFFFF else b"\xc5" + n.to_bytes(2, "big")
        small.append(_ND_HEAD)
        small.append(head)
        chunks.append(b"".join(small))
        chunks.append(obj.reshape(-1).view(np.uint8).data)
        # the rest of the array's map, without its own map header byte
        return [packer.pack({b"dtype": obj.dtype.str, b"shape": obj.shape})[1:]]
    else:
        small.append(packer.pack(obj))
    return small


def unpack(data: bytes | bytearray | memoryview) -> Any:
    """Decode a binary frame; a frame that is not openpi/0 msgpack raises WireError.

    Decoded arrays are read-only views on the frame's buffer (no copy).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise WireError(f"expected a binary frame, got {type(data).__name__}")
    try:
        return msgpack.unpackb(data, object_hook=_decode)
    except WireError:
        raise
    except Exception as exc:  # msgpack raises a zoo of types on garbage
        raise WireError(
            f"frame is not openpi/0 msgpack ({type(exc).__name__}: {exc}); "
            "send msgpack-numpy encoded binary frames"
        ) from exc


def carry(obj: object) -> Any:
    """What ``unpack(pack(obj))`` returns, without the bytes: for an in-process peer.

    Arrays are copied and read-only (a decoded frame's arrays are read-only views, and the
    sender may reuse its buffer), tuples become lists, and a value the wire refuses raises
    the same WireError.
    """
    if isinstance(obj, dict):  # the common message: a map of arrays and scalars, one pass
        out = {}
        for key, value in obj.items():
            kind = type(value)
            if kind is np.ndarray:
                out[key] = _carry_array(value)
            elif kind in _SCALARS:
                out[key] = value
            else:
                out[key] = carry(value)
        return out
    if isinstance(obj, np.ndarray):
        return _carry_array(obj)
    if isinstance(obj, list | tuple):
        return [carry(value) for value in obj]
    if obj is None or isinstance(obj, str | bytes | bool | int | float):
        return obj
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return obj
    raise WireError(f"cannot encode {type(obj).__name__} over openpi/0 (no pickling)")


#: The exact types carry passes through as they are (their subclasses take the long way).
_SCALARS = frozenset({str, bytes, bool, int, float, type(None)})


def _carry_array(obj: np.ndarray) -> np.ndarray:
    _check_dtype(obj.dtype)
    out = obj.copy()
    out.flags.writeable = False
    return out


#: What a peer may send before it is known (a claim), and the floor of every cap.
SMALL_FRAME_BYTES = 4096
_DEFAULT_CEILING = 64 * 1024 * 1024


def frame_ceiling() -> int:
    """The most one received frame may carry: ``$PYTEST_HUD_MAX_FRAME_BYTES`` or 64 MiB."""
    raw = os.environ.get("PYTEST_HUD_MAX_FRAME_BYTES")
    return int(raw) if raw else _DEFAULT_CEILING


def frame_limit(
    payload_bytes: int | None, *, margin: float = 2.0, ceiling: int | None = None
) -> int:
    """The cap on a received frame that carries ``payload_bytes`` of arrays.

    ``margin`` times the payload plus a few KB for keys and headers, never above the
    ceiling; an unknown payload gets the ceiling. With no cap (``max_size=None``), a
    client with no token pushed a sim from 46 MB to 681 MB before it ever claimed.
    """
    top = frame_ceiling() if ceiling is None else ceiling
    if payload_bytes is None:
        return top
    return max(SMALL_FRAME_BYTES, min(top, SMALL_FRAME_BYTES + int(payload_bytes * margin)))


def release_memory() -> bool:
    """Give the heap's free pages back to the kernel (glibc ``malloc_trim``); whether it could.

    The sim program's ``tune_allocator`` raises glibc's trim threshold so frames reuse the heap
    instead of faulting fresh pages; the price is that freed frame buffers stay
    resident (a sim kept 81-165 MB after its attacker left). Servers call this when
    a connection closes, so memory returns to its baseline without a per-frame cost.
    """
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def ws_options(max_size: int | None = None) -> dict[str, Any]:
    """WebSocket settings both ends use: no permessage-deflate; ``max_size`` caps a frame.

    Compression costs CPU on every camera frame and buys nothing on
    loopback or LAN, so it is off on server and client alike. Servers pass a
    cap from :func:`frame_limit`; ``None`` (no cap) is for clients of a trusted peer.
    """
    return {"compression": None, "max_size": max_size}
