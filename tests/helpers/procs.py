"""/proc helpers the process-leak tests share (Linux only, like those tests)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from pytest_hud.plumbing.process import Child, child_env
from pytest_hud.runtime.server import ANNOUNCE as SERVER_ANNOUNCE


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is dead for our purposes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def live_children_of(pid: int) -> set[int]:
    """Live (non-zombie) children of ``pid``."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == str(pid) and fields[0] != "Z":
                out.add(int(stat.parent.name))
    return out


def tcp_sockets(pid: int | None = None) -> set[tuple[str, str]]:
    """The TCP sockets ``pid`` (default: this process) holds open, as (local address,
    state) from /proc/net/tcp{,6}: listening ports ("0A") and connections alike."""
    pid = os.getpid() if pid is None else pid
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    found.add((fields[1], fields[3]))
    return found


#: the env module the hardening and auth tests serve
COUNTER = Path(__file__).resolve().parent / "envs" / "counter_env.py"


@contextlib.asynccontextmanager
async def env_server(**env: str) -> AsyncIterator[Child]:
    """A real env server (``python -m pytest_hud.serve``) serving the counter env module,
    with this process's environment (its secret, as every launcher passes it) plus ``env``."""
    argv = [sys.executable, "-m", "pytest_hud.serve", str(COUNTER), "--lifeline"]
    child = await Child.spawn(
        argv, announce=SERVER_ANNOUNCE, timeout=120, what="env server", env=child_env(**env)
    )
    try:
        yield child
    finally:
        await child.terminate()


Peers = list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]


@contextlib.asynccontextmanager
async def raw_peers(port: int, count: int) -> AsyncIterator[Peers]:
    """``count`` raw TCP connections to 127.0.0.1:``port``, opened one after another; every
    one opened is closed on exit, whatever happened."""
    peers: Peers = []
    try:
        for _ in range(count):
            peers.append(await asyncio.open_connection("127.0.0.1", port))
        yield peers
    finally:
        for _, writer in peers:
            writer.close()


def probed(token: str, name: str = "HUD_LEAK_PROBE") -> list[int]:
    """Pids of live (non-zombie) processes whose environment carries ``name=token``: what a
    session started with the probe in its environment left running."""
    found = []
    needle = f"{name}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(entry.name))
    return found
