"""The suite (or any selection) beside CPU and disk hogs: failures, per-test slowdowns, total.

Starts ``--hogs`` processes that each keep a core busy and every so often write and fsync
4 MB (``bench/soak.py``'s HOG), then runs ``pytest ARGS`` ``--runs`` times in a row (a fresh
process each, ``-p no:cacheprovider``, a JUnit XML each), sampling the load average every
5 s. Each run prints its exit, counts, wall time, the load it saw (min / mean / max) and
every failed or errored test; then the tests that slowed most against ``--reference`` (a
JUnit XML of a run without the hogs: ``--reference-run`` makes one first), the total test
time against the reference's, and the slowest tests. Timings are reported, never judged:
the verdict is the failures (a test that fails only under load depends on timing).

    PYTHONPATH=$PWD .venv/bin/python bench/under_load.py [--runs 2] [--hogs 2] \\
        [--reference-run | --reference quiet.xml] [--out DIR] [--write] \\
        -- tests -n 2 --dist loadgroup

Exit 0 when every run passed, 1 otherwise (each failure named).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak import HOG, stop_hogs  # noqa: E402

#: tests shorter than this in the reference are left out of the slowdown ranking (s): their
#: ratio is noise
RANK_FLOOR = 1.0


@dataclass
class Run:
    label: str
    hogs: int
    exit_code: int = 0
    wall: float = 0.0
    summary: str = ""
    loads: list[float] = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)  # test -> seconds (all phases)
    failed: dict[str, str] = field(default_factory=dict)  # test -> first line of why

    def load(self) -> str:
        if not self.loads:
            return "-"
        mean = statistics.fmean(self.loads)
        return f"{min(self.loads):.1f} / {mean:.1f} / {max(self.loads):.1f}"


def read_junit(path: Path, run: Run) -> None:
    """Each test's time and its failure or error, from pytest's JUnit XML."""
    if not path.exists():
        return
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        run.times[name] = run.times.get(name, 0.0) + float(case.get("time") or 0.0)
        for kind in ("failure", "error"):
            bad = case.find(kind)
            if bad is not None:
                why = (bad.get("message") or bad.text or kind).strip().splitlines()
                run.failed[name] = f"{kind}: {why[0][:160] if why else kind}"


def one(label: str, hogs: int, argv: list[str], out: Path) -> Run:
    run = Run(label, hogs)
    junit, log = out / f"{label}.xml", out / f"{label}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    procs = [subprocess.Popen([sys.executable, "-c", HOG, "86400"]) for _ in range(hogs)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(5.0):
            run.loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.monotonic()
    try:
        with log.open("w") as sink:
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                 f"--junitxml={junit}", *argv],
                cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
    finally:
        stop.set()
        stop_hogs(procs)
    run.wall = time.monotonic() - start
    run.exit_code = done.returncode
    lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    tail = [x for x in lines if re.search(r"\d+ (passed|failed|error)", x)]
    run.summary = re.sub(r"=+", "", tail[-1]).strip() if tail else (lines or ["(no output)"])[-1]
    read_junit(junit, run)
    return run


def slowdowns(run: Run, reference: Run) -> list[tuple[str, float, float, float]]:
    """(test, reference s, this run's s, ratio), largest ratio first."""
    out = []
    for name, before in reference.times.items():
        after = run.times.get(name)
        if after is not None and before >= RANK_FLOOR:
            out.append((name, before, after, after / before))
    return sorted(out, key=lambda r: r[3], reverse=True)


def report(runs: list[Run], reference: Run | None, top: int) -> list[list[object]]:
    """Print every run and what it found; the summary rows for docs/performance.md."""
    rows: list[list[object]] = []
    for run in runs:
        total, load = sum(run.times.values()), run.load()
        print(f"\n{run.label}: {run.hogs} hogs, exit {run.exit_code}, {run.summary}, wall "
              f"{run.wall:.0f} s, test time {total:.0f} s, load min/mean/max {load}")  # fmt: skip
        for name, why in sorted(run.failed.items()):
            print(f"  FAILED {name}: {why}")
        ratio = ""
        if reference is not None and run is not reference:
            ranked = slowdowns(run, reference)
            ref_total = sum(reference.times[n] for n in reference.times if n in run.times)
            same = sum(run.times[n] for n in reference.times if n in run.times)
            ratio = f"{same / ref_total:.2f}x" if ref_total else "-"
            floor = f">= {RANK_FLOOR:.0f} s before"
            print(f"  against {reference.label}: test time {ref_total:.0f} -> {same:.0f} s "
                  f"({ratio}); the {top} that slowed most ({floor}):")  # fmt: skip
            for name, before, after, factor in ranked[:top]:
                print(f"    {factor:5.2f}x  {before:7.1f} -> {after:7.1f} s  {name}")
        slowest = sorted(run.times.items(), key=lambda kv: kv[1], reverse=True)[:top]
        print(f"  the {top} slowest:")
        for name, seconds in slowest:
            print(f"    {seconds:7.1f} s  {name}")
        rows.append([run.label, run.hogs, run.summary, f"{run.wall:.0f}", run.load(),
                     len(run.failed), ratio or "-"])  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=2, help="busy processes beside the runs")
    parser.add_argument("--reference", type=Path, help="a JUnit XML of a run without hogs")
    parser.add_argument(
        "--reference-run", action="store_true", help="first run the selection without hogs"
    )
    parser.add_argument("--top", type=int, default=15, help="tests listed per ranking")
    parser.add_argument("--out", type=Path, help="where the JUnit XMLs and logs go")
    parser.add_argument("--write", action="store_true", help="the table into docs/performance.md")
    parser.add_argument("pytest_args", nargs="+", help="after --: what pytest runs")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="under-load-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"under load: {args.hogs} hogs (a busy core and 4 MB fsync'd writes each); "
          f"JUnit XMLs and logs in {out}", flush=True)  # fmt: skip
    reference: Run | None = None
    if args.reference is not None:
        reference = Run(args.reference.stem, 0)
        read_junit(args.reference, reference)
    runs: list[Run] = []
    if args.reference_run:
        reference = one("reference", 0, args.pytest_args, out)
        runs.append(reference)
        print(f"reference: exit {reference.exit_code}, {reference.summary}", flush=True)
    for number in range(1, args.runs + 1):
        run = one(f"loaded-{number}", args.hogs, args.pytest_args, out)
        runs.append(run)
        print(f"run {number}/{args.runs}: exit {run.exit_code}, {run.summary}, "
              f"load {run.load()}", flush=True)  # fmt: skip
    rows = report(runs, reference, args.top)
    loaded = [r for r in runs if r.hogs]
    if args.write:
        from _report import write_table

        header = ["run", "hogs", "outcome", "wall s", "load min/mean/max", "failed", "vs ref"]
        write_table("under-load", "The suite beside CPU hogs (bench/under_load.py)", header,
                    rows, note="Other jobs shared the machine: the load column is what each "
                    "run saw, hogs and all.")  # fmt: skip
    return 0 if all(r.exit_code == 0 for r in loaded) else 1


if __name__ == "__main__":
    raise SystemExit(main())
