"""The Ray actor of a RayRuntime lease: it runs ``python -m pytest_hud.serve --lifeline`` as a
child, so a crashing env leaves a live actor to report it. No Ray import at module level.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pytest_hud.plumbing.process import Child, child_env
from pytest_hud.runtime.server import ANNOUNCE

__all__ = ["EnvServerActor"]


def _listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the process tree of ``pid`` listens on."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    bound: set[tuple[str, int]] = set()
    for proc in procs:
        try:
            conns = proc.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for conn in conns:
            if conn.status == psutil.CONN_LISTEN and conn.laddr:
                bound.add((str(conn.laddr.ip), int(conn.laddr.port)))
    return sorted(bound)


class EnvServerActor:
    """An async Ray actor (methods run on its event loop); see the module docs."""

    def __init__(self) -> None:
        self.child: Child | None = None

    async def start(
        self, module: str, host: str | None, boot_timeout: float, auth: dict[str, str]
    ) -> dict[str, object]:
        """Spawn the server bound to ``host`` (default: the node's IP as Ray knows it),
        serving the driver's session (``auth``: its secret, from
        :func:`pytest_hud.plumbing.auth.auth_env`; the cluster may have been started by anyone);
        its url, node and every port it listens on."""
        import ray

        host = host or str(ray.util.get_node_ip_address())

        argv = [sys.executable, "-m", "pytest_hud.serve", module, "--host", host]
        argv += ["--port", "0", "--sim-host", host, "--lifeline"]
        self.child = await Child.spawn(
            argv,
            announce=ANNOUNCE,
            timeout=boot_timeout,
            what=f"env server for {module}",
            env=child_env(**auth),
            echo=True,
        )
        ctx = ray.get_runtime_context()
        print(f"env server {self.child.info['url']} pid {self.child.pid} for {module}", flush=True)
        return {
            "url": self.child.info["url"],
            "pid": self.child.pid,
            "actor_pid": os.getpid(),
            "node_id": ctx.get_node_id(),
            "node_ip": ray.util.get_node_ip_address(),
            "host": host,
            "ports": self.ports(),
            "pytest_hud": str(Path(__file__).resolve().parents[2] / "__init__.py"),
        }

    def ports(self) -> list[tuple[str, int]]:
        """Ports the server and its sims listen on right now (sims bind when they start)."""
        return _listening(self.child.pid) if self.child is not None else []

    def tail(self, lines: int = 40) -> str:
        return self.child.log_tail(lines) if self.child is not None else "(no server)"

    def returncode(self) -> int | None:
        return self.child.returncode if self.child is not None else None

    async def stop(self) -> None:
        if self.child is not None:
            await self.child.terminate()
