"""The ray entry of the backends table (runtime/backends.py): ``ray`` ($RAY_ADDRESS, else a
local cluster), ``ray:HOST:PORT`` (a GCS address) or ``ray://HOST:PORT`` (Ray Client); under
``-n K`` with none named, the session's one cluster (:class:`HeadCluster`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_hud.runtime.backends import BackendParts

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import RuntimeSpec
    from pytest_hud.runtime.provider import Provider
    from pytest_hud.runtime.ray.head import RayHead

__all__ = ["PARTS", "HeadCluster", "address", "provider", "start_cluster"]


def address(spec: RuntimeSpec) -> str | None:
    """The cluster the value names, else $RAY_ADDRESS's; None: a cluster of our own."""
    if spec.arg.startswith("//"):
        return spec.raw
    return spec.arg or os.environ.get("RAY_ADDRESS") or None


def provider(spec: RuntimeSpec) -> Provider:
    from pytest_hud.runtime.ray.runtime import RayRuntime
    from pytest_hud.runtime.routing import by_declaration, undeclared

    cluster = address(spec)
    return by_declaration(lambda path: RayRuntime(path, address=cluster), undeclared)


class HeadCluster:
    """A local head the session started (temp dir of its own), stopped once."""

    kind = "Ray"

    def __init__(self, head: RayHead) -> None:
        self.head = head

    @property
    def address(self) -> str:
        return self.head.address

    @property
    def where(self) -> str:
        return f"temp dir {self.head.temp_dir}"

    def stop(self) -> None:
        """Stop the head (idempotent) and remove its temp dir."""
        if not self.head.groups:
            return
        self.head.stop()
        self.head.groups.clear()
        shutil.rmtree(self.head.temp_dir.parent, ignore_errors=True)


def start_cluster() -> HeadCluster:
    """Start a local head on loopback; SubstrateError (temp dir removed) if it does not."""
    from pytest_hud.runtime.ray.head import RayHead

    head = RayHead(Path(tempfile.mkdtemp(prefix="hud-ray-")) / "t")
    try:
        head.start()
    except BaseException:  # SubstrateError, or a Ctrl-C while `ray start` ran (stopped)
        shutil.rmtree(head.temp_dir.parent, ignore_errors=True)
        raise
    return HeadCluster(head)


PARTS = BackendParts(provider=provider, address=address, start_cluster=start_cluster)
