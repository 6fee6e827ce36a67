"""In-process env servers and described arrays for the policy server's tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hud.plumbing.loader import load_module
from pytest_hud.runtime.modules import module_environments
from pytest_hud.runtime.server import EnvServer


def array(described: dict[str, Any]) -> np.ndarray:
    """An array back from the drive script's JSON view."""
    d = described["__ndarray__"]
    return np.array(d["values"], dtype=np.dtype(d["dtype"])).reshape(d["shape"])


@contextlib.asynccontextmanager
async def env_server(path: Path) -> AsyncIterator[EnvServer]:
    server = EnvServer(module_environments(load_module(path, fresh=True)))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
