"""A watchdog process that outlives its owner: told which process groups, which processes (by a
string in their command line) and which folders the owner holds, it removes them once the owner
is gone, however it went (SIGKILL, a second Ctrl-C in its teardown, xdist killing a worker
whose teardown passed its 10 s), unless the owner released it after cleaning up itself.

For what the owner starts detached on purpose, so that no lifeline or ``PR_SET_PDEATHSIG``
can end it: a Ray head's daemons outlive the ``ray start`` that launched them, and its GCS
server and autoscaler monitor ignore SIGTERM and SIGINT. The watchdog runs in a session of its
own (a Ctrl-C at the terminal or a signal to the owner's group does not reach it), learns of
the owner's death from a pidfd and from its stdin's end, and runs this file as a script with
``python -I``: the standard library only, nothing of the owner's environment on its path.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Reaper", "reap", "targets"]

#: seconds the reaped get between SIGTERM and SIGKILL; SIGKILL's own bound
TERM_GRACE, KILL_GRACE = 2.0, 10.0
#: the bound on the whole reaping (new processes a dying group spawns are taken too)
REAP_BOUND = 30.0


class Reaper:
    """The owner's end: :meth:`guard` what must not outlive this process, :meth:`release`
    once it cleaned up itself (the watchdog then exits without touching anything)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve()), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def guard(
        self, *, group: int | None = None, match: str | None = None, folder: str | None = None
    ) -> None:
        """Add a process group, a command-line substring, or a folder to what is reaped."""
        order = {"group": group, "match": match, "folder": folder}
        self._send({k: v for k, v in order.items() if v is not None})

    def release(self, timeout: float = 10.0) -> None:
        """The owner cleaned up: the watchdog exits without reaping (bounded wait)."""
        self._send({"release": True})
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def _send(self, order: dict[str, object]) -> None:
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return
        with contextlib.suppress(OSError, ValueError):
            stdin.write(json.dumps(order).encode() + b"\n")
            stdin.flush()


def _stat(pid: str) -> tuple[str, int] | None:
    """(state, process group) of ``pid``; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2])


def targets(groups: set[int], matches: list[str]) -> list[int]:
    """Live processes in ``groups`` or with one of ``matches`` in their command line."""
    found = []
    needles = [m.encode() for m in matches]
    for entry in Path("/proc").glob("[0-9]*"):
        if int(entry.name) == os.getpid():
            continue
        stat = _stat(entry.name)
        if stat is None or stat[0] in "ZX":
            continue
        if stat[1] in groups:
            found.append(int(entry.name))
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            if any(n in cmdline for n in needles):
                found.append(int(entry.name))
    return found


def reap(
    groups: set[int], matches: list[str], folders: list[str], term_grace: float = TERM_GRACE
) -> list[int]:
    """SIGTERM, then SIGKILL after ``term_grace``, what :func:`targets` finds (again until
    none is left, bounded), then remove ``folders``; the pids still alive at the bound."""
    deadline = time.monotonic() + REAP_BOUND
    left = targets(groups, matches)
    while left and time.monotonic() < deadline:
        for sig, grace in ((signal.SIGTERM, term_grace), (signal.SIGKILL, KILL_GRACE)):
            for group in groups:
                with contextlib.suppress(OSError):
                    os.killpg(group, sig)
            for pid in targets(groups, matches):
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
            until = min(deadline, time.monotonic() + grace)
            while targets(groups, matches) and time.monotonic() < until:
                time.sleep(0.1)
        left = targets(groups, matches)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return left


class _Orders:
    """What the owner asked to be reaped, from its order lines."""

    def __init__(self) -> None:
        self.groups: set[int] = set()
        self.matches: list[str] = []
        self.folders: list[str] = []
        self.released = False
        self._buffer = b""

    def take(self, chunk: bytes) -> None:
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")  # a cut last line: never sent whole
        for line in lines:
            order = json.loads(line)
            self.released = self.released or bool(order.get("release"))
            if "group" in order:
                self.groups.add(int(order["group"]))
            if "match" in order:
                self.matches.append(str(order["match"]))
            if "folder" in order:
                self.folders.append(str(order["folder"]))


def _pending(fd: int) -> bytes:
    """What is left to read in the pipe ``fd`` now, without waiting."""
    os.set_blocking(fd, False)
    out = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            out += chunk
    return out


def _watch(owner: int) -> None:
    """The watchdog's loop: read orders until released (exit) or the owner is gone (reap).
    The owner's death can be seen before the orders it sent just before (a loaded machine
    runs this process late: it may start after the owner died): those are still in the
    pipe, and read before reaping."""
    orders = _Orders()
    stdin = sys.stdin.fileno()
    sel = selectors.DefaultSelector()
    sel.register(stdin, selectors.EVENT_READ, "orders")
    pidfd = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(owner)
        sel.register(pidfd, selectors.EVENT_READ, "owner")
    while os.getppid() == owner or pidfd is not None:
        events = sel.select(timeout=None if pidfd is not None else 1.0)
        if any(key.data == "owner" for key, _ in events):
            break
        if not events:
            continue
        chunk = os.read(stdin, 65536)
        if not chunk:
            break
        orders.take(chunk)
        if orders.released:
            return
    orders.take(_pending(stdin))
    if not orders.released:
        reap(orders.groups, orders.matches, orders.folders)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # in a session of its own; never Ctrl-C'd
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the reaping itself must finish
    _watch(int(sys.argv[1]))
