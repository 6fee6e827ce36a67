"""A fake of the Modal SDK surface ModalRuntime uses, backed by real local processes.

Modal's cloud cannot be reached from this machine, so ``FakeModal()`` stands in for
the ``modal`` module, covering exactly these calls (signatures as in modal 1.6):

- ``App.lookup.aio(name, *, create_if_missing=False)``
- ``Image.from_registry(tag)`` (a builder, sync as in the SDK)
- ``Sandbox.create.aio(*args, app=, image=, env=, secrets=, timeout=, gpu=, cpu=,
  memory=, unencrypted_ports=)``; no ``args`` runs the image's CMD
- ``sandbox.object_id``, ``sandbox.tunnels.aio(timeout=50) -> {port: Tunnel}`` with
  ``Tunnel.tcp_socket``, ``sandbox.poll.aio()``, ``sandbox.terminate.aio()``,
  ``sandbox.stdout.read.aio()`` / ``sandbox.stderr.read.aio()``

Every SDK call is offered only as ``.aio``; calling it directly raises, so a blocking
call in ModalRuntime fails loudly. A sandbox is a real process: its command runs
locally (``python`` is this interpreter). Its network namespace is a loopback
address of its own (``127.77.N.1``): ``0.0.0.0`` in its command means that address,
so every sandbox binds the literal ports 8000, 8001, ... like a container would.
Each unencrypted port gets a real TCP forwarder on another loopback host
(``127.78.N.K``, a random port), like Modal's tunnels: each tunnel has its own host
and port, and it accepts connections before the server listens (then drops them).
``terminate()`` stops the whole "container": SIGTERM, then SIGKILL to every process
started in it (found by a marker in their environment). The sandbox ``timeout`` is
recorded, not enforced.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_ssh import pipe

ROOT = Path(__file__).resolve().parents[2]
MARKER = "PYTEST_HUD_FAKE_MODAL_SANDBOX"
# Sandbox numbers start at a per-process offset: two pytest-xdist workers each running
# fakes must not hand out the same loopback address (every sandbox binds port 8000).
_ids = itertools.count(1 + 37 * (os.getpid() % 1000))


class BlockingCallError(RuntimeError):
    """ModalRuntime called a blocking SDK method instead of its ``.aio`` variant."""


class _AioOnly:
    """A Modal method as synchronicity wraps it, minus the blocking variant."""

    def __init__(self, name: str, fn: Callable[..., Awaitable[Any]]) -> None:
        self.name = name
        self.aio = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise BlockingCallError(f"{self.name}() blocks the event loop; call {self.name}.aio()")


@dataclass(frozen=True)
class Tunnel:
    host: str
    port: int
    unencrypted_host: str
    unencrypted_port: int

    @property
    def tcp_socket(self) -> tuple[str, int]:
        if not self.unencrypted_host:
            raise ValueError("not an unencrypted tunnel")
        return (self.unencrypted_host, self.unencrypted_port)


@dataclass(frozen=True)
class FakeApp:
    name: str


@dataclass(frozen=True)
class FakeImage:
    tag: str
    cmd: tuple[str, ...] = ()


class _Stream:
    """A sandbox's stdout or stderr: drained as it comes (Modal buffers it server-side)."""

    def __init__(self, name: str, pipe: Any) -> None:
        self.chunks: list[str] = []
        self._thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True)
        self._thread.start()
        self.read = _AioOnly(f"Sandbox.{name}.read", self._read)

    def _drain(self, pipe: Any) -> None:
        with contextlib.suppress(Exception), pipe:
            for chunk in iter(lambda: pipe.read1(65536), b""):
                self.chunks.append(chunk.decode(errors="replace"))

    async def _read(self) -> str:
        """Everything until EOF (the sandbox's end), as the SDK's StreamReader.read()."""
        while self._thread.is_alive():
            await asyncio.sleep(0.05)
        return "".join(self.chunks)


