"""A JSON view of decoded openpi frames, shared by the interop scripts (each runs in its
own venv with this folder on sys.path)."""

from __future__ import annotations

from typing import Any

import numpy as np


def describe(value: Any) -> Any:
    """A JSON view of a decoded frame that keeps numpy types visible."""
    if isinstance(value, np.ndarray):
        return {
            "__ndarray__": {
                "dtype": value.dtype.str,
                "shape": list(value.shape),
                "values": value.tolist(),
            }
        }
    if isinstance(value, np.generic):
        return {"__npgeneric__": {"dtype": value.dtype.str, "value": value.item()}}
    if isinstance(value, bytes):
        return {"__bytes__": value.hex()}
    if isinstance(value, dict):
        return {str(k): describe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [describe(v) for v in value]
    return value
