"""The openpi/0 wire codec: msgpack with openpi's numpy extension.

An ndarray travels as a map ``{b"__ndarray__": True, b"data": raw bytes,
b"dtype": dtype.str, b"shape": shape}`` and a numpy scalar as
``{b"__npgeneric__": True, b"data": value, b"dtype": dtype.str}``; this is the
encoding of ``openpi_client.msgpack_numpy`` and of the HUD SDK, byte for byte.
Object, void and complex dtypes are refused: the wire never pickles.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack
import numpy as np

from pytest_hud.robot.wire.errors import WireError

__all__ = [
    "PROTOCOL",
    "WireError",
    "pack",
    "pack_chunks",
    "unpack",
    "ws_options",
]

PROTOCOL = "openpi/0"

_NDARRAY = b"__ndarray__"
_NPGENERIC = b"__npgeneric__"
_REFUSED_KINDS = {"O": "object", "V": "void/structured", "c": "complex"}


def _check_dtype(dtype: np.dtype) -> None:
    kind = _REFUSED_KINDS.get(dtype.kind)
    if kind is not None:
        raise WireError(
            f"cannot send a numpy array of {kind} dtype {dtype.str!r} over openpi/0: "
            "only bool, integer, unsigned and float arrays travel; convert it first "
            "(e.g. arr.astype(np.float32), or split complex into real and imaginary parts)"
        )


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        # a contiguous array is packed straight from its buffer (no tobytes() copy)
        contiguous = obj.flags.c_contiguous
        data: Any = obj.reshape(-1).view(np.uint8).data if contiguous else obj.tobytes()
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


def _decode(obj: dict) -> Any:
    if _NDARRAY in obj:
        dtype = np.dtype(obj[b"dtype"])
        _check_dtype(dtype)
        return np.ndarray(buffer=obj[b"data"], dtype=dtype, shape=tuple(obj[b"shape"]))
    if _NPGENERIC in obj:
        dtype = np.dtype(obj[b"dtype"])
        _check_dtype(dtype)
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


def pack(obj: Any) -> bytes:
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


def pack_chunks(obj: Any) -> list[Any]:
    """Encode like :func:`pack`, as buffers whose concatenation is ``pack(obj)``.

    Large contiguous arrays are referenced in place rather than copied, so a
    vectored write can send a camera frame with no copy in user space. The
    buffers are only valid while the arrays they reference are unchanged.
    """
    try:
        chunks: list[Any] = []
        small = _scatter(obj, _packer(), [], chunks)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise WireError(f"cannot encode frame over openpi/0: {exc}") from exc
    if small:
        chunks.append(b"".join(small))
    return chunks


def _scatter(
    obj: Any, packer: msgpack.Packer, small: list[bytes], chunks: list[Any]
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


def ws_options() -> dict[str, Any]:
    """WebSocket settings both ends use: no permessage-deflate, large frames allowed.

    Compression costs ~4 ms per 150 KB camera frame and buys nothing on
    loopback or LAN, so it is off on server and client alike.
    """
    return {"compression": None, "max_size": None}
