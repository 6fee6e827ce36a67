"""The zygote: a clean, pre-imported interpreter that forks ``python -m MODULE`` children over a
Unix socket. It forks only while single-threaded and exits when its stdin lifeline closes.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import io
import json
import os
import runpy
import selectors
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from pytest_hud.forkserver.learn import import_learned, learnable, read_report, write_report

__all__ = ["BASE_PRELOAD", "FOLDER_PREFIX", "VOLATILE", "compatible", "main"]

#: What every zygote imports: the sim program, the gym bridge and the env server.
BASE_PRELOAD = ("pytest_hud.robot.sim.program", "pytest_hud.robot.sim.gym", "pytest_hud.serve")

#: A zygote's socket and log live in a folder so named; the zygote removes it on exit.
FOLDER_PREFIX = "pytest-hud-zygote-"

#: Variables that differ between requests without changing what an import would do.
VOLATILE = frozenset(
    {
        "PYTEST_CURRENT_TEST",
        "PYTEST_HUD_SIM_HOST",
        "PYTEST_HUD_SIM_PORT",
        "PYTEST_HUD_FORKSERVER",
        "PYTEST_HUD_FORK",
        "PYTHONPATH",
    }
)

#: How long the zygote waits for its children after its lifeline closed, then SIGKILL.
CHILD_GRACE = 20.0


def path_entries(pythonpath: str | None) -> list[str]:
    return [os.path.abspath(p) for p in (pythonpath or "").split(os.pathsep) if p]


def compatible(
    env: dict[str, str],
    cwd: str,
    own_env: dict[str, str],
    own_path: list[str],
    loaded: set[str],
) -> str | None:
    """None when a child with ``env`` (in ``cwd``) imports what this zygote imported, else
    why not: the same variables (but :data:`VOLATILE`), and no path entry of the child's
    (its cwd first, as ``-m`` puts it, then PYTHONPATH) that the zygote lacks may provide
    a top-level module the zygote has ``loaded`` (it would have shadowed ours). A test
    directory or a project's own folder on the path is fine; another checkout of a
    preloaded package, or a zip, is not."""
    mine = {k: v for k, v in own_env.items() if k not in VOLATILE}
    theirs = {k: v for k, v in env.items() if k not in VOLATILE}
    if mine != theirs:
        differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        return f"environment differs in {', '.join(differ[:5])}"
    known = {os.path.abspath(p) for p in own_path}
    for entry in dict.fromkeys([os.path.abspath(cwd), *path_entries(env.get("PYTHONPATH"))]):
        if entry in known or not os.path.exists(entry):
            continue
        if not os.path.isdir(entry):
            return f"PYTHONPATH names {entry}, which is not a directory the zygote can check"
        try:
            shadow = {name.split(".")[0] for name in os.listdir(entry)} & loaded
        except OSError as exc:
            return f"cannot list {entry}: {exc}"
        if shadow:
            return f"{entry} provides {sorted(shadow)[:3]}, which the zygote imported elsewhere"
    return None


@dataclass
class _Pending:
    pid: int
    conn: socket.socket
    pidfd: int
    learn_fd: int  # the child reports the library modules it imported here (learn.py)


@dataclass
class _Zygote:
    listener: socket.socket
    own_env: dict[str, str]
    base_path: list[str]
    sel: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    children: dict[int, _Pending] = field(default_factory=dict)  # by pidfd
    fresh: list[socket.socket] = field(default_factory=list)  # accepted, no request yet
    closing: bool = False
    deny: frozenset[str] = frozenset()
    tried: set[str] = field(default_factory=set)
    tainted: str | None = None  # a learned import started a thread: fork no more

    def serve(self) -> None:
        self.sel.register(0, selectors.EVENT_READ, "lifeline")
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        deadline: float | None = None
        while True:
            if deadline is not None and (not self.children or time.monotonic() > deadline):
                break
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            for key, _ in self.sel.select(timeout):
                what = key.data
                if what == "lifeline":
                    if not os.read(0, 4096):
                        self.sel.unregister(0)
                        self.sel.unregister(self.listener)
                        self.listener.close()
                        self.closing = True
                        deadline = time.monotonic() + CHILD_GRACE
                elif what == "accept":
                    conn, _ = self.listener.accept()
                    self.fresh.append(conn)
                    self.sel.register(conn, selectors.EVENT_READ, "request")
                elif what == "request":
                    self._request(key.fileobj)  # type: ignore[arg-type]
                else:
                    self._reap(what)
        for pending in list(self.children.values()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pending.pid, signal.SIGKILL)
            self._reap(pending)

    def _request(self, conn: socket.socket) -> None:
        self.sel.unregister(conn)
        self.fresh.remove(conn)
        try:
            data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
        except OSError:
            conn.close()
            return
        try:
            if len(fds) != 2 or not data:
                raise ValueError(f"expected a request and 2 fds, got {len(data)} bytes, {fds}")
            request = json.loads(data)
            loaded = {name.partition(".")[0] for name in sys.modules}
            why = compatible(request["env"], request["cwd"], self.own_env, sys.path, loaded)
            if why is None and not _same_file(request["python"], sys.executable):
                why = f"{request['python']} is not this zygote's interpreter {sys.executable}"
            if why is None and self.closing:
                why = "the zygote is shutting down"
            if why is None and self.tainted is not None:
                _send(
                    conn,
                    {
                        "refused": f"importing {self.tainted} started a thread",
                        "deny": [self.tainted],
                    },
                )
                conn.close()
                return
            if why is None and threading.active_count() > 1:
                why = f"{threading.active_count()} Python threads run in the zygote"
            if why is not None:
                _send(conn, {"refused": why})
                conn.close()
                return
            pid, learn_fd = self._fork(request, fds, conn)
        except Exception as exc:  # a malformed request must not end the zygote
            with contextlib.suppress(OSError):
                _send(conn, {"refused": f"{type(exc).__name__}: {exc}"})
            conn.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = _Pending(pid, conn, pidfd, learn_fd)
        self.sel.register(pidfd, selectors.EVENT_READ, self.children[pidfd])
        _send(conn, {"pid": pid})

    def _fork(
        self, request: dict[str, object], fds: list[int], conn: socket.socket
    ) -> tuple[int, int]:
        ready_r, ready_w = os.pipe()
        learn_r, learn_w = os.pipe()
        modules = set(sys.modules)
        for stream in (sys.stdout, sys.stderr):  # else a child would flush our buffered text
            stream.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child (measured by the tests' effects)
            try:
                os.setsid()
                os.close(ready_r)
                os.close(learn_r)
                os.dup2(fds[0], 0)
                os.dup2(fds[1], 1)
                os.dup2(fds[1], 2)
                self._drop_zygote(conn, fds)
                os.close(ready_w)
                code = _run_child(request, self.base_path)
                write_report(learn_w, learnable(modules, self.deny))
            except BaseException:
                traceback.print_exc()
                code = 70
            _exit(code)
        os.close(ready_w)
        os.close(learn_w)
        os.read(ready_r, 1)  # returns b"" once the child is in its own session (or died)
        os.close(ready_r)
        return pid, learn_r

    def _drop_zygote(self, conn: socket.socket, fds: list[int]) -> None:
        """In the child: close every descriptor the zygote held (objects, not fd ranges:
        a stale object closing a reused fd number later would break the child)."""
        for fd in fds:
            os.close(fd)
        fds.clear()
        self.sel.close()
        with contextlib.suppress(OSError):
            self.listener.close()
        conn.close()
        for other in self.fresh:
            other.close()
        for pending in self.children.values():
            pending.conn.close()
            os.close(pending.pidfd)
            os.close(pending.learn_fd)
        self.children.clear()

    def _reap(self, pending: _Pending) -> None:
        _, status = os.waitpid(pending.pid, 0)
        with contextlib.suppress(OSError):
            _send(pending.conn, {"exit": os.waitstatus_to_exitcode(status)})
        pending.conn.close()
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(pending.pidfd)
        os.close(pending.pidfd)
        self.children.pop(pending.pidfd, None)
        names = read_report(pending.learn_fd)
        os.close(pending.learn_fd)
        if not self.closing and self.tainted is None:
            self.tainted = import_learned(names, self.deny, self.tried)


def _same_file(a: str, b: str) -> bool:
    """The same interpreter path (not the same file: two venvs link one python binary)."""
    return os.path.abspath(a) == os.path.abspath(b)


def _send(conn: socket.socket, message: dict[str, object]) -> None:
    conn.settimeout(5.0)  # a requester that stopped reading must not wedge the zygote
    conn.sendall(json.dumps(message).encode())


def _stdio() -> None:
    """Fresh sys.std* on fds 0-2, unbuffered as PYTHONUNBUFFERED=1 children are."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    setattr(sys, "__stdin__", sys.stdin)  # noqa: B010 (mypy: a Final name)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        raw = open(fd, "wb", buffering=0, closefd=False)  # noqa: SIM115
        stream = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),
            write_through=unbuffered,
            line_buffering=not unbuffered or name == "stderr",
            errors="backslashreplace" if name == "stderr" else "strict",
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_child(request: dict[str, Any], base_path: list[str]) -> int:
    """Become ``python -m MODULE ARGS``; returns the exit code that process would have."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(request["env"])
    cwd = request["cwd"]
    os.chdir(cwd)
    sys.path[:] = list(
        dict.fromkeys([cwd, *path_entries(request["env"].get("PYTHONPATH")), *base_path])
    )
    _stdio()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # type: ignore[attr-defined]
    sys.argv = [request["module"], *request["args"]]
    _name_process(f"hud {request['module'].rsplit('.', 1)[-1]}")
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    return code


def _name_process(name: str) -> None:
    """Name the child in ``ps -o comm``/``top`` (its cmdline stays the zygote's)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_name = 15
        ctypes.CDLL(None).prctl(pr_set_name, name.encode()[:15], 0, 0, 0)


def _exit(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code & 0xFF)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pytest_hud.forkserver.zygote")
    parser.add_argument("--socket", required=True, help="where to listen (a path)")
    parser.add_argument("--preload", default="", help="more modules to import, comma-separated")
    parser.add_argument("--deny", default="", help="modules never to learn, comma-separated")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the owner stops us (lifeline), not Ctrl-C
    # what requests must match: the environment we were started with, not what a preloaded
    # import set in it (gymnasium sets PYGAME_HIDE_SUPPORT_PROMPT); a child runs in its
    # request's environment either way
    boot_env = dict(os.environ)
    given = set(path_entries(os.environ.get("PYTHONPATH")))
    base_path = [p for p in sys.path[1:] if os.path.abspath(p) not in given]
    for name in [*BASE_PRELOAD, *filter(None, args.preload.split(","))]:
        try:
            importlib.import_module(name)
        except Exception:
            print(f"pytest-hud zygote: could not preload {name}:", file=sys.stderr)
            traceback.print_exc()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(args.socket + ".tmp")
    listener.listen(64)
    os.rename(args.socket + ".tmp", args.socket)  # a client sees the path only once we listen
    deny = frozenset(filter(None, args.deny.split(",")))
    _Zygote(listener, boot_env, base_path, deny=deny).serve()
    # The lifeline ended: the owner is done or died (SIGKILL runs none of its cleanup).
    folder = os.path.dirname(os.path.abspath(args.socket))
    if os.path.basename(folder).startswith(FOLDER_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
