"""One cluster for a ``pytest -n K`` session on a clustered backend that names none (``--hud-
runtime=ray`` without ``$RAY_ADDRESS``): started by the controller, its address handed to the
workers (their ``--hud-runtime`` becomes ``KIND:ADDRESS``), stopped at unconfigure.
"""

from __future__ import annotations

import atexit
import sys
from typing import TYPE_CHECKING

import pytest

from pytest_hud._plugin.internals import WorkerNode, from_controller, hand_to_workers, is_worker
from pytest_hud._plugin.options import HudOptions

if TYPE_CHECKING:
    from pytest_hud._plugin.session import HudSession
    from pytest_hud.runtime.backends import SessionCluster

__all__ = ["KEY", "ClusterPlugin", "enable", "session_cluster"]

KEY = "hud_cluster_address"


def session_cluster(config: pytest.Config, options: HudOptions) -> SessionCluster | None:
    """In the controller of an xdist run whose runtime is a cluster it does not name: start
    the session's cluster and return it. In a worker: adopt the address the controller
    handed over. Else None (one process starts its own, a named one is joined)."""
    spec = options.runtime_spec
    start = spec.backend.cluster
    if start is None or spec.cluster is not None:
        return None
    handed = from_controller(config, KEY)
    if handed:
        options.runtime = f"{spec.kind}:{handed}"
        return None
    if is_worker(config) or config.getoption("dist", "no") == "no":
        return None
    from pytest_hud.runtime.errors import SubstrateError

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
        hand_to_workers(node, KEY, self.cluster.address)

    def close(self) -> None:
        self.cluster.stop()


def enable(session: HudSession) -> object | None:
    """The feature's plugin (-n K on a clustered runtime naming no cluster), else None."""
    cluster = session_cluster(session.config, session.options)
    return None if cluster is None else ClusterPlugin(cluster)
