"""Soak: many items under the docker runtime on a busy machine, then the same rows locally.

One pytest session of ``--rows`` CartPole rows (``bench/envs/cheap.py``, the zero agent,
seeded resets: every row's steps and reward are deterministic) with ``-n WORKERS
--hud-runtime=docker`` and the warm pool at its default, while ``--hogs`` processes keep
the CPU and the disk busy. Sampled every ``--every`` seconds: the items finished (the
ledger's lines), and the RSS, threads and open fds of the controller and each worker.
After it: no process of the session alive, no container labelled ``pytest-hud`` left,
no listening port that was not there before. Then the same rows with
``--hud-runtime=local``: every row's outcome, steps and reward must match.

    PYTHONPATH=$PWD .venv/bin/python bench/soak.py [--rows 2000] [--workers 2] [--hogs 2]
        [--json out.json]

Exit 0 when every check holds; the figures (RSS per 1000 items after warm-up) are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TEST = """
import pytest
from cheap import env  # noqa: F401  (declares the env the image serves)
from pytest_hud import Task

ROWS = [Task("cheap", "balance", {{"seed": s}}) for s in range({rows})]


@pytest.mark.hud(tasks=ROWS)
def test_balance(hud_result):
    assert hud_result.error is None, hud_result.error
"""

HOG = """
import os, sys, tempfile, time
end = time.monotonic() + float(sys.argv[1])
path = tempfile.mktemp(prefix="soak-hog-")
n = 0
while time.monotonic() < end:  # CPU, and every so often 4 MB to disk, fsync'd
    n += sum(i * i for i in range(20000))
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 22)); f.flush(); os.fsync(f.fileno())
os.unlink(path)
"""


@dataclass
class Sample:
    t: float
    done: int
    rss_mb: dict[str, float]
    threads: dict[str, int]
    fds: dict[str, int]


@dataclass
class Soak:
    rows: int
    workers: int
    runtime: str
    wall: float = 0.0
    exit_code: int | None = None
    reported: int = 0
    leftover_processes: list[int] = field(default_factory=list)
    leftover_containers: list[str] = field(default_factory=list)
    new_listeners: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


def _status(pid: int) -> tuple[float, int] | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    rss = int(fields.get("VmRSS", "0 kB").split()[0]) / 1024
    return rss, int(fields.get("Threads", "0"))


def _fds(pid: int) -> int:
    with contextlib.suppress(OSError):
        return len(os.listdir(f"/proc/{pid}/fd"))
    return 0


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == str(pid) and fields[0] != "Z":
                out.append(int(stat.parent.name))
    return out


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _workers(pid: int) -> dict[str, int]:
    """The controller and its xdist workers (python children running pytest's worker)."""
    named = {"controller": pid}
    for i, child in enumerate(sorted(_children(pid))):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"python" in cmd:
                named[f"worker{i}"] = child
    return named


def _listeners(pids: set[int] | None = None) -> set[str]:
    """Listening TCP addresses; with ``pids``, only those of these processes or of a
    docker-proxy (a published container port)."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=False).stdout
    found = set()
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        owners = {int(x) for x in re.findall(r"pid=(\d+)", line)}
        if pids is None or "docker-proxy" in line or owners & pids:
            found.add(cols[3])
    return found


def _containers() -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "label=pytest-hud"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.split()


def _lines(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.read_bytes().count(b'"kind":"episode"')
    return 0


def session(folder: Path, rows: int, workers: int, runtime: str, every: float) -> Soak:
    out = Soak(rows, workers, runtime)
    ledger = folder / f"{runtime}.ledger.jsonl"
    results = folder / f"{runtime}.json"
    argv = [sys.executable, "-m", "pytest", str(folder / "test_rows.py"), "-q",
            "-p", "no:cacheprovider", f"-n{workers}", f"--hud-runtime={runtime}",
            "--hud-agent=zero", f"--hud-ledger={ledger}", f"--hud-results={results}"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "bench" / "envs"), str(ROOT)]))
    before = _listeners()
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    seen: set[int] = set()
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stdout or []), daemon=True)
    reader.start()
    while proc.poll() is None:
        seen.update(_tree(proc.pid))
        named = _workers(proc.pid)
        stats = {name: _status(pid) for name, pid in named.items()}
        out.samples.append(
            Sample(
                t=round(time.monotonic() - start, 1),
                done=_lines(ledger),
                rss_mb={n: round(s[0], 1) for n, s in stats.items() if s},
                threads={n: s[1] for n, s in stats.items() if s},
                fds={n: _fds(named[n]) for n in stats},
            )
        )
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=every)
    reader.join(timeout=30)
    out.wall = time.monotonic() - start
    out.exit_code = proc.returncode
    if out.exit_code != 0:
        print("".join(log[-40:]), file=sys.stderr)
    doc = json.loads(results.read_text()) if results.exists() else {"rollouts": []}
    out.reported = len(doc["rollouts"])
    time.sleep(1.0)  # containers are removed by the session before it exits; let the engine settle
    out.leftover_processes = sorted(p for p in seen if p != proc.pid and _status(p) is not None)
    out.leftover_containers = _containers() if runtime.startswith("docker") else []
    out.new_listeners = sorted(_listeners(seen) - before)
    return out


def outcomes(folder: Path, runtime: str) -> dict[str, tuple[object, ...]]:
    doc = json.loads((folder / f"{runtime}.json").read_text())
    return {r["nodeid"]: (r["outcome"], r.get("steps"), r.get("score")) for r in doc["rollouts"]}


def growth(samples: list[Sample], rows: int) -> dict[str, float]:
    """RSS growth per 1000 items after warm-up (from a quarter of the items to the end)."""
    warm = [s for s in samples if s.done >= rows // 4]
    out = {}
    for name in {n for s in warm for n in s.rss_mb}:
        have = [s for s in warm if name in s.rss_mb]
        if len(have) >= 2 and have[-1].done > have[0].done:
            per = 1000 / (have[-1].done - have[0].done)
            out[name] = round((have[-1].rss_mb[name] - have[0].rss_mb[name]) * per, 2)
    return dict(sorted(out.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=2, help="busy processes beside the soak")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--json", type=Path, help="write the figures and checks here")
    args = parser.parse_args()
    hogs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_rows.py").write_text(TEST.format(rows=args.rows))
        hogs = [subprocess.Popen([sys.executable, "-c", HOG, "3600"]) for _ in range(args.hogs)]
        try:
            docker = session(folder, args.rows, args.workers, "docker", args.every)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        local = session(folder, args.rows, args.workers, "local", args.every)
        same = outcomes(folder, "docker") == outcomes(folder, "local")
    checks = {
        "docker session exit 0": docker.exit_code == 0,
        "every item reported": docker.reported == args.rows == local.reported,
        "no process left": not docker.leftover_processes,
        "no container left": not docker.leftover_containers,
        "no listening port left": not docker.new_listeners,
        "same outcomes as local": same,
    }
    rss = growth(docker.samples, args.rows)
    print(f"soak: {args.rows} rows, -n {args.workers}, docker, {args.hogs} hogs beside it")
    print(f"  wall docker {docker.wall:.1f} s, local {local.wall:.1f} s")
    names = max((s.rss_mb for s in docker.samples), key=len)
    print("  t(s)  items  " + "  ".join(f"{n} RSS MB/thr/fd" for n in names))
    step = max(1, len(docker.samples) // 12)
    for s in docker.samples[::step]:
        cells = "  ".join(
            f"{s.rss_mb[n]:7.1f}/{s.threads.get(n, 0)}/{s.fds.get(n, 0)}" for n in s.rss_mb
        )
        print(f"  {s.t:5.0f}  {s.done:5d}  {cells}")
    print(f"  RSS growth after warm-up, MB per 1000 items: {rss}")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "checks": checks,
                    "rss_growth": rss,
                    "docker": asdict(docker),
                    "local_wall": local.wall,
                },
                indent=1,
            )
        )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
