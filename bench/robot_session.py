"""Issue 55's small attended session, run again and again: four rows of the physics SO-101
(tests/helpers/envs/so101_env.py, no camera), a blinded A/B of two agents, a scripted operator
from a module, ``--hud-budget=3``. Each run is a fresh pytest process in a folder of its own,
bounded by ``--bound`` seconds; a run whose robot log, ledger and operator file stop changing
for ``--stall`` seconds has every process of its tree dumped (``py-spy dump --native``,
``/proc`` state, wchan and kernel stack per thread) into ``--out`` before it is ended
(SIGTERM, then SIGKILL). Each run prints its exit, wall time, the load average, whether its
output holds a traceback, and the robot's lifecycle (connect, stop, disconnect). Nothing
here judges time: a stall or a traceback is the finding.

    PYTHONPATH=$PWD .venv/bin/python bench/robot_session.py [--runs 10] [--stall 120] \\
        [--bound 600] [--operator from_robot_log] [--max-steps 25] [--detector] \\
        [--out DIR] [-- EXTRA PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HELPERS = ROOT / "tests" / "helpers"
SPY = Path(sys.executable).parent / "py-spy"

SUITE = f"""
import sys
sys.path[:0] = [{str(HELPERS)!r}, {str(HELPERS / "envs")!r}]
import pytest
from so101_env import reach


@pytest.mark.hud(tasks=[reach.task(seed=s) for s in range(4)])
def test_reach(hud_result):
    assert hud_result.success, hud_result.summary()
"""


def tree(pid: int) -> list[int]:
    """``pid`` and every descendant (a zygote and the sims it forked included)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [
                    int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()
                ]
    return out


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError as exc:
        return f"({exc.strerror})"


def dump(pids: list[int], into: Path) -> None:
    with into.open("a") as f:
        for p in pids:
            f.write(f"\n===== pid {p}: {_read(f'/proc/{p}/cmdline').replace(chr(0), ' ')}\n")
            with contextlib.suppress(OSError):
                for t in sorted(os.listdir(f"/proc/{p}/task")):
                    stat = _read(f"/proc/{p}/task/{t}/stat").split()
                    f.write(
                        f"  thread {t} {_read(f'/proc/{p}/task/{t}/comm').strip()} state "
                        f"{stat[2:3]} utime+stime {stat[13:15]} wchan "
                        f"{_read(f'/proc/{p}/task/{t}/wchan')}\n"
                    )
            f.write(_read(f"/proc/{p}/stack"))
            spy = subprocess.run(
                [str(SPY), "dump", "--native", "--pid", str(p)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            f.write(spy.stdout + spy.stderr)


def end(proc: subprocess.Popen[bytes]) -> None:
    pids = tree(proc.pid)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        proc.wait()


def one(n: int, args: argparse.Namespace) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix=f"robot-session-{n}-"))
    (work / "test_so101.py").write_text(SUITE)
    env = {
        **os.environ,
        "HF_LEROBOT_CALIBRATION": str(work / "calibration"),
        "PYTEST_HUD_ROBOT_LOCKS": str(work),
        "SO101_LOG": str(work / "robot.log"),
        "SO101_DETECTOR": "1" if args.detector else "0",
        "OPERATOR_SHOWN": str(work / "shown.txt"),
        "PYTHONPATH": os.pathsep.join([str(HELPERS), str(ROOT)]),
    }
    argv = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={work / 'tmp'}",
        f"--hud-operator=operators:{args.operator}", "--hud-results=r.json",
        "--hud-ledger=l.jsonl", "--hud-budget=3",
        "--hud-agent=policy_models:weak_reach_agent", "--hud-agent=policy_models:reach_agent",
        *([f"--hud-max-steps={args.max_steps}"] if args.max_steps else []), *args.extra,
    ]  # fmt: skip
    watched = [work / "robot.log", work / "l.jsonl", work / "shown.txt"]
    start = last = time.monotonic()
    seen: list[int] | None = None
    stalled = False
    with (work / "out.txt").open("wb") as sink:
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=sink, stderr=subprocess.STDOUT)
    while proc.poll() is None:
        now = time.monotonic()
        sizes = [p.stat().st_size if p.exists() else -1 for p in watched]
        if sizes != seen:
            seen, last = sizes, now
        if now - last > args.stall and not stalled:
            stalled = True
            dump(tree(proc.pid), args.out / f"stall-{n}.txt")
        if now - start > args.bound:
            if not stalled:
                dump(tree(proc.pid), args.out / f"stall-{n}.txt")
            end(proc)
            break
        time.sleep(1)
    text = (work / "out.txt").read_text(errors="replace")
    log = work / "robot.log"
    row: dict[str, object] = {
        "run": n,
        "exit": proc.returncode,
        "wall": round(time.monotonic() - start, 1),
        "load": os.getloadavg()[0],
        "stalled": stalled,
        "traceback": "Traceback" in text or "INTERNALERROR" in text,
        "robot": [w for w in log.read_text().split() if "=" not in w] if log.exists() else [],
    }
    if row["traceback"] or stalled or proc.returncode not in (0, 1):
        shutil.copy(work / "out.txt", args.out / f"run-{n}-out.txt")
    shutil.rmtree(work, ignore_errors=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--stall", type=float, default=120.0, help="seconds without progress")
    parser.add_argument("--bound", type=float, default=600.0, help="seconds a run may take")
    parser.add_argument("--operator", default="from_robot_log", help="tests/helpers/operators")
    parser.add_argument("--max-steps", type=int, default=25, help="0: no --hud-max-steps")
    parser.add_argument("--detector", action="store_true", help="the arm's success detector")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "robot-session")
    parser.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for n in range(args.runs):
        row = one(n, args)
        print(json.dumps(row), flush=True)
    print(f"dumps and outputs of runs that stalled or printed a traceback: {args.out}")


if __name__ == "__main__":
    main()
