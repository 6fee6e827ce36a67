"""Ask a zygote for a ``python -m MODULE`` child. :func:`spawn` returns None whenever the caller
should spawn plainly (fork off, refused, zygote dead or silent): nothing waits forever.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_hud.forkserver.zygote import FOLDER_PREFIX, VOLATILE

__all__ = [
    "ADDRESS",
    "PRELOAD",
    "SWITCH",
    "ForkedProcess",
    "borrow_only",
    "enabled",
    "shutdown",
    "spawn",
    "zygotes",
]

SWITCH = "PYTEST_HUD_FORK"
ADDRESS = "PYTEST_HUD_FORKSERVER"
PRELOAD = "PYTEST_HUD_FORK_PRELOAD"

#: Zygotes one process may own (one per distinct environment); past that, plain spawns.
MAX_ZYGOTES = 3
BOOT_TIMEOUT = 120.0
REPLY_TIMEOUT = 30.0
STOP_TIMEOUT = 2.0
#: Return code of a forked child whose zygote died first (the status died with it).
UNKNOWN_EXIT = 255


def enabled() -> bool:
    """Fork is on (``PYTEST_HUD_FORK`` is not ``0``) and this platform can do it."""
    return (
        os.environ.get(SWITCH, "1") != "0"
        and hasattr(os, "pidfd_open")
        and hasattr(socket, "send_fds")
        and hasattr(socket, "SOCK_SEQPACKET")
    )


class _Refused(OSError):
    """The zygote would not fork this request (its reason is the message); ``deny``: the
    modules a new zygote must not learn (their import started a thread)."""

    def __init__(self, reason: str, deny: Sequence[str] = ()) -> None:
        super().__init__(reason)
        self.deny = list(deny)


class ForkedProcess:
    """A child a zygote forked for us: its pipes are ours, its exit status comes by message."""

    def __init__(
        self,
        pid: int,
        conn: socket.socket,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._conn = conn
        self._done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pidfd: int | None = None
        with contextlib.suppress(OSError):
            self._pidfd = os.pidfd_open(pid)
        self._watch = asyncio.ensure_future(self._watch_exit())

    async def wait(self) -> int:
        return await asyncio.shield(self._done)

    async def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        code = UNKNOWN_EXIT
        try:
            data = await loop.sock_recv(self._conn, 4096)
            if data:
                code = int(json.loads(data)["exit"])
            elif self._pidfd is not None:  # the zygote died: wait for the child itself
                gone: asyncio.Future[None] = loop.create_future()
                loop.add_reader(self._pidfd, _settle, gone)
                try:
                    await gone
                finally:
                    loop.remove_reader(self._pidfd)
        except (OSError, ValueError, KeyError):
            pass
        finally:
            self._conn.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
            self.returncode = code
            if not self._done.done():
                self._done.set_result(code)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Zygote:
    """One zygote this process owns: booted once (thread-safe), stopped at exit."""

    def __init__(self, key: Any, python: str, env: dict[str, str], cwd: str) -> None:
        self.key, self.python, self.env, self.cwd = key, python, env, cwd
        self.deny: list[str] = []
        self.dir = tempfile.mkdtemp(prefix=FOLDER_PREFIX)  # mode 0700: only us
        self.address = os.path.join(self.dir, "zygote.sock")
        self.log = os.path.join(self.dir, "zygote.log")
        self.popen: subprocess.Popen[bytes] | None = None
        self.failed: str | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def ensure(self, timeout: float = BOOT_TIMEOUT) -> str | None:
        """The zygote's address once it listens; None if it failed (now or before)."""
        with self._lock:
            if self.failed is None and self.popen is None:
                self._boot(timeout)
            if self.failed is None and self.popen is not None and self.popen.poll() is not None:
                self.failed = f"the zygote exited with code {self.popen.returncode}"
            return self.address if self.failed is None else None

    def _boot(self, timeout: float) -> None:
        argv = [self.python, "-m", "pytest_hud.forkserver.zygote", "--socket", self.address]
        argv += ["--preload", self.env.get(PRELOAD, ""), "--deny", ",".join(self.deny)]
        with open(self.log, "wb") as log:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.address):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.failed = f"the zygote did not start; its log:\n{self.log_tail()}"
                self._kill()
                return
            time.sleep(0.01)

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError), open(self.log, errors="replace") as f:
            return "".join(f.readlines()[-lines:]) or "(no output)"
        return "(no log)"

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Close the lifeline and wait up to ``timeout`` for the zygote to exit.

        It exits at once when it has no children; else once they exited (their own
        lifelines end them when their owners stop or die), SIGKILLing them past a bound
        (zygote.CHILD_GRACE). Not waiting longer here keeps this process's exit from
        waiting on children that end only because this process exits.
        """
        with self._lock:
            self.failed = self.failed or "stopped"
            popen = self.popen
            if popen is not None and popen.stdin is not None:
                with contextlib.suppress(OSError):
                    popen.stdin.close()
            if popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout)
            shutil.rmtree(self.dir, ignore_errors=True)

    def _kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


_zygotes: dict[tuple[object, ...], _Zygote] = {}
_deaths: dict[tuple[object, ...], int] = {}
_denied: dict[tuple[object, ...], set[str]] = {}
#: Zygotes of one environment that may die before that environment stops asking for more.
MAX_DEATHS = 3
_lock = threading.Lock()
_atexit = False
_may_own = True
#: Why this process's last request spawned plainly (diagnostics: tests and ``doctor``).
last_plain: str | None = None


def borrow_only() -> None:
    """Never boot a zygote in this process; fork only through one handed down in
    ``$PYTEST_HUD_FORKSERVER``. An env server (``python -m pytest_hud.serve``, in a
    container or a subprocess) spawns its sims once per substrate: a zygote of its own
    would cost one more interpreter boot and save nothing."""
    global _may_own
    _may_own = False


def zygotes() -> list[_Zygote]:
    """The zygotes this process owns (for tests and diagnostics)."""
    with _lock:
        return list(_zygotes.values())


def _owned(python: str, env: dict[str, str], cwd: str) -> _Zygote | None:
    global _atexit
    # not PYTHONPATH: a new test directory on it is fine (the zygote checks what it shadows)
    key = (python, tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE)))
    with _lock:
        zygote = _zygotes.get(key)
        if zygote is None:
            if len(_zygotes) >= MAX_ZYGOTES or not _may_own or _deaths.get(key, 0) >= MAX_DEATHS:
                return None
            boot_env = {k: v for k, v in env.items() if k not in VOLATILE - {"PYTHONPATH"}}
            zygote = _zygotes[key] = _Zygote(key, python, boot_env, cwd)
            zygote.deny = sorted(_denied.get(key, ()))
            if not _atexit:
                atexit.register(shutdown)
                _atexit = True
    return zygote


def _dead(zygote: _Zygote) -> None:
    """Forget a zygote that died or never started: the next spawn boots a new one (up to
    :data:`MAX_DEATHS` per environment); this one spawns plainly."""
    with _lock:
        if _zygotes.get(zygote.key) is zygote:
            del _zygotes[zygote.key]
            _deaths[zygote.key] = _deaths.get(zygote.key, 0) + 1
    zygote.stop(timeout=0.0)


def shutdown() -> None:
    """Stop every zygote this process owns (their children exit by their own lifelines)."""
    with _lock:
        owned = list(_zygotes.values())
        _zygotes.clear()
    for zygote in owned:
        zygote.stop()


def shutdown_new(before: Iterable[_Zygote]) -> None:
    """Stop the zygotes booted since ``before`` (a :func:`zygotes` snapshot): a caller that
    ran one evaluation in its process gets back the processes it had."""
    kept = {id(z) for z in before}
    with _lock:
        new = [z for z in _zygotes.values() if id(z) not in kept]
        for zygote in new:
            del _zygotes[zygote.key]
    for zygote in new:
        zygote.stop()


def _forget_after_fork() -> None:
    """A forked copy of this process owns nothing: the zygotes stay its parent's."""
    global _lock
    _lock = threading.Lock()
    _zygotes.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _plain(why: str) -> None:
    global last_plain
    last_plain = why


