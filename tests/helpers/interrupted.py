"""Interrupt a real pytest-hud session when a named phase is reached, and list what it left.

Shared by tests/e2e/test_interrupts_runtimes.py (one moment a runtime, in CI) and
bench/interrupts.py (many random moments). A :class:`Session` runs pytest over the rows of
tests/helpers/envs/interrupt_env.py (``quick`` rows that finish, ``endless`` rows that step
until interrupted) in a folder of its own. Every process it starts carries a probe token in
its environment (``HUD_LEAK_PROBE``; Ray's daemons inherit it too), its containers carry the
same token as their session label (``PYTEST_HUD_SESSION``), and its ``TMPDIR`` is a short
folder of the run's own (``XDG_RUNTIME_DIR`` unset: pytest-hud's private folder is in it
too), so what :meth:`Session.leftovers` finds there is the session's and nobody else's.
Phases are events, never sleeps: a line the session prints, a marker file, a ledger line.

A :class:`HandServer` is a server started by hand beside the sessions (an env server for
``--hud-runtime=tcp://``, a policy server for ``--hud-agent=openpi:``): it must outlive the
interrupted session, drop the session's connections, and leave nothing when stopped itself.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from paths import ENVS, ROOT
from procs import tcp_sockets
from waiting import wait_for

ENV = ENVS / "interrupt_env.py"
PROBE = "HUD_LEAK_PROBE"
#: seconds a session gets to exit after its last signal: xdist's teardown (10 s), a Ray
#: head's stop (5 s SIGTERM grace, then SIGKILL), containers' removal, on a loaded machine
EXIT_BOUND = 180.0
#: seconds what the session started gets to be gone once it exited: a child's lifeline
#: (15 s past a wedged teardown), the Ray watchdog (30 s at most), the engine's removals
GONE_BOUND = 90.0
#: what pytest-hud keeps in its private folder across sessions (empty between them): the
#: token files' folders of servers started by hand (``serve``, ``policy``: plumbing/auth.py's
#: token_file), models, Docker create intents, robot locks, Daytona's ssh configs
KEPT_FOLDERS = {"serve", "policy", "models", "pytest-hud-creates", "robot-locks", "daytona"}
#: a finished item as the controller prints it under -v: "[gw0] [ 50%] PASSED rows.jsonl::..."
#: under xdist, "rows.jsonl::... PASSED [ 50%]" without it
_OUTCOMES = "PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED"
_OUTCOME = re.compile(
    rf"(?:\b(?:{_OUTCOMES}) (rows\.jsonl::\S+))|(?:^(rows\.jsonl::\S+) (?:{_OUTCOMES})\b)"
)
#: this process's environment, minus what would make the session under test another one:
#: pytest's and xdist's variables, pytest-hud's (a session's secret, its fork server: the run
#: starts from a user's shell, as a server started by hand does), the login's private folder,
#: the tests' Ray cluster
_DROP = (
    "PYTEST_ADDOPTS",
    "PYTEST_XDIST_",
    "PYTEST_CURRENT_TEST",
    "PYTEST_HUD_",
    "XDG_RUNTIME_DIR",
    "RAY_ADDRESS",  # the tests' own cluster (tests/helpers/ray_cluster.py) is not the user's
)
_KEEP = ("PYTEST_HUD_REQUIRE_ALL",)


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in _KEEP or not k.startswith((*_DROP, PROBE))}


def rows(quick: int, endless: int) -> str:
    """``quick`` rows that finish, then ``endless`` rows that step until interrupted."""
    lines = [{"env": "intr", "id": "quick", "args": {"n": n}} for n in range(quick)]
    lines += [
        {"env": "intr-forever", "id": "endless", "args": {"n": quick + n}} for n in range(endless)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def probed(token: str) -> dict[int, str]:
    """Live (non-zombie) processes whose environment holds the probe ``token``: pid ->
    the start of its command line."""
    needle = f"{PROBE}={token}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in "ZX" or needle not in (entry / "environ").read_bytes():
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        found[int(entry.name)] = " ".join(a.decode(errors="replace") for a in argv[:4])[:120]
    return found


def listening(pids: Sequence[int]) -> list[str]:
    """The TCP ports these processes listen on, as ``pid:address`` (hex, /proc's form)."""
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            out += [f"{pid}:{addr}" for addr, state in tcp_sockets(pid) if state == "0A"]
    return sorted(out)


def session_tasks(token: str) -> list[str]:
    """The rows (``pytest-hud.task`` labels) of the session's running containers."""
    done = subprocess.run(
        ["docker", "ps", "--filter", f"label=pytest-hud.session={token}",
         "--format", '{{.Label "pytest-hud.task"}}'],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return done.stdout.split()


def session_containers(token: str) -> list[str]:
    """Containers (running or not) labelled with the session id ``token``."""
    done = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=pytest-hud.session={token}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout.split()


def left_files(tmp: Path, theirs: Sequence[str] = ()) -> list[str]:
    """What is in a run's TMPDIR: every file, every folder but pytest-hud's kept ones, and
    nothing of ``theirs`` (paths in it that a hand-started server still holds) or of
    pytest's own ``pytest-of-USER`` (the base temp folders xdist makes, which pytest keeps
    by its retention policy, three of them)."""
    out = []
    for path in sorted(tmp.rglob("*")):
        rel = path.relative_to(tmp)
        if str(rel) in theirs or rel.parts[0].startswith("pytest-of-"):
            continue
        kept = len(rel.parts) <= 2 and rel.parts[0].startswith("pytest-hud-")
        if path.is_dir() and (kept and (len(rel.parts) == 1 or rel.parts[1] in KEPT_FOLDERS)):
            continue
        out.append(str(rel) + ("/" if path.is_dir() else ""))
    return out


def short_tmp() -> Path:
    """A run's TMPDIR: short, for the AF_UNIX socket paths a Ray head makes under it."""
    return Path(tempfile.mkdtemp(prefix="hi-", dir="/tmp"))


@dataclass
class Left:
    """What an interrupted session left behind, and what its ledger says."""

    processes: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: ledger: episodes written more than once; reported but not written; not readable
    duplicated: list[str] = field(default_factory=list)
    unwritten: list[str] = field(default_factory=list)
    ledger_error: str | None = None

    def nothing(self) -> bool:
        """Nothing left behind, nothing lost."""
        return not any(self.__dict__.values())

    def summary(self) -> str:
        parts = {k: v for k, v in self.__dict__.items() if v}
        return json.dumps(parts) if parts else "nothing"


class Session:
    """One pytest session over the interrupt env's rows (see the module docs)."""

    def __init__(
        self,
        folder: Path,
        *,
        runtime: str,
        workers: int = 2,
        quick: int = 4,
        endless: int = 2,
        agent: str = "zero",
        flags: Sequence[str] = (),
        env: dict[str, str] | None = None,
        tmp: Path | None = None,
        marks: Path | None = None,
        errors_ok: bool = False,
    ) -> None:
        self.folder, self.runtime, self.workers = folder, runtime, workers
        #: a row's ERROR is part of the run (not a broken session to stop waiting on)
        self.errors_ok = errors_ok
        self.quick, self.endless = quick, endless
        self.token = uuid.uuid4().hex
        self.tmp = tmp or short_tmp()
        self.marks = marks or folder / "marks"  # where the rows' start markers appear
        self.ledger, self.results = folder / "ledger.jsonl", folder / "results.json"
        folder.mkdir(parents=True, exist_ok=True)
        self.marks.mkdir(parents=True, exist_ok=True)
        shutil.copy(ENV, folder / ENV.name)
        (folder / "conftest.py").write_text("import interrupt_env  # noqa: F401\n")
        (folder / "rows.jsonl").write_text(rows(quick, endless))
        self.argv = [
            sys.executable, "-m", "pytest", "rows.jsonl", "-v", "-p", "no:cacheprovider",
            *(["-n", str(workers)] if workers else ["-p", "no:xdist"]),
            f"--hud-runtime={runtime}", f"--hud-agent={agent}", "--hud-timeout=900",
            f"--hud-ledger={self.ledger}", f"--hud-results={self.results}", *flags,
        ]  # fmt: skip
        base = _environ()
        paths = [str(folder), str(ROOT), base.get("PYTHONPATH", "")]
        self.env = {
            **base,
            PROBE: self.token,
            "PYTEST_HUD_SESSION": self.token,
            "TMPDIR": str(self.tmp),
            "PYTHONPATH": os.pathsep.join(p for p in paths if p),
            **({} if runtime.startswith("docker") else {"INTERRUPT_DIR": str(self.marks)}),
            **(env or {}),
        }
        self.proc: subprocess.Popen[str] | None = None
        self.lines: collections.deque[str] = collections.deque(maxlen=4000)
        self.signals: list[str] = []
        #: files in its TMPDIR that are not the session's (a hand-started server's)
        self.theirs: list[str] = []

    # -- running ----------------------------------------------------------------------------
    def start(self) -> Session:
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.folder,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own group: a Ctrl-C at a terminal signals it all
        )
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self, last: int = 60) -> str:
        return "\n".join(list(self.lines)[-last:])

    # -- phases -----------------------------------------------------------------------------
    def printed(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def started(self) -> int:
        """Rollouts started (marker files; not under docker)."""
        return len(list(self.marks.glob("started-*")))

    def endless_running(self) -> bool:
        """An endless row's rollout runs: its start marker, or under docker (whose
        containers cannot mark) a container of the session serving one."""
        if self.runtime.startswith("docker"):
            return any(t.startswith("intr-forever/") for t in session_tasks(self.token))
        return any(int(p.name.split("-")[1]) >= self.quick for p in self.marks.glob("started-*"))

    def episodes(self) -> list[str]:
        """The node ids of the ledger's whole episode lines, in order."""
        try:
            raw = self.ledger.read_bytes()
        except OSError:
            return []
        out = []
        for line in raw.split(b"\n")[:-1]:  # the last piece is torn or empty
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if record.get("kind") == "episode":
                    out.append(str(record.get("nodeid")))
        return out

    def reported(self) -> set[str]:
        """Items whose outcome the controller printed (every one reached it finished)."""
        lines = list(self.lines)  # a copy: the reader thread appends
        found = (m.group(1) or m.group(2) for line in lines for m in _OUTCOME.finditer(line))
        return set(found)

    def until(self, what: Callable[[], object], bound: float) -> bool:
        """Wait for a phase, bounded; False when the session ended first, a row errored
        (the session is broken, not interruptible as meant: no use waiting the bound out;
        a quick row's FAIL is its zero agent's, expected) or the bound passed."""
        wait_for(lambda: what() or self.ended() or self.broken(), bound)
        return bool(what()) and not self.ended() and not self.broken()

    def broken(self) -> bool:
        """A row errored (pytest's -v line for it): infrastructure, not the policy."""
        return not self.errors_ok and any(
            "rows.jsonl::" in line and " ERROR" in line for line in list(self.lines)
        )

    def ended(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    # -- interrupting -----------------------------------------------------------------------
    def signal(self, sig: int, target: str = "group") -> None:
        """``sig`` to the controller's process group (a Ctrl-C at a terminal reaches every
        process in it) or to the controller alone (``kill PID``)."""
        assert self.proc is not None
        self.signals.append(f"{signal.Signals(sig).name} to the {target}")
        with contextlib.suppress(ProcessLookupError):
            if target == "group":
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)

    def wait_exit(self, bound: float = EXIT_BOUND) -> int | None:
        """The session's exit code, or None when it was still running at the bound."""
        assert self.proc is not None
        try:
            return self.proc.wait(bound)
        except subprocess.TimeoutExpired:
            return None

    # -- what it left -----------------------------------------------------------------------
    def leftovers(self, bound: float = GONE_BOUND) -> Left:
        """What the ended session left (each a bounded wait), and its ledger's check: every
        episode the controller reported, or put in the results file, written once."""
        docker = self.runtime.startswith("docker")
        wait_for(lambda: not probed(self.token), bound)
        if docker:
            wait_for(lambda: not session_containers(self.token), bound)
        alive = probed(self.token)
        left = Left(
            processes=[f"{pid} {cmd}" for pid, cmd in sorted(alive.items())],
            containers=session_containers(self.token) if docker else [],
            ports=listening(list(alive)),
            files=left_files(self.tmp, self.theirs),
        )
        self._check_ledger(left)
        return left

    def _check_ledger(self, left: Left) -> None:
        if not self.ledger.exists():
            return
        from pytest_hud.evaluation.ledger_file import LedgerError, read

        try:
            read(self.ledger)
        except LedgerError as exc:
            left.ledger_error = str(exc)
        written = collections.Counter(self.episodes())
        left.duplicated = sorted(k for k, n in written.items() if n > 1)
        finished = self.reported()
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(self.results.read_text())
            finished |= {str(r["nodeid"]) for r in doc.get("rollouts", [])}
        left.unwritten = sorted(finished - set(written))

    def close(self) -> None:
        """Never leak from the harness itself: SIGKILL what is left, remove the session's
        containers and its TMPDIR."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        for pid in probed(self.token):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self.runtime.startswith("docker"):
            for cid in session_containers(self.token):
                subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)


class HandServer:
    """A server started by hand beside the sessions, in the run's TMPDIR and with a probe
    token of its own: ``argv`` prints ``ANNOUNCE {"url": ...}`` once it serves."""

    def __init__(
        self,
        argv: Sequence[str],
        announce: str,
        tmp: Path,
        cwd: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        self.token = uuid.uuid4().hex
        base = _environ()
        env = {**base, PROBE: self.token, "TMPDIR": str(tmp), **(env or {})}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cwd), str(ROOT)) if p)
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.url = ""
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # bounded by the server: it exits if it cannot serve
            self.lines.append(line)
            if line.startswith(announce + " "):
                self.url = json.loads(line[len(announce) + 1 :])["url"]
                break
        threading.Thread(target=self._drain, daemon=True).start()
        if not self.url:
            raise RuntimeError(f"{argv[3:5]} did not serve:\n{''.join(self.lines[-30:])}")

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def address(self) -> str:
        """``HOST:PORT`` of its url."""
        return self.url.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]

    def files(self, tmp: Path) -> list[str]:
        """The files it holds in ``tmp`` (relative paths)."""
        return [str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()]

    def connections(self) -> int:
        """TCP connections it holds open (established: state 01)."""
        with contextlib.suppress(OSError):
            return sum(1 for _, state in tcp_sockets(self.proc.pid) if state == "01")
        return 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGINT) -> tuple[int | None, list[str]]:
        """Send ``sig`` (a Ctrl-C by default); its exit code (None: still running at the
        bound) and what it left (processes, then SIGKILLed)."""
        self.proc.send_signal(sig)
        try:
            code: int | None = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            code = None
        wait_for(lambda: not probed(self.token), 30)
        left = [f"{pid} {cmd}" for pid, cmd in probed(self.token).items()]
        self.kill()
        return code, left

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        for pid in probed(self.token):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
