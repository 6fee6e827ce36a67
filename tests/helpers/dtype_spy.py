"""A spy on numpy's dtype parser as the wire codec calls it: whether a peer's dtype string
ever reaches ``np.dtype()`` (issue 52 #4: a structured one froze a server's loop)."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

from pytest_hud.robot.wire import codec


def spy_on_dtype(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """From here on, every value the codec hands to ``np.dtype`` is appended to the list
    returned (the codec's numpy is numpy with that one function wrapped)."""
    parsed: list[object] = []

    class Spy(types.ModuleType):
        def __getattr__(self, name: str) -> object:
            return getattr(np, name)

        @staticmethod
        def dtype(*args: Any, **kwargs: Any) -> np.dtype:
            parsed.append(args[0] if args else kwargs.get("dtype"))
            return np.dtype(*args, **kwargs)

    monkeypatch.setattr(codec, "np", Spy("numpy"))
    return parsed