class FakeSandbox:
    def __init__(self, fake: FakeModal, argv: list[str], env: dict[str, str], ports: list[int]):
        n = next(_ids)
        # the pid too: another xdist worker's fake numbers its sandboxes from the same
        # counter, and a test's teardown must see its own sandboxes' processes only
        self.object_id = f"sb-fake{os.getpid()}-{n:04d}"
        self.ip = f"127.77.{n % 250 + 1}.1"
        self._tunnel_net = f"127.78.{n % 250 + 1}"
        self.argv = [sys.executable if a == "python" else a for a in argv]
        self.argv = [self.ip if a == "0.0.0.0" else a for a in self.argv]
        self.ports = ports
        self.terminated = False
        self.tunnel_map: dict[int, Tunnel] = {}
        self._servers: list[asyncio.Server] = []
        self._links: set[asyncio.StreamWriter] = set()
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,  # Modal's sandbox.stdin: open until the end
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env, MARKER: self.object_id},
            start_new_session=True,
        )
        self.stdout = _Stream("stdout", self.proc.stdout)
        self.stderr = _Stream("stderr", self.proc.stderr)
        self.tunnels = _AioOnly("Sandbox.tunnels", self._tunnels)
        self.poll = _AioOnly("Sandbox.poll", self._poll)
        self.terminate = _AioOnly("Sandbox.terminate", self._terminate)

    async def _open_tunnels(self) -> None:
        for k, port in enumerate(self.ports, start=1):
            host = f"{self._tunnel_net}.{k}"
            server = await asyncio.start_server(
                lambda r, w, port=port: self._link(r, w, port), host, 0
            )
            self._servers.append(server)
            bound = server.sockets[0].getsockname()[1]
            self.tunnel_map[port] = Tunnel(host, 443, host, bound)

    async def _link(self, reader: asyncio.StreamReader, writer: Any, port: int) -> None:
        self._links.add(writer)
        try:
            try:
                up_reader, up_writer = await asyncio.open_connection(self.ip, port)
            except OSError:  # nothing listens yet: the tunnel accepts, then hangs up
                return
            self._links.add(up_writer)

            try:
                await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
            finally:
                up_writer.close()
                self._links.discard(up_writer)
        finally:
            writer.close()
            self._links.discard(writer)

    async def _tunnels(self, timeout: int = 50) -> dict[int, Tunnel]:
        return dict(self.tunnel_map)

    async def _poll(self) -> int | None:
        return self.proc.poll()

    async def _terminate(self) -> None:
        self.terminated = True
        for server in self._servers:
            server.close()
        for link in list(self._links):  # drop the tunnels' open connections
            link.transport.abort()
        with contextlib.suppress(Exception):
            self.proc.stdin.close()  # type: ignore[union-attr]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        for _ in range(100):  # the server stops its sims on SIGTERM
            if self.proc.poll() is not None and not live_processes(self.object_id):
                return
            await asyncio.sleep(0.05)
        for pid in [self.proc.pid, *live_processes(self.object_id)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            if self.proc.poll() is not None and not live_processes(self.object_id):
                return
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """Test cleanup: SIGKILL whatever is left of this sandbox."""
        for pid in [self.proc.pid, *live_processes(self.object_id)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(5)


def live_processes(sandbox_id: str | None = None) -> list[int]:
    """Pids of live processes started inside a fake sandbox (any, or ``sandbox_id``)."""
    needle = f"{MARKER}={sandbox_id}\0" if sandbox_id else f"{MARKER}="
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and needle.encode() in (proc / "environ").read_bytes():
                pids.append(int(proc.name))
    return pids


class _AppApi:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake
        self.lookup = _AioOnly("App.lookup", self._lookup)

    async def _lookup(self, name: str, *, create_if_missing: bool = False) -> FakeApp:
        if name not in self._fake.apps:
            if not create_if_missing:
                raise LookupError(f"App {name!r} not found")
            self._fake.apps[name] = FakeApp(name)
        return self._fake.apps[name]


class _ImageApi:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake

    def from_registry(self, tag: str) -> FakeImage:
        return FakeImage(tag, tuple(self._fake.registry.get(tag, ())))


class _SandboxApi:
    def __init__(self, fake: FakeModal) -> None:
        self._fake = fake
        self.create = _AioOnly("Sandbox.create", self._create)

    async def _create(
        self,
        *args: str,
        app: FakeApp | None = None,
        image: FakeImage | None = None,
        env: dict[str, str | None] | None = None,
        secrets: list[Any] | None = None,
        timeout: int | None = 300,
        gpu: str | None = None,
        cpu: float | None = None,
        memory: int | None = None,
        unencrypted_ports: list[int] = [],  # noqa: B006 - as the SDK declares it
    ) -> FakeSandbox:
        if not isinstance(app, FakeApp):
            raise TypeError(f"app must come from App.lookup, got {app!r}")
        if not isinstance(image, FakeImage):
            raise TypeError(f"image must be a modal.Image, got {image!r}")
        if not all(isinstance(a, str) for a in args):
            raise TypeError(f"the command must be strings, got {args!r}")
        for name, value, kind in (
            ("timeout", timeout, int),
            ("memory", memory, int),
            ("cpu", cpu, float),
            ("gpu", gpu, str),
        ):
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"{name} must be {kind.__name__}, got {value!r}")
        argv = list(args) or list(image.cmd)
        if not argv:
            raise ValueError(f"no command and image {image.tag!r} has no CMD")
        self._fake.creates.append(
            {
                "args": list(args),
                "app": app,
                "image": image,
                "env": env,
                "secrets": secrets,
                "timeout": timeout,
                "gpu": gpu,
                "cpu": cpu,
                "memory": memory,
                "unencrypted_ports": list(unencrypted_ports),
            }
        )
        clean_env = {k: v for k, v in (env or {}).items() if v is not None}
        sandbox = FakeSandbox(self._fake, argv, clean_env, list(unencrypted_ports))
        self._fake.sandboxes.append(sandbox)
        try:
            await sandbox._open_tunnels()
        except BaseException:
            await sandbox._terminate()
            raise
        return sandbox


class FakeModal:
    """Module-like stand-in for ``modal``: ``App``, ``Image``, ``Sandbox``."""

    def __init__(self, registry: dict[str, list[str]] | None = None) -> None:
        self.registry = dict(registry or {})  # tag -> the image's CMD
        self.apps: dict[str, FakeApp] = {}
        self.creates: list[dict[str, Any]] = []
        self.sandboxes: list[FakeSandbox] = []
        self.App = _AppApi(self)
        self.Image = _ImageApi(self)
        self.Sandbox = _SandboxApi(self)
