"""A real two-node Ray cluster on this machine, bound to 127.0.0.1, for tests/test_ray.py.

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
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RAY = Path(sys.executable).with_name("ray")
BOOT_TIMEOUT = 150.0  # one `ray start` on a loaded 2-core machine


class ClusterError(RuntimeError):
    """The test cluster would not start (the message carries ray start's output)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cluster_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    return env


@dataclass
class LocalCluster:
    temp_dir: Path
    port: int = field(default_factory=free_port)
    client_port: int = field(default_factory=free_port)
    dashboard_port: int = field(default_factory=free_port)
    groups: list[int] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, argv: list[str], what: str) -> None:
        log = self.temp_dir.parent / f"{what}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=cluster_env(),
                start_new_session=True,
            )
            self.groups.append(proc.pid)
            try:
                code = proc.wait(BOOT_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
        if code != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            how = f"did not finish within {BOOT_TIMEOUT} s" if code is None else f"exited {code}"
            raise ClusterError(
                f"{what}: `ray start` {how}; expected a running node. Its output:\n{tail}"
            )

    def start(self) -> None:
        common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats"]
        common += [f"--temp-dir={self.temp_dir}"]
        self._start(
            [
                str(RAY),
                "start",
                "--head",
                f"--port={self.port}",
                "--num-cpus=4",
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--ray-client-server-port={self.client_port}",
                *common,
            ],
            "head",
        )
        self._start(
            [
                sys.executable,
                str(Path(__file__).with_name("ray_node.py")),
                "start",
                f"--address={self.address}",
                "--num-cpus=2",
                '--resources={"libero": 1}',
                f"--dashboard-agent-listen-port={free_port()}",
                *common,
            ],
            "node2",
        )

    def pids(self) -> list[int]:
        """Every live process of this cluster: its process groups and anything run from
        its temp dir."""
        found = []
        needle = str(self.temp_dir).encode()
        for proc in Path("/proc").glob("[0-9]*"):
            with contextlib.suppress(OSError):
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] == "Z":
                    continue
                if int(stat[2]) in self.groups or needle in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
        return found

    def stop(self) -> list[int]:
        """SIGTERM the cluster's groups, then SIGKILL what is left; pids that survived."""
        for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            for group in self.groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while self.pids() and time.monotonic() < deadline:
                time.sleep(0.2)
        return self.pids()


def joined(tmp_path_factory: Any) -> Iterator[LocalCluster]:
    """The body of conftest's session fixture ``cluster``: start the cluster, join it
    from this process, and stop it (by the groups it started) at the end.

    One per test session: the fixture lives in tests/conftest.py (one definition, so one
    instance), and every module using it is in the ``xdist_group("ray")``, which
    ``--dist loadgroup`` (the README's test command) sends to a single worker.
    """
    import importlib.util

    import pytest
    from conftest import require

    require(importlib.util.find_spec("ray"), "ray", "run scripts/setup --ray")
    import ray

    from pytest_hud.runtime.ray import connect

    local = LocalCluster(tmp_path_factory.mktemp("ray") / "t")
    try:
        local.start()
        connect(local.address)
        yield local
    except ClusterError as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        ray.shutdown()
        left = local.stop()
        assert not left, f"cluster processes survived SIGKILL: {left}"
