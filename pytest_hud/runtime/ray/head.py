"""A local Ray head on 127.0.0.1 for one session. :meth:`RayHead.stop` signals only the process
groups it started (never ``ray stop``, which stops every cluster of this user). Ray's daemons
outlive the ``ray start`` that launched them (and the GCS server and autoscaler monitor ignore
SIGINT and SIGTERM), so a watchdog (:class:`~pytest_hud.plumbing.reaper.Reaper`) guards them
from the first launch: if this process dies before :meth:`RayHead.stop` finished (SIGKILL, a
second Ctrl-C, xdist killing a worker whose teardown ran past 10 s), it reaps them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pytest_hud.errors import SubstrateError
from pytest_hud.plumbing.reaper import Reaper, reap, targets
from pytest_hud.runtime.ports import free_port, port_taken

__all__ = ["BOOT_TIMEOUT", "RayHead", "ray_env"]

#: seconds a stopping cluster gets between SIGTERM and SIGKILL
STOP_GRACE = 5.0

RAY = Path(sys.executable).with_name("ray")
BOOT_TIMEOUT = 150.0  # one `ray start` on a loaded 2-core machine


#: ``ray start --head`` attempts, on fresh ports each, while a port it was given was taken
START_ATTEMPTS = 3


def ray_env() -> dict[str, str]:
    """The environment of ``ray start``: ours, no usage stats, Ray's loopback mode, and
    Ray's token auth as chosen (``RAY_AUTH_MODE``), else off: Ray 2.60 otherwise turns it
    on when some earlier Ray left ``~/.ray/auth_token``, and a client that did not is
    refused (see :func:`pytest_hud.plumbing.cluster.connect`)."""
    env = dict(os.environ)
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env.pop("RAY_ADDRESS", None)
    return env


@dataclass
class RayHead:
    """``ray start --head`` on 127.0.0.1 with its own temp dir (see the module docs). The temp
    dir's parent is the head's own folder (its ``ray start`` logs): the watchdog removes it
    if this process dies first."""

    temp_dir: Path
    port: int = field(default_factory=free_port)
    #: Ray client's server (``ray://``); Ray's fixed default (10001) would clash with any
    #: other head on this machine
    client_port: int = field(default_factory=free_port)
    num_cpus: int | None = None
    groups: list[int] = field(default_factory=list)
    reaper: Reaper | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return ray_env()

    def head_args(self) -> list[str]:
        """The head's flags beyond the loopback ones (the tests' cluster adds a dashboard)."""
        return ["--include-dashboard=false", f"--ray-client-server-port={self.client_port}"]

    def launch(self, argv: list[str], what: str) -> None:
        """Run one ``ray start`` in a new process group; bounded; its output on failure."""
        self.temp_dir.parent.mkdir(parents=True, exist_ok=True)
        if self.reaper is None:
            self.reaper = Reaper()
            self.reaper.guard(match=str(self.temp_dir), folder=str(self.temp_dir.parent))
        log = self.temp_dir.parent / f"{what}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True
            )
            self.groups.append(proc.pid)
            self.reaper.guard(group=proc.pid)
            try:
                code = proc.wait(BOOT_TIMEOUT)
            except subprocess.TimeoutExpired:
                code = None
            except BaseException:  # a Ctrl-C while it starts: what it started goes too
                self.stop()
                raise
        if code != 0:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            how = f"did not finish within {BOOT_TIMEOUT} s" if code is None else f"exited {code}"
            self.stop()
            raise SubstrateError(
                f"{what}: `ray start` {how}; expected a running node. Its output:\n{tail}"
            )

    def common_args(self) -> list[str]:
        return [
            "--node-ip-address=127.0.0.1",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
        ]

    def renew_ports(self) -> None:
        """Pick fresh ports for another attempt at starting the head."""
        self.port, self.client_port = free_port(), free_port()

    def start(self) -> None:
        for attempt in range(1, START_ATTEMPTS + 1):
            argv = [str(RAY), "start", "--head", f"--port={self.port}", *self.head_args()]
            if self.num_cpus is not None:
                argv.append(f"--num-cpus={self.num_cpus}")
            try:
                self.launch([*argv, *self.common_args()], "head")
                return
            except SubstrateError as exc:
                if attempt == START_ATTEMPTS or not port_taken(str(exc)):
                    raise
            self.renew_ports()

    def pids(self) -> list[int]:
        """Every live process of this cluster: its process groups and anything run from
        its temp dir."""
        return targets(set(self.groups), [str(self.temp_dir)])

    def stop(self) -> list[int]:
        """SIGTERM the cluster's groups, then SIGKILL what is left; pids that survived.
        The raylets and workers exit on SIGTERM within seconds; the GCS server and the
        autoscaler monitor never do, and a cluster this process started holds nothing
        worth waiting for, so the SIGTERM grace is short. With nothing left, the watchdog
        is released (the folder stays the caller's to remove)."""
        left = reap(set(self.groups), [str(self.temp_dir)], [], term_grace=STOP_GRACE)
        if not left and self.reaper is not None:
            self.reaper.release()
            self.reaper = None
        return left
