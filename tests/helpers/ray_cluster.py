"""A real two-node Ray cluster on this machine, bound to 127.0.0.1, for tests/runtime/test_ray.py.

``ray start --head`` plus a second node (``--resources='{"libero": 1}'``), each with
``--node-ip-address=127.0.0.1``, its own free ports, and one dedicated ``--temp-dir``.
Every ``ray start`` runs as the leader of a new process group, which the daemons it
starts inherit; ``stop()`` signals exactly those groups (never ``ray stop``, which would
stop other sessions' clusters too), then kills anything still running from the temp dir.

Loopback: on Linux ``ray start`` turns ``--node-ip-address=127.0.0.1`` into this
machine's first interface address (``resolve_ip_for_localhost``), and its gRPC servers
then listen on ``*``. Ray's own switch against that is
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (the laptop mode: localhost stays 127.0.0.1, and
Ray's servers bind 127.0.0.1); but in that mode ``ray start --address`` refuses to add a
node. The second node is therefore started through ``ray_node.py``, which runs the same
``ray start`` CLI with only that refusal lifted. The dashboard runs (on 127.0.0.1, a free
port) because the state API (``ray list actors``, actor logs) is served by it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_hud.errors import SubstrateError
from pytest_hud.runtime.ports import free_port
from pytest_hud.runtime.ray.head import RAY, RayHead, ray_env

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["RAY", "LocalCluster", "cluster_env", "joined"]


def cluster_env() -> dict[str, str]:
    env = ray_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@dataclass
class LocalCluster(RayHead):
    """The production RayHead with a dashboard (the state API), plus a second node."""

    dashboard_port: int = field(default_factory=free_port)
    num_cpus: int | None = 4

    def env(self) -> dict[str, str]:
        return cluster_env()

    def renew_ports(self) -> None:
        super().renew_ports()
        self.dashboard_port = free_port()

    def head_args(self) -> list[str]:
        return [
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.dashboard_port}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--ray-client-server-port={self.client_port}",
        ]

    def start(self) -> None:
        super().start()
        self.launch(
            [
                sys.executable,
                str(Path(__file__).with_name("ray_node.py")),
                "start",
                f"--address={self.address}",
                "--num-cpus=2",
                '--resources={"libero": 1}',
                f"--dashboard-agent-listen-port={free_port()}",
                *self.common_args(),
            ],
            "node2",
        )


def joined(tmp_path_factory: Any) -> Iterator[LocalCluster]:
    """The body of conftest's fixture ``cluster``: start the cluster, join it from this
    process, and stop it (by the groups it started) when resumed.

    One at a time: tests/conftest.py keeps it for a run of tests using it, and every
    module using it is in the ``xdist_group("ray")``, which ``--dist loadgroup`` (the
    README's test command) sends to a single worker as one run.
    """
    import importlib.util

    import pytest
    from needs import require

    require(importlib.util.find_spec("ray"), "ray", "run scripts/setup --ray")
    import ray

    from pytest_hud.plumbing.cluster import connect

    # a short folder: Ray's socket paths live under it and AF_UNIX allows 107 bytes
    # (pytest's basetemp under xdist, /tmp/pytest-of-root/pytest-N/popen-gw0/..., is too long)
    short = Path(tempfile.mkdtemp(prefix="hud-ray-", dir="/tmp"))
    local = LocalCluster(short / "t")
    try:
        local.start()
        connect(local.address)
        # Ray's state API (`ray list actors`) finds "the" cluster by scanning for GCS
        # processes unless RAY_ADDRESS names it: any other cluster on this machine (a
        # test's own RayHead, another checkout's tests) would make it refuse to choose.
        os.environ["RAY_ADDRESS"] = local.address
        yield local
    except SubstrateError as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        os.environ.pop("RAY_ADDRESS", None)
        ray.shutdown()
        left = local.stop()
        shutil.rmtree(short, ignore_errors=True)
        assert not left, f"cluster processes survived SIGKILL: {left}"


@contextlib.contextmanager
def bench_cluster() -> Iterator[LocalCluster]:
    """For the benches: the same two-node loopback cluster in a short temp folder, joined
    from this process, stopped at the end (survivors reported on stderr, not asserted)."""
    import ray

    from pytest_hud.plumbing.cluster import connect

    with tempfile.TemporaryDirectory(prefix="bench-ray-", dir="/tmp") as tmp:
        cluster = LocalCluster(Path(tmp) / "t")
        try:
            cluster.start()
            connect(cluster.address)
            yield cluster
        finally:
            ray.shutdown()
            left = cluster.stop()
            if left:
                print(f"cluster processes survived: {left}", file=sys.stderr)
