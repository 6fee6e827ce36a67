"""DaytonaRuntime: a fresh env server in a Daytona sandbox for every acquisition, reached through
an SSH tunnel (Daytona publishes ports only as HTTPS previews). Tested against
tests/helpers/fake_daytona.py.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Unpack

from pytest_hud.errors import SubstrateError
from pytest_hud.plumbing.private_dir import open_private, private_dir
from pytest_hud.plumbing.process import Child, child_env
from pytest_hud.runtime.ports import free_port, port_taken
from pytest_hud.runtime.provider import Runtime
from pytest_hud.runtime.sandbox import SandboxOptions, SandboxRuntime, import_sdk
from pytest_hud.runtime.substrate import (
    CONTROL_PORT,
    PingedSubstrate,
    bounded,
    serve_argv,
    setting,
)
from pytest_hud.runtime.task import Task

__all__ = ["DaytonaRuntime"]

log = logging.getLogger(__name__)

SESSION = "pytest-hud"
_IO_TIMEOUT = 30.0  # bound on one SDK call made while tearing down or reading logs


_MISSING = (
    "DaytonaRuntime needs the Daytona SDK: pip install daytona (its own venv if its pins clash "
    "with yours)"
)


#: how many times a tunnel that lost a local port to another process is re-opened
_TUNNEL_REOPENS = 3
#: a host name or an access token as they may stand in an ssh config (no spaces, no newlines)
_SSH_WORD = re.compile(r"[A-Za-z0-9._:-]+")
#: the tunnel's ssh config: the login for the gateway, then what ssh would read without -F
_SSH_CONFIG = (
    "Host {host}\n{user}Match all\n  Include /etc/ssh/ssh_config\n  Include ~/.ssh/config\n"
)


def _gpu_count(value: int | str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"Daytona takes a GPU count (gpu=1), got {value!r}") from None


class _DaytonaSubstrate(PingedSubstrate):
    kind = "daytona sandbox"
    pacing = {"delay": 0.25, "max_delay": 2.0, "factor": 2.0}

    def __init__(self, owner: DaytonaRuntime, task: Task) -> None:
        super().__init__(task, owner.boot_timeout)
        self.owner = owner
        self.sandbox: Any = None
        self.cmd_id: str | None = None
        self.access: Any = None
        self.tunnel: Child | None = None
        self.login: Path | None = None  # the tunnel's ssh config: its access token
        self.local: dict[int, int] = {}
        self.reopens = 0

    def ident(self) -> str:
        return str(getattr(self.sandbox, "id", None) or "(not created)")

    async def start(self) -> None:
        owner, sdk = self.owner, self.owner.daytona
        try:
            client = await owner.client()
            self.sandbox = await client.create(
                owner.create_params(self.task), timeout=owner.boot_timeout
            )
            process = self.sandbox.process
            await process.create_session(SESSION)
            request = sdk.SessionExecuteRequest(command=owner.command(), run_async=True)
            self.cmd_id = (await process.execute_session_command(SESSION, request)).cmd_id
            self.access = await self.sandbox.create_ssh_access(
                expires_in_minutes=math.ceil(owner.timeout / 60)
            )
        except Exception as exc:
            raise SubstrateError(
                f"{self.task.key}: {self.name}: {type(exc).__name__}: {exc}"
            ) from exc
        await self._open_tunnel()

    async def _open_tunnel(self) -> None:
        """Forward each port to a free loopback port of this machine (ssh -N -L)."""
        self.local = {port: free_port() for port in self.owner.ports}
        self._runtime = None  # the endpoint names the local ports
        self.login = private_dir("daytona") / f"{self.ident()}.ssh_config"
        self.tunnel = await Child.spawn(
            self.owner.tunnel_argv(self.access.ssh_command, self.local, self.login),
            announce=None,  # ssh -N prints nothing: readiness is a ping through it
            timeout=0,
            what="ssh tunnel",
            env=child_env(),
        )

    async def endpoint(self) -> Runtime:
        params = {
            "kind": "daytona",
            "sandbox": self.ident(),
            "host": "127.0.0.1",
            "port_map": {str(p): self.local[p] for p in self.owner.ports[1:]},
        }
        url = f"tcp://127.0.0.1:{self.local[CONTROL_PORT]}"
        return Runtime(url, params, self.task.runtime_config)

    async def stopped(self) -> str | None:
        if self.sandbox is None or self.cmd_id is None:
            return None
        command = await self.sandbox.process.get_session_command(SESSION, self.cmd_id)
        code = getattr(command, "exit_code", None)
        if code is not None:
            return f"exited with code {code}"
        tunnel = self.tunnel
        if tunnel is not None and tunnel.returncode is not None:
            await tunnel.drained(_IO_TIMEOUT)
            if port_taken(tunnel.log_tail()) and self.reopens < _TUNNEL_REOPENS:
                self.reopens += 1
                log.info("%s: %s's tunnel lost a local port; reopening", self.task.key, self.name)
                await tunnel.terminate()
                await self._open_tunnel()
                return None
            raise SubstrateError(
                f"{self.task.key}: the ssh tunnel to {self.name} exited with code "
                f"{tunnel.returncode}; its output:\n{tunnel.log_tail()}"
            )
        return None

    async def output(self) -> str:
        if self.sandbox is None or self.cmd_id is None:
            return "(no command started)"
        try:
            async with asyncio.timeout(_IO_TIMEOUT):
                logs = await self.sandbox.process.get_session_command_logs(SESSION, self.cmd_id)
        except Exception as exc:
            return f"(logs unavailable: {type(exc).__name__}: {exc})"
        return str(logs.output or f"{logs.stdout or ''}{logs.stderr or ''}")

    async def stop(self) -> None:
        tunnel, self.tunnel = self.tunnel, None
        if tunnel is not None:
            await tunnel.terminate()
        login, self.login = self.login, None
        if login is not None:
            login.unlink(missing_ok=True)
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is None:
            return
        access, self.access = self.access, None
        if access is not None:
            await bounded(sandbox.revoke_ssh_access(access.token), _IO_TIMEOUT)
        await bounded(sandbox.delete(), _IO_TIMEOUT)


class DaytonaRuntime(SandboxRuntime):
    """Serve an env module in a fresh Daytona sandbox per acquisition (see the module docs).

    ``image`` is a registry tag or a ``daytona.Image``; ``options`` are every sandbox's
    (:class:`~pytest_hud.runtime.sandbox.SandboxOptions`: ``cpu``, ``gpu`` a count,
    ``memory``, ``timeout``, ``boot_timeout``, ``sim_ports``). A row's ``runtime_config``
    (``image``, ``cpu``, ``gpu``, ``memory``, ``env``) overrides the constructor's;
    ``memory`` is MiB or like ``"4Gi"`` and is rounded up to whole GiB (Daytona's
    unit). ``config`` is a ``daytona.DaytonaConfig`` (default: ``DAYTONA_API_KEY``
    and friends from the environment); ``ssh`` is the ssh client's argv prefix;
    ``daytona`` injects the SDK module.
    """

    def __init__(
        self,
        image: object,
        *,
        module: str,
        config: object = None,
        ssh: str | Sequence[str] = "ssh",
        daytona: ModuleType | Any = None,
        **options: Unpack[SandboxOptions],
    ) -> None:
        self.daytona = daytona if daytona is not None else import_sdk("daytona", _MISSING)
        super().__init__(image, module, **options)
        self.module: str = module  # Daytona runs a module: the image CMD is not used
        self.config = config
        self.ssh = [ssh] if isinstance(ssh, str) else list(ssh)
        self._client: object = None

    def __call__(self, task: Task, /) -> _DaytonaSubstrate:
        return _DaytonaSubstrate(self, task)

    async def client(self) -> Any:
        if self._client is None:
            self._client = self.daytona.AsyncDaytona(self.config)
        return self._client

    def command(self) -> str:
        """The session command: the env server on the sandbox's loopback."""
        return shlex.join(serve_argv("python", self.module, "127.0.0.1", len(self.ports) - 1))

    def tunnel_argv(self, ssh_command: str, local: dict[int, int], login: Path) -> list[str]:
        """The gateway's ssh command plus a loopback-only forward per port (no shell). Its
        login (``TOKEN@HOST``: the sandbox's ssh access token, which lets anyone into the
        sandbox and its copy of the session's secret) is written to ``login``, an ssh config
        of this user's own (0600) that includes the user's and the system's, and never put
        in the argv, which ``ps`` shows every user of the host."""
        argv = shlex.split(ssh_command)
        if not argv or argv[0] != "ssh":
            raise SubstrateError(f"daytona gave an ssh command this cannot run: {ssh_command!r}")
        user, _, host = argv[-1].rpartition("@")
        if not _SSH_WORD.fullmatch(host) or (user and not _SSH_WORD.fullmatch(user)):
            raise SubstrateError(f"daytona gave an ssh login this cannot use: {ssh_command!r}")
        fd = open_private(login)
        try:
            os.ftruncate(fd, 0)
            os.write(
                fd, _SSH_CONFIG.format(host=host, user=f"  User {user}\n" if user else "").encode()
            )
        finally:
            os.close(fd)
        options = ["-F", str(login), "-N", "-o", "ExitOnForwardFailure=yes"]
        options += ["-o", "ServerAliveInterval=15", "-o", "StrictHostKeyChecking=accept-new"]
        for port, bound in local.items():
            options += ["-L", f"127.0.0.1:{bound}:127.0.0.1:{port}"]
        return [*self.ssh, *argv[1:-1], *options, host]

    def create_params(self, task: Task) -> object:
        """``CreateSandboxFromImageParams`` for ``task`` (its runtime_config wins)."""
        sdk = self.daytona
        cpu, gpu, mib = self.resources(task)
        resources = None
        if cpu is not None or gpu is not None or mib is not None:
            resources = sdk.Resources(
                cpu=None if cpu is None else math.ceil(float(cpu)),
                memory=None if mib is None else math.ceil(mib / 1024),
                gpu=None if gpu is None else _gpu_count(gpu),
            )
        return sdk.CreateSandboxFromImageParams(
            image=setting(task, "image", self.image),
            env_vars=self.server_env(task),
            labels={"pytest-hud": task.env},
            resources=resources,
            ephemeral=True,
            auto_stop_interval=math.ceil(self.timeout / 60),
        )
