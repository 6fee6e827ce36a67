"""Interrupt real pytest-hud sessions at random moments, many times, and print what each left.

Each run draws (from ``--seed``) a runtime (local, local with sims in forked processes,
subprocess, docker, ray, tcp:// to an env server started by hand, openpi: to a policy
server started by hand), ``-n 2`` or no xdist, a moment and a signal pattern:

* setup: a random delay after the start, up to the time the runtime's earlier runs took to
  reach mid-rollout (the shortest so far; 20 s before the first);
* mid-rollout: once an episode is in the ledger and an endless row's rollout runs, plus a
  random 0-3 s;
* teardown: every row quick; once every row is in the ledger, plus a random delay within
  the runtime's teardown (3 s at first; a session that ended before its signal shrinks it
  to 0.8 of what it took, and the run is drawn again);
* SIGINT, SIGTERM, or SIGINT and a second SIGINT a random 0.2-3 s later; to the process
  group (a Ctrl-C at a terminal) or to the controller alone (``kill PID``). With a hand
  server, a third of the runs interrupt the server instead (then the session, by Ctrl-C).

What each run found is tests/helpers/interrupted.py's: the session's exit within its bound,
then the processes (probe token: Ray's daemons and watchdogs too), containers (session
label), listening ports, files in its own TMPDIR it left, and its ledger: episodes written
twice, episodes it reported (terminal or results file) but did not write. A hand server
must outlive the session's interrupt, drop its connections, and leave nothing once stopped.
The moment printed is the one the signal met (setup: no rollout had started yet).

    PYTHONPATH=$PWD .venv/bin/python bench/interrupts.py [--runs 100] [--seed 0]
        [--runtimes local,forked,subprocess,docker,ray,tcp,policy] [--json out.json]
        [--write]   # the summary table into docs/performance.md

Exit 0 when no run left anything behind or lost an episode.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from interrupted import ENV, HandServer, Session, short_tmp  # noqa: E402
from waiting import wait_for  # noqa: E402

RUNTIMES = ("local", "forked", "subprocess", "docker", "ray", "tcp", "policy")
PATTERNS = ("SIGINT", "SIGTERM", "SIGINT+SIGINT")
MOMENTS = ("setup", "mid-rollout", "teardown")
#: a phase that does not come within this is a run that found a hang (reported as such)
PHASE_BOUND = 900.0


@dataclass
class Run:
    number: int
    runtime: str
    workers: int
    moment: str  # the one drawn
    met: str = ""  # the one the signal met
    pattern: str = ""
    target: str = ""
    delay: float = 0.0
    exit_code: int | None = None
    seconds: float = 0.0
    left: dict[str, object] = field(default_factory=dict)
    server: list[str] = field(default_factory=list)  # what the hand server's check found
    problem: str = ""  # the session hung, a phase never came
    missed: bool = False  # it ended before its teardown signal: drawn again, not counted

    @property
    def clean(self) -> bool:
        return not self.left and not self.server and not self.problem


def docker_image() -> str:
    from docker_helpers import base_image, engine

    from pytest_hud.runtime.docker import build_image

    client = engine()
    if client is None:
        raise SystemExit("bench/interrupts.py: no Docker engine (scripts/setup --docker)")
    base_image(client)
    return build_image("pytest-hud-interrupt:test", module=ENV.name, extra_files={ENV.name: ENV})


def hand_server(kind: str, folder: Path, tmp: Path) -> HandServer:
    python = sys.executable
    if kind == "tcp":
        shutil.copy(ENV, folder / ENV.name)
        argv = [python, "-m", "pytest_hud.serve", ENV.name, "--port", "0"]
        env = {"INTERRUPT_DIR": str(folder / "marks")}
        (folder / "marks").mkdir(exist_ok=True)
        return HandServer(argv, "PYTEST_HUD_SERVER", tmp, folder, env=env)
    # --token: it admits only clients with the token it keeps in its token file
    argv = [python, "-m", "pytest_hud", "policy-server", "--agent=zero", "--port=0", "--token"]
    return HandServer(argv, "PYTEST_HUD_POLICY_SERVER", tmp, folder)


def moment_met(session: Session) -> str:
    if session.results.exists() or len(set(session.episodes())) >= session.quick + session.endless:
        return "teardown"
    if session.episodes() or session.started() or session.endless_running():
        return "mid-rollout"
    return "setup"


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.image = docker_image() if "docker" in args.runtimes else ""
        #: per runtime, the shortest time to mid-rollout seen so far (s): setup's window
        self.setup_time: dict[str, float] = collections.defaultdict(lambda: 20.0)
        #: per runtime, the window after the results file within which a teardown signal
        #: lands (s): shrunk to 0.8 of a teardown that ended before its signal
        self.teardown: dict[str, float] = collections.defaultdict(lambda: 3.0)
        self.seen: set[str] = set()

    def draw(self, number: int) -> Run:
        rng = self.rng
        runtime = rng.choice(self.args.runtimes)
        workers = 0 if rng.random() < 0.25 else 2
        run = Run(number, runtime, workers, rng.choice(MOMENTS), pattern=rng.choice(PATTERNS))
        hand = runtime in ("tcp", "policy")
        run.target = rng.choice(["server", "group", "group", "controller"] if hand else
                                ["group", "group", "controller"])  # fmt: skip
        return run

    def session(self, run: Run, folder: Path, tmp: Path, server: HandServer | None) -> Session:
        flags, agent, runtime = [], "zero", run.runtime
        if runtime == "forked":
            runtime, flags = "local", ["--hud-sim-process"]
        elif runtime == "docker":
            runtime = f"docker:{self.image}"
        elif runtime == "tcp":
            assert server is not None
            runtime = server.url
        elif runtime == "policy":
            assert server is not None
            runtime, agent = "local", f"openpi:{server.address}"
        endless = 0 if run.moment == "teardown" else 2
        marks = folder / "server" / "marks" if run.runtime == "tcp" else None
        session = Session(
            folder / "session", runtime=runtime, workers=run.workers, quick=4,
            endless=endless, agent=agent, flags=flags, tmp=tmp, marks=marks,
            errors_ok=run.runtime == "tcp",  # one hand-started server: one slot a sim
        )  # fmt: skip
        if server is not None:
            wait_for(lambda: server.files(tmp), 60)
            session.theirs = server.files(tmp)
        return session

    def reach(self, run: Run, session: Session) -> str:
        """Wait for the drawn moment (bounded): "ok"; "missed": the session ended on its own
        before a teardown signal (the runtime's teardown window shrinks to what was seen);
        "hung": the moment never came."""
        start = time.monotonic()
        if run.moment == "setup":
            run.delay = self.rng.uniform(0, self.setup_time[run.runtime])
            ok = session.until(lambda: time.monotonic() - start >= run.delay, PHASE_BOUND)
            return "ok" if ok else "hung"
        if run.moment == "mid-rollout":
            phase = lambda: session.episodes() and session.endless_running()  # noqa: E731
            window = 3.0
        else:  # every row is in the ledger: what follows is the session's teardown
            phase = lambda: len(set(session.episodes())) >= session.quick  # noqa: E731
            window = self.teardown[run.runtime]
        if not session.until(phase, PHASE_BOUND):
            return "missed" if run.moment == "teardown" and phase() else "hung"
        met = time.monotonic()
        run.delay = self.rng.uniform(0, window)
        wait_for(lambda: session.ended(), run.delay)
        if not session.ended():
            return "ok"
        if run.moment == "teardown":
            self.teardown[run.runtime] = max(0.05, 0.8 * (time.monotonic() - met))
            return "missed"
        return "hung"  # an endless row ended: the session failed on its own

    def one(self, number: int) -> Run:
        run = self.draw(number)
        started = time.monotonic()
        folder = Path(tempfile.mkdtemp(prefix="hud-interrupts-"))
        tmp = short_tmp()
        server: HandServer | None = None
        session: Session | None = None
        try:
            if run.runtime in ("tcp", "policy"):
                (folder / "server").mkdir()
                server = hand_server(run.runtime, folder / "server", tmp)
            session = self.session(run, folder, tmp, server)
            session.start()
            reached = self.reach(run, session)
            if reached == "missed":
                run.missed = True
                return run
            if reached == "hung":
                tail = session.output(8).replace("\n", " | ")[-600:]
                run.problem = f"the session ended or hung before {run.moment}: {tail}"
                return run
            run.met = moment_met(session)
            if run.moment == "mid-rollout":
                self.note_setup(run.runtime, time.monotonic() - started - run.delay)
            if run.target == "server":
                assert server is not None
                self.interrupt_server(run, server)
                session.signal(signal.SIGINT, "group")  # then the session, by Ctrl-C
            else:
                self.interrupt(run, session)
            run.exit_code = session.wait_exit()
            if run.exit_code is None:
                run.problem = f"the session did not exit after {session.signals}"
            left = session.leftovers()
            run.left = {k: v for k, v in asdict(left).items() if v}
            if server is not None and run.target != "server":
                self.check_server(run, server)
        except Exception as exc:  # the harness's own failure is a finding too
            run.problem = f"{type(exc).__name__}: {exc}"
        finally:
            if session is not None:
                session.close()
            if server is not None:
                server.kill()
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(tmp, ignore_errors=True)
            run.seconds = round(time.monotonic() - started, 1)
        return run

    def note_setup(self, runtime: str, seconds: float) -> None:
        """A run of ``runtime`` reached mid-rollout ``seconds`` after its start."""
        known = self.setup_time[runtime] if runtime in self.seen else seconds
        self.setup_time[runtime] = min(known, seconds)
        self.seen.add(runtime)

    def interrupt(self, run: Run, session: Session) -> None:
        first = signal.SIGTERM if run.pattern == "SIGTERM" else signal.SIGINT
        session.signal(first, run.target)
        if run.pattern == "SIGINT+SIGINT":
            wait_for(lambda: session.ended(), self.rng.uniform(0.2, 3.0))
            if not session.ended():
                session.signal(signal.SIGINT, run.target)

    def interrupt_server(self, run: Run, server: HandServer) -> None:
        sig = signal.SIGTERM if run.pattern == "SIGTERM" else signal.SIGINT
        code, stayed = server.stop(sig)
        if code is None or stayed:
            run.server = [f"the server exited {code} after {run.pattern}", *stayed]

    def check_server(self, run: Run, server: HandServer) -> None:
        if not server.alive():
            run.server = ["the hand server died with the session"]
            return
        if not wait_for(lambda: server.connections() == 0, 60):
            run.server = [f"{server.connections()} connections of the session left open"]
        sig = self.rng.choice([signal.SIGINT, signal.SIGTERM])
        code, stayed = server.stop(sig)
        if code is None or stayed:
            run.server += [f"the server exited {code} after {signal.Signals(sig).name}", *stayed]


def findings(run: Run) -> list[str]:
    """The kinds of thing a run found: processes, files, ..., server, problem."""
    return [*run.left, *(["server"] if run.server else []), *(["problem"] if run.problem else [])]


def table(runs: list[Run]) -> list[list[object]]:
    """Per runtime: runs, clean, with xdist or not, by the moment met, by pattern, and what
    was found."""
    rows: list[list[object]] = []
    for runtime in sorted({r.runtime for r in runs}):
        mine = [r for r in runs if r.runtime == runtime]
        moments = collections.Counter(r.met or "-" for r in mine)
        found = collections.Counter(k for r in mine for k in findings(r))
        rows.append(
            [
                runtime,
                len(mine),
                sum(r.clean for r in mine),
                f"{sum(r.workers > 0 for r in mine)} / {sum(r.workers == 0 for r in mine)}",
                " ".join(f"{m} {moments[m]}" for m in (*MOMENTS, "-") if moments[m]),
                " ".join(f"{p} {sum(r.pattern == p for r in mine)}" for p in PATTERNS),
                ", ".join(f"{k} {n}" for k, n in found.items()) or "nothing",
            ]
        )
    return rows


def report(run: Run, runs: list[Run], out: Path | None) -> None:
    """Print what ``run`` found; every run so far into ``out`` (JSON)."""
    what = "nothing left" if run.clean else json.dumps(
        {**run.left, **({"server": run.server} if run.server else {}),
         **({"problem": run.problem} if run.problem else {})})  # fmt: skip
    print(
        f"run {run.number:3d} {run.runtime:10s} -n {run.workers} {run.moment:11s}"
        f" met {run.met or '-':11s} {run.pattern:13s} to the {run.target:10s}"
        f" +{run.delay:4.1f}s exit {run.exit_code} in {run.seconds:5.1f}s: {what}",
        flush=True,
    )
    if out:
        out.write_text(json.dumps([asdict(r) for r in runs], indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES))
    parser.add_argument("--json", type=Path, help="every run's draw and findings")
    parser.add_argument("--write", action="store_true", help="the table into docs/performance.md")
    args = parser.parse_args()
    args.runtimes = [r for r in args.runtimes.split(",") if r]
    unknown = set(args.runtimes) - set(RUNTIMES)
    if unknown:
        parser.error(f"--runtimes: unknown {sorted(unknown)}; known: {', '.join(RUNTIMES)}")
    # stoppable from a script: a background job's SIGINT is ignored; SIGTERM stops cleanly
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bench = Bench(args)
    runs: list[Run] = []
    began, loads, missed = time.monotonic(), [], 0
    try:
        while len(runs) < args.runs and missed <= args.runs:
            run = bench.one(len(runs) + 1)
            if run.missed:  # the same number again, drawn anew
                missed += 1
                print(f"run {run.number:3d} {run.runtime}: ended before its teardown signal "
                      f"(+{run.delay:.2f} s); drawn again", flush=True)  # fmt: skip
                continue
            runs.append(run)
            loads.append(os.getloadavg()[0])
            report(run, runs, args.json)
    except KeyboardInterrupt:  # a run cleans up after itself: report those done
        print("interrupted: the runs so far", flush=True)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    rows = table(runs)
    clean = sum(r.clean for r in runs)
    load = f"load average {min(loads):.1f}-{max(loads):.1f} during the runs" if loads else ""
    took = time.monotonic() - began
    print(f"\n{len(runs)} runs in {took:.0f} s ({missed} redrawn: ended before a teardown "
          f"signal), {clean} left nothing and lost nothing; {load}")  # fmt: skip
    header = ["runtime", "runs", "clean", "-n 2 / none", "moment met", "pattern", "found"]
    for row in [header, *rows]:
        print("  ".join(str(c) for c in row))
    if args.write:
        from _report import write_table

        write_table(
            "interrupts", "Interrupts at random moments (bench/interrupts.py)", header, rows,
            note=f"{len(runs)} runs, {clean} clean; {load} (other jobs shared the machine).",
        )  # fmt: skip
    return 0 if clean == len(runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