async def spawn(argv: Sequence[str], env: dict[str, str]) -> ForkedProcess | None:
    """``argv`` (``[python, "-m", module, *args]``) forked with ``env``; None: spawn plainly
    (why: :data:`last_plain`)."""
    if not enabled() or len(argv) < 3 or argv[1] != "-m":
        _plain("fork is off or the command is not python -m MODULE")
        return None
    python, module, args = argv[0], argv[2], list(argv[3:])
    cwd = os.getcwd()
    zygote: _Zygote | None = None
    address = os.environ.get(ADDRESS)
    if address is None:
        zygote = _owned(python, env, cwd)
        if zygote is None:
            _plain("no zygote may be owned here (borrow-only, too many, or too many deaths)")
            return None
        address = await asyncio.to_thread(zygote.ensure)
        if address is None:
            _plain(f"the zygote failed: {zygote.failed}")
            await asyncio.to_thread(_dead, zygote)
            return None
    request = {"python": python, "module": module, "args": args, "cwd": cwd}
    request["env"] = {**env, ADDRESS: address}  # type: ignore[assignment]
    try:
        return await _request(address, request)
    except _Refused as exc:  # this request only (its path shadows a preloaded module)
        _plain(f"refused: {exc}")
        if zygote is not None and exc.deny:  # replace it by one that will not learn those
            zygote.failed = f"refused: {exc}"
            with _lock:
                _denied.setdefault(zygote.key, set()).update(exc.deny)
            await asyncio.to_thread(_dead, zygote)
        return None
    except (OSError, TimeoutError, ValueError, KeyError) as exc:
        _plain(f"the request failed: {type(exc).__name__}: {exc}")
        if zygote is not None and zygote.popen is not None and zygote.popen.poll() is not None:
            await asyncio.to_thread(_dead, zygote)
        return None


async def _request(address: str, request: dict[str, Any]) -> ForkedProcess:
    loop = asyncio.get_running_loop()
    child_in, our_in = os.pipe()
    our_out, child_out = os.pipe()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours = [our_in, our_out]
    try:
        conn.setblocking(False)
        async with asyncio.timeout(REPLY_TIMEOUT):
            await loop.sock_connect(conn, address)
            socket.send_fds(conn, [json.dumps(request).encode()], [child_in, child_out])
            os.close(child_in)
            os.close(child_out)
            child_in = child_out = -1
            reply = json.loads(await loop.sock_recv(conn, 65536) or b"{}")
        if "pid" not in reply:
            why = reply.get("refused", "the zygote hung up without an answer")
            raise _Refused(why, reply.get("deny", ()))
        stdout = asyncio.StreamReader(limit=1 << 20)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(our_out, "rb", 0)
        )
        ours.remove(our_out)
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(our_in, "wb", 0)
        )
        ours.remove(our_in)
        stdin = asyncio.StreamWriter(transport, protocol, None, loop)
        return ForkedProcess(int(reply["pid"]), conn, stdin, stdout)
    except BaseException:
        conn.close()
        for fd in (child_in, child_out, *ours):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        raise
