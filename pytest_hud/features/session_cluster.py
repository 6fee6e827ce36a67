"""One cluster for a ``pytest -n K`` session on a clustered backend that names none (``--hud-
runtime=ray`` without ``$RAY_ADDRESS``): started by the controller, its address handed to the
workers (their ``--hud-runtime`` becomes ``KIND:ADDRESS``), stopped at unconfigure.
"""

from __future__ import annotations

import atexit
import dataclasses
import sys
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.feature_api import FeatureSettings, Hud, HudOptions, WorkerNode, handed
from pytest_hud.runtime.backends import parse

if TYPE_CHECKING:
    from pytest_hud.runtime.backends import SessionCluster

__all__ = ["KEY", "ClusterPlugin", "Settings", "enable"]

KEY = "hud_cluster_address"


class Settings(FeatureSettings):
    #: in a worker: the address of the cluster the controller started
    address: str | None = handed(KEY)


def _needs_cluster(options: HudOptions) -> bool:
    """A clustered runtime that names no cluster (``--hud-runtime=ray``, no ``$RAY_ADDRESS``)."""
    return (
        options.runtime.backend.parts.start_cluster is not None and options.runtime.cluster is None
    )


def session_cluster(hud: Hud) -> SessionCluster | None:
    """In the controller of an xdist run whose runtime is a cluster it does not name: start
    the session's cluster and return it. Else None (a worker adopts the controller's, see
    :func:`enable`; one process starts its own, a named one is joined)."""
    spec = hud.options.runtime
    start = spec.backend.parts.start_cluster
    if start is None or not _needs_cluster(hud.options) or hud.is_worker or not hud.distributed:
        return None
    from pytest_hud.errors import SubstrateError

    try:
        cluster = start()
    except SubstrateError as exc:
        msg = f"--hud-runtime={spec.raw} under xdist: the session's cluster: {exc}"
        raise pytest.UsageError(msg) from None
    atexit.register(cluster.stop)
    # stderr: at configure time the terminal reporter may not be registered yet
    print(
        f"hud: one {cluster.kind} cluster for the session at {cluster.address} "
        f"({cluster.where}), stopped at the end",
        file=sys.stderr,
        flush=True,
    )
    return cluster


class ClusterPlugin:
    """Hands the session's cluster to each worker; stops it when the session ends."""

    def __init__(self, cluster: SessionCluster) -> None:
        self.cluster = cluster

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerNode) -> None:
        """Hand the session's cluster to a worker about to start."""
        Hud.to_worker(node, KEY, self.cluster.address)

    def close(self) -> None:
        self.cluster.stop()


def configure(settings: Settings, options: HudOptions) -> HudOptions:
    """In a worker of such a session: the runtime joins the cluster the controller started
    (``KIND:ADDRESS``)."""
    if settings.address is None or not _needs_cluster(options):
        return options
    spec = options.runtime
    return dataclasses.replace(options, runtime=parse(f"{spec.kind}:{settings.address}", spec.base))


def enable(settings: Settings, hud: Hud) -> ClusterPlugin | None:
    """The feature's plugin (-n K on a clustered runtime naming no cluster), else None."""
    cluster = session_cluster(hud)
    return None if cluster is None else ClusterPlugin(cluster)
