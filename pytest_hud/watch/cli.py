"""``python -m pytest_hud watch RUN_DIR [options] [pytest args...]``: the command line and the
polling loop that evaluates each complete checkpoint, oldest first.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from pytest_hud.plumbing.cli import add_options, from_args, option
from pytest_hud.robot.agent.registry import CHECKPOINT_TEMPLATE
from pytest_hud.watch.checkpoints import (
    DEFAULT_PATTERN,
    DEFAULT_REQUIRE,
    Checkpoint,
    Pattern,
    Readiness,
    final_step,
    lerobot_last_step,
)
from pytest_hud.watch.child_run import pytest_argv, run_session
from pytest_hud.watch.index import append as append_line
from pytest_hud.watch.index import entry as index_entry
from pytest_hud.watch.index import read as read_index
from pytest_hud.watch.report import best, write_report

__all__ = ["Watch", "main", "parse"]

#: options the watcher sets per checkpoint: passing them through would contradict it
_OWNED = ("--hud-agent", "--hud-checkpoint", "--hud-results", "--hud-ledger", "--hud-resume",
          "--hud-log-step")  # fmt: skip
#: pytest exit codes of a session that evaluated (1: some episode failed or errored)
_EVALUATED = (0, 1)


@dataclass
class Watch:
    """One watch: what :func:`parse` reads and derives, and each option with its default."""

    run: Path
    pytest_args: list[str]
    out: Path
    pattern: Pattern
    require: tuple[str, ...]
    log_run: str
    agent: str = option(
        "--agent",
        "the --hud-agent of each checkpoint; {path} and {step} are filled in (default %(default)s)",
        CHECKPOINT_TEMPLATE,
    )
    poll: float = option("--poll", "seconds between polls", 5.0, type=float)
    until_step: int | None = option(
        "--until-step", "stop once training reached this step", type=int
    )
    final_step: int | None = option(
        "--final-step", "the run's last step (default: steps in train_config.json)", type=int
    )
    idle_timeout: float | None = option(
        "--idle-timeout", "stop after this many seconds without a new checkpoint", type=float
    )
    eval_timeout: float | None = option(
        "--eval-timeout", "seconds one checkpoint's evaluation may take", type=float
    )
    nice: int = option(
        "--nice",
        "niceness of the evaluations (default %(default)s: the trainer first)",
        10,
        type=int,
    )
    grace: float = option(
        "--grace",
        "seconds an interrupted evaluation gets to stop before SIGKILL",
        60.0,
        type=float,
    )

    @property
    def index_path(self) -> Path:
        return self.out / "watch.jsonl"


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _log_run_name(run: Path) -> str:
    digest = hashlib.sha1(str(run).encode()).hexdigest()[:6]
    return f"{re.sub(r'[^A-Za-z0-9_-]+', '-', run.name).strip('-') or 'run'}-{digest}"


def parse(argv: Sequence[str]) -> Watch:
    """The watch options; everything else (or all after ``--``) goes to pytest."""
    args = list(argv)
    rest: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, rest = args[:at], args[at + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m pytest_hud watch",
        allow_abbrev=False,
        description="Evaluate each checkpoint of a training run once it is completely "
        "written; pytest arguments (the suite, --hud-* options, -n K) follow.",
    )
    parser.add_argument("run", type=Path, help="the training run's output folder")
    parser.add_argument("--pattern", default=DEFAULT_PATTERN,
                        help="checkpoint folders under RUN, {step} = the step "
                        "(default %(default)s)")  # fmt: skip
    parser.add_argument("--require", action="append",
                        help="a file a complete checkpoint holds (repeatable; default for the "
                        f"default pattern: {', '.join(DEFAULT_REQUIRE)})")  # fmt: skip
    parser.add_argument("--out", type=Path, help="outputs (default RUN/hud-watch)")
    add_options(parser, Watch)
    ns, unknown = parser.parse_known_args(args)
    pytest_args = [*unknown, *rest]
    owned = [a for a in pytest_args if a.split("=", 1)[0] in _OWNED]
    if owned:
        parser.error(
            f"{', '.join(owned)}: the watcher sets these per checkpoint (use --agent for "
            "the agent spec, --out for where results and the ledger go)"
        )
    if ns.poll <= 0:
        parser.error(f"--poll is a number of seconds > 0, got {ns.poll}")
    try:
        pattern = Pattern(ns.pattern)
    except ValueError as exc:
        parser.error(str(exc))
    run = ns.run.resolve()
    require = tuple(ns.require) if ns.require else (
        DEFAULT_REQUIRE if ns.pattern == DEFAULT_PATTERN else ())  # fmt: skip
    return from_args(
        Watch,
        ns,
        run=run,
        pytest_args=pytest_args,
        out=(ns.out or run / "hud-watch").resolve(),
        pattern=pattern,
        require=require,
        log_run=_log_run_name(run),
    )


class Watcher:
    """The loop over one run (see the module docstring)."""

    def __init__(self, watch: Watch) -> None:
        self.w = watch
        self.done: dict[int, dict[str, object]] = read_index(watch.index_path)
        self.readiness = Readiness(watch.run, watch.require)
        self.final = watch.final_step
        self.skipped: set[int] = set()  # timed out in this watcher's lifetime
        self._waiting: dict[int, str] = {}

    def evaluate(self, ckpt: Checkpoint) -> int | None:
        """Evaluate one checkpoint; pytest's exit code (None: stopped by --eval-timeout)."""
        w = self.w
        results = w.out / "results" / f"{ckpt.step}.json"
        agent = w.agent.replace("{path}", str(ckpt.path)).replace("{step}", str(ckpt.step))
        argv = pytest_argv(w.pytest_args, agent=agent, step=ckpt.step, results=results,
                           ledger=w.out / "ledger.jsonl", log_dir=w.out / "trackers",
                           log_run=w.log_run)  # fmt: skip
        say(f"step {ckpt.step}: complete, evaluating ({ckpt.path})")
        ev = run_session(argv, w.out / "logs" / f"{ckpt.step}.log", nice=w.nice,
                         timeout=w.eval_timeout, grace=w.grace)  # fmt: skip
        if ev.timed_out:
            return None
        if ev.exit_code not in _EVALUATED or not results.is_file():
            return ev.exit_code
        doc = json.loads(results.read_text())
        line = index_entry(ckpt.step, ckpt.path, results, ev.exit_code, ev.log, ev.started,
                           ev.finished, doc)  # fmt: skip
        append_line(w.index_path, line)
        self.done[ckpt.step] = line
        write_report(self.done, w.run, w.out / "report.html")
        o = line["overall"]
        lo, hi = o.get("wilson_95") or (0.0, 0.0)
        top = best(self.done)
        errors = f", {o['errors']} error(s)" if o.get("errors") else ""
        say(f"step {ckpt.step}: {o.get('successes')}/{o.get('episodes')} [{lo:.2f}, {hi:.2f}]"
            f"{errors} in "
            f"{ev.finished - ev.started:.0f} s; best so far: step {top}; "
            f"report {w.out / 'report.html'}")  # fmt: skip
        return ev.exit_code

    def _pending(self, found: dict[int, Path], below: int) -> bool:
        return any(s <= below and s not in self.done and s not in self.skipped for s in found)

    def stop_reason(self, found: dict[int, Path]) -> str | None:
        until = self.w.until_step
        if until is not None and any(s >= until for s in found) and not self._pending(found, until):
            return f"training reached --until-step {until}"
        if self.final is not None and any(s >= self.final for s in self.done):
            return f"the final checkpoint (step {self.final}) is evaluated"
        return None

    def poll(self) -> tuple[list[Checkpoint], dict[int, Path]]:
        """One look at the run: the complete checkpoints to evaluate, and all found."""
        w = self.w
        found = w.pattern.scan(w.run)
        last = lerobot_last_step(w.run)
        ready = []
        for step, path in sorted(found.items()):
            if step in self.done or step in self.skipped:
                continue
            if w.until_step is not None and step > w.until_step:
                continue
            why = self.readiness.check(Checkpoint(step, path), last)
            if why is None:
                ready.append(Checkpoint(step, path))
                self._waiting.pop(step, None)
            elif self._waiting.get(step) != why:
                say(f"step {step}: not complete yet: {why}")
                self._waiting[step] = why
        if self.final is None:
            for step in sorted(found, reverse=True):
                if (steps := final_step(found[step])) is not None:
                    self.final = steps
                    say(f"the run's final step is {steps} (train_config.json of step {step})")
                    break
        return ready, found

    def run(self) -> int:
        w = self.w
        if self.done:
            say(f"resuming: {len(self.done)} checkpoint(s) already in {w.index_path} "
                f"(steps {', '.join(map(str, sorted(self.done)))})")  # fmt: skip
        say(f"watching {w.run / w.pattern.text} every {w.poll:g} s")
        idle_since = time.monotonic()
        while True:
            ready, found = self.poll()
            for ckpt in ready:
                code = self.evaluate(ckpt)
                idle_since = time.monotonic()
                if code in _EVALUATED:
                    if (why := self.stop_reason(found)) is not None:
                        break
                    continue
                if code is None:  # --eval-timeout: tried again on a restart
                    say(f"step {ckpt.step}: not evaluated (stopped after --eval-timeout)")
                    self.skipped.add(ckpt.step)
                    continue
                log = w.out / "logs" / f"{ckpt.step}.log"
                say(f"step {ckpt.step}: the evaluation could not run (pytest exit code "
                    f"{code}); see {log}")  # fmt: skip
                return 1
            if (why := self.stop_reason(found)) is not None:
                say(f"stopping: {why}; {len(self.done)} checkpoint(s) in {w.index_path}")
                return 0
            if w.idle_timeout is not None and time.monotonic() - idle_since > w.idle_timeout:
                say(f"stopping: no new checkpoint for {w.idle_timeout:g} s")
                return 0
            time.sleep(w.poll)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    watch = parse(sys.argv[1:] if argv is None else argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops it as Ctrl-C does
    try:
        return Watcher(watch).run()
    except KeyboardInterrupt:
        say("interrupted: the running evaluation was stopped; restart to go on")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
