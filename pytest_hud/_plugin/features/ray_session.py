"""One Ray cluster for a ``pytest -n K --hud-runtime=ray`` session without ``$RAY_ADDRESS``:
started by the controller, its address handed to workers, stopped at unconfigure.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.internals import from_controller, hand_to_workers, is_worker
from pytest_hud._plugin.options import HudOptions

if TYPE_CHECKING:
    from pytest_hud.runtime.ray.head import RayHead

__all__ = ["KEY", "RaySessionPlugin", "session_cluster", "stop_cluster"]

KEY = "hud_ray_address"


def session_cluster(config: pytest.Config, options: HudOptions) -> RayHead | None:
    """In the controller of an xdist run on ``--hud-runtime=ray`` with no $RAY_ADDRESS:
    start the session's cluster and return it. In a worker: adopt the address the
    controller handed over (``options.runtime`` becomes ``ray:ADDRESS``). Else None."""
    if options.runtime != "ray":
        return None
    handed = from_controller(config, KEY)
    if handed:
        options.runtime = f"ray:{handed}"
        return None
    if is_worker(config) or os.environ.get("RAY_ADDRESS"):
        return None
    if config.getoption("dist", "no") == "no":
        return None  # one process: its ray.init() starts the one cluster
    from pytest_hud.runtime.errors import SubstrateError
    from pytest_hud.runtime.ray.head import RayHead

    head = RayHead(Path(tempfile.mkdtemp(prefix="hud-ray-")) / "t")
    try:
        head.start()
    except SubstrateError as exc:
        shutil.rmtree(head.temp_dir.parent, ignore_errors=True)
        msg = f"--hud-runtime=ray under xdist: the session's cluster: {exc}"
        raise pytest.UsageError(msg) from None
    atexit.register(stop_cluster, head)
    # stderr: at configure time the terminal reporter may not be registered yet
    print(
        f"hud: one Ray cluster for the session at {head.address} "
        f"(temp dir {head.temp_dir}), stopped at the end",
        file=sys.stderr,
        flush=True,
    )
    return head


def stop_cluster(head: RayHead | None) -> None:
    """Stop the session's cluster (idempotent) and remove its temp dir."""
    if head is None or not head.groups:
        return
    head.stop()
    head.groups.clear()
    shutil.rmtree(head.temp_dir.parent, ignore_errors=True)


class RaySessionPlugin:
    """Hands the session's cluster to each worker; stops it when the session ends."""

    def __init__(self, head: RayHead) -> None:
        self.head = head

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: object) -> None:
        """Hand the session's cluster to a worker about to start."""
        hand_to_workers(node, KEY, self.head.address)

    def close(self) -> None:
        stop_cluster(self.head)
