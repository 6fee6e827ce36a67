"""The cameras read between episodes (a bridge's ``cameras`` control method): what an operator's
reset gate shows live while no episode holds the robot. Frames travel on the JSON control
channel as small JPEGs (base64), each at most :data:`MAX_SIDE` pixels on its longest side and
at most :data:`MAX_CAMERAS` of them, so one read stays a bounded message.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Mapping

import numpy as np

from pytest_hud.errors import BridgeError

__all__ = ["MAX_CAMERAS", "MAX_SIDE", "decode_frames", "encode_frames"]

#: The longest side of a frame sent (a larger one is scaled down, its aspect kept).
MAX_SIDE = 320
#: The cameras one read sends (the first ones by name).
MAX_CAMERAS = 8
#: The JPEG bytes one frame may take (a frame at MAX_SIDE is far below it).
MAX_JPEG = 256 * 1024


def encode_frames(images: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """``{name: HWC image}`` as the control reply carries them: ``{name: {"jpeg": base64,
    "width", "height"}}``. A grayscale, a float in [0, 1] or an RGBA frame is converted
    (it is only shown)."""
    from PIL import Image

    out: dict[str, dict[str, object]] = {}
    for name in sorted(images)[:MAX_CAMERAS]:
        array = np.asarray(images[name])
        if array.ndim == 3 and array.shape[-1] == 1:
            array = array[..., 0]
        if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (3, 4)):
            raise BridgeError(
                f"camera {name!r} gave an array of shape {array.shape}; a camera frame is "
                "HxWx3 (RGB), HxWx4 or HxW"
            )
        if array.dtype != np.uint8:
            scale = 255.0 if array.size and float(np.nanmax(array)) <= 1.0 else 1.0
            array = np.clip(np.nan_to_num(array.astype(np.float64) * scale), 0, 255)
            array = array.astype(np.uint8)
        if array.ndim == 3 and array.shape[-1] == 4:
            array = array[..., :3]
        image = Image.fromarray(np.ascontiguousarray(array))
        image.thumbnail((MAX_SIDE, MAX_SIDE))  # only ever smaller, its aspect kept
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=80)
        out[str(name)] = {
            "jpeg": base64.b64encode(buffer.getvalue()).decode("ascii"),
            "width": image.width,
            "height": image.height,
        }
    return out


def decode_frames(sent: object) -> dict[str, np.ndarray]:
    """The frames of a ``cameras`` reply as HxWx3 uint8 RGB arrays, checked: at most
    :data:`MAX_CAMERAS`, each a JPEG of at most :data:`MAX_SIDE` pixels a side. Raises
    ValueError naming what is wrong."""
    from PIL import Image

    if not isinstance(sent, Mapping) or len(sent) > MAX_CAMERAS:
        raise ValueError(f"expected at most {MAX_CAMERAS} cameras by name")
    out: dict[str, np.ndarray] = {}
    for name, frame in sent.items():
        text = frame.get("jpeg") if isinstance(frame, Mapping) else None
        if not isinstance(name, str) or not isinstance(text, str):
            raise ValueError("a camera frame is {name: {'jpeg': base64}}")
        if len(text) > MAX_JPEG * 4 // 3 + 4:
            raise ValueError(f"camera {name!r}: the frame is larger than {MAX_JPEG} bytes")
        try:
            data = base64.b64decode(text, validate=True)
            with Image.open(io.BytesIO(data)) as image:
                if image.format != "JPEG" or max(image.size) > MAX_SIDE:
                    raise ValueError(f"camera {name!r}: not a JPEG of at most {MAX_SIDE} px")
                out[name] = np.asarray(image.convert("RGB"))
        except (binascii.Error, OSError) as exc:
            raise ValueError(f"camera {name!r}: not an image ({exc})") from None
    return out
