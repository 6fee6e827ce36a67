"""A fake of the Daytona SDK surface DaytonaRuntime uses, backed by real local processes.

Daytona's cloud cannot be reached from this machine, so ``FakeDaytona()`` stands in for
the ``daytona`` module, covering exactly these calls (signatures as in daytona 0.226):

- ``AsyncDaytona(config)``, ``await client.create(params, *, timeout=60)``
- ``CreateSandboxFromImageParams(image=, env_vars=, labels=, resources=, ephemeral=,
  auto_stop_interval=)``, ``Resources(cpu=, memory=, gpu=)``,
  ``SessionExecuteRequest(command=, run_async=)``
- ``sandbox.id``, ``sandbox.process.create_session(id)``,
  ``.execute_session_command(id, req) -> .cmd_id``, ``.get_session_command(id, cmd)
  -> .exit_code``, ``.get_session_command_logs(id, cmd) -> .output/.stdout/.stderr``,
  ``sandbox.create_ssh_access(expires_in_minutes=) -> .token/.ssh_command``,
  ``sandbox.revoke_ssh_access(token)``, ``sandbox.delete()``

A sandbox is a real process group: its session command runs through ``sh -c`` with
``python`` as this interpreter, in a loopback address of its own (``127.79.N.1``
stands for its ``127.0.0.1``, so every sandbox binds the literal ports 8000, 8001, ...).
The SSH proxy is ``tests/helpers/fake_ssh.py``: ``ssh_command`` names it as ``ssh`` and
DaytonaRuntime is built with ``ssh=`` pointing at it; it implements ``-N -L`` with real
TCP forwarders from this side's 127.0.0.1 to the sandbox's address. ``delete()``
SIGTERMs, then SIGKILLs the group.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FAKE_SSH = [sys.executable, str(Path(__file__).resolve().parent / "fake_ssh.py")]
# Sandbox numbers start at a per-process offset: two pytest-xdist workers each running
# fakes must not hand out the same loopback address (every sandbox binds port 8000).
_ids = itertools.count(1 + 37 * (os.getpid() % 1000))


@dataclass
class Resources:
    cpu: int | None = None
    memory: int | None = None
    disk: int | None = None
    gpu: int | None = None


@dataclass
class CreateSandboxFromImageParams:
    image: Any
    env_vars: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    resources: Resources | None = None
    ephemeral: bool | None = None
    auto_stop_interval: int | None = None


@dataclass
class SessionExecuteRequest:
    command: str
    run_async: bool | None = None


@dataclass
class _Executed:
    cmd_id: str


@dataclass
class _Command:
    id: str
    command: str
    exit_code: int | None


@dataclass
class _Logs:
    output: str
    stdout: str
    stderr: str


@dataclass
class _SshAccess:
    token: str
    ssh_command: str


@dataclass
class _Run:
    proc: subprocess.Popen[bytes]
    command: str
    chunks: list[str] = field(default_factory=list)


class _Process:
    def __init__(self, sandbox: FakeSandbox) -> None:
        self._sandbox = sandbox
        self.sessions: dict[str, dict[str, _Run]] = {}

    async def create_session(self, session_id: str) -> None:
        if session_id in self.sessions:
            raise RuntimeError(f"session {session_id!r} already exists")
        self.sessions[session_id] = {}

    async def execute_session_command(
        self, session_id: str, req: SessionExecuteRequest, timeout: int | None = None
    ) -> _Executed:
        if not req.run_async:
            raise AssertionError("DaytonaRuntime must start the server with run_async=True")
        sandbox = self._sandbox
        command = req.command.replace("127.0.0.1", sandbox.ip)
        proc = subprocess.Popen(
            ["sh", "-c", command.replace("python ", f"{sys.executable} ", 1)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(sandbox.env or {})},
            start_new_session=True,
        )
        run = _Run(proc, req.command)
        threading.Thread(target=_drain, args=(proc, run.chunks), daemon=True).start()
        cmd_id = f"cmd-{next(_ids)}"
        self.sessions[session_id][cmd_id] = run
        return _Executed(cmd_id)

    async def get_session_command(self, session_id: str, command_id: str) -> _Command:
        run = self.sessions[session_id][command_id]
        return _Command(command_id, run.command, run.proc.poll())

    async def get_session_command_logs(self, session_id: str, command_id: str) -> _Logs:
        text = "".join(self.sessions[session_id][command_id].chunks)
        return _Logs(text, text, "")


def _drain(proc: subprocess.Popen[bytes], chunks: list[str]) -> None:
    assert proc.stdout is not None
    with contextlib.suppress(Exception), proc.stdout:
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
            chunks.append(chunk.decode(errors="replace"))


class FakeSandbox:
    def __init__(self, params: CreateSandboxFromImageParams) -> None:
        n = next(_ids)
        self.id = f"fake-daytona-{n:04d}"
        self.ip = f"127.79.{n % 250 + 1}.1"
        self.params = params
        self.env = params.env_vars
        self.process = _Process(self)
        self.ssh_tokens: set[str] = set()
        self.deleted = False

    async def create_ssh_access(
        self, expires_in_minutes: int | None = None, request_timeout: float | None = None
    ) -> _SshAccess:
        token = f"tok{len(self.ssh_tokens) + 1}-{self.id}"
        self.ssh_tokens.add(token)
        return _SshAccess(token, f"ssh -p 2222 {token}@{self.ip}")

    async def revoke_ssh_access(self, token: str, request_timeout: float | None = None) -> None:
        self.ssh_tokens.discard(token)

    async def delete(self, timeout: float | None = 60, wait: bool = False) -> None:
        self.deleted = True
        self.kill()

    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [run.proc for runs in self.process.sessions.values() for run in runs.values()]

    def kill(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in self.processes():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
            for proc in self.processes():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)


class _AsyncDaytona:
    def __init__(self, fake: FakeDaytona, config: Any = None) -> None:
        self._fake = fake
        fake.configs.append(config)

    async def create(
        self,
        params: CreateSandboxFromImageParams | None = None,
        *,
        timeout: float = 60,
        on_snapshot_create_logs: Any = None,
    ) -> FakeSandbox:
        if not isinstance(params, CreateSandboxFromImageParams):
            raise TypeError(f"params must be CreateSandboxFromImageParams, got {params!r}")
        sandbox = FakeSandbox(params)
        self._fake.sandboxes.append(sandbox)
        return sandbox


class FakeDaytona:
    """Module-like stand-in for ``daytona``."""

    Resources = Resources
    CreateSandboxFromImageParams = CreateSandboxFromImageParams
    SessionExecuteRequest = SessionExecuteRequest

    def __init__(self) -> None:
        self.sandboxes: list[FakeSandbox] = []
        self.configs: list[Any] = []

    def AsyncDaytona(self, config: Any = None) -> _AsyncDaytona:  # the SDK's class name
        return _AsyncDaytona(self, config)
