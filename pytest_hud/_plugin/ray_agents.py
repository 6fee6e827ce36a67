"""``--hud-agent=openpi:ray:NAME``: the named policy replicas on the Ray cluster, resolved in the
plugin because the agent registry may not import the runtime.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

__all__ = ["PREFIX", "ray_agent"]

PREFIX = "openpi:ray:"


def ray_agent(spec: str, runtime: str) -> Any | None:
    """The ReplicaAgent ``spec`` names, or None when ``spec`` is not ``openpi:ray:NAME``."""
    if not spec.startswith(PREFIX):
        return None
    name = spec.removeprefix(PREFIX)
    if not name:
        raise pytest.UsageError(f"--hud-agent={spec}: expected openpi:ray:NAME, got no NAME")
    import ray

    from pytest_hud.robot.agent.replicas import replica_agent
    from pytest_hud.runtime.backends import parse
    from pytest_hud.runtime.errors import PlacementError

    address = parse(runtime).cluster
    if address is None and not os.environ.get("RAY_ADDRESS") and not ray.is_initialized():
        raise pytest.UsageError(
            f"--hud-agent={spec} looks replicas up on a running Ray cluster; expected "
            "--hud-runtime=ray:HOST:PORT (or ray://HOST:PORT) or $RAY_ADDRESS, got neither"
        )
    try:
        return replica_agent(name, address, agent_name=spec)
    except PlacementError as exc:
        raise pytest.UsageError(f"--hud-agent={spec}: {exc}") from None
