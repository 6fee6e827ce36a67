"""Soak: many items under the docker runtime on a busy machine, then the same rows locally.

One pytest session of ``--rows`` CartPole rows (``bench/envs/cheap.py``, the zero agent,
seeded resets: every row's steps and reward are deterministic) with ``-n WORKERS
--hud-runtime=docker`` and the warm pool at its default, while ``--hogs`` processes keep
the CPU and the disk busy. Sampled every ``--every`` seconds: the items finished (the
ledger's lines), and the RSS, threads and open fds of the controller and each worker.
After it (each a bounded wait): no process of the session alive, no container labelled with
its session id left, no new listening port of its processes or containers (other sessions
on the machine are not the soak's). Then the same rows with
``--hud-runtime=local``: every row's outcome, steps and reward must match.

Each process of the session also measures itself (a conftest the soak writes beside the
rows: counts, not times): its RSS after every item it ran (or, on the xdist controller,
received), and its open fds and threads at session start and again at its end, after
pytest-hud's teardown (at unconfigure; a worker's end is measured at session finish too,
before xdist hears it finished: the controller's teardown interrupts a worker still busy
5 s later, which a loaded machine reached). Checks: every process (the controller and each
worker, whatever share of the items it ran) measured its start and its end; after warm-up
(a quarter of a process's items, at least 2) its RSS grows by at most :data:`RSS_BOUND_MB`
plus :data:`RSS_PER_ITEM_KB` per further item; its fds and threads end within
:data:`FD_SLACK` / :data:`THREAD_SLACK` of their start, apart from pytest-hud's bounded
process pools (the Docker SDK's kept-alive connections to the engine, the executor threads
named in the probe's ``POOLS``), which are held to :data:`ENGINE_CAP` / :data:`POOL_CAP`.
A leak of one fd or thread per item breaks those at any size; an object leaked per item
breaks the RSS bound once its size times the items after warm-up passes it (at CI's 12
rows, about 6 items a worker: objects of ~8 MB; at 2,000 rows: ~60 KB).
``--leak fd,thread,memory`` (any of them) injects such a leak in every process, to show
the checks catch it; ``--local-only`` skips the docker session (no outcome comparison).

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
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: RSS a process may gain after warm-up, plus this much per further item (a controller
#: keeps each item's row and reports; MB and KB)
RSS_BOUND_MB, RSS_PER_ITEM_KB = 32.0, 16.0
#: fds / threads a process may hold at its end beyond its start, apart from pytest-hud's
#: bounded process pools (the Docker SDK's kept-alive connections to the engine, the
#: executor threads in ``POOLS`` below), which are held to their caps instead
FD_SLACK, THREAD_SLACK = 2, 1
ENGINE_CAP, POOL_CAP = 64, 80
#: what ``--leak memory`` leaks per item (MB)
LEAKED_MB = 12

#: The soak's own conftest: each process measures itself (see the module doc) into
#: probe-<pid>.json beside it; SOAK_LEAK injects a leak per item.
PROBE = """
import json, os, threading, time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
KEPT = []  # what --leak holds on to


def _now():
    status = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines()
        if ":" in line
    )
    return {
        "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
        "threads": int(status["Threads"]),
        "fds": len(os.listdir("/proc/self/fd")),
    }


#: threads of the bounded pools pytest-hud keeps for the process (not per session)
POOLS = ("pytest-hud-docker", "pytest-hud-model", "asyncio_")


def _engine_sockets():  # this process's unix sockets whose peer is the Docker engine's
    import subprocess
    out = subprocess.run(["ss", "-xanp"], capture_output=True, text=True).stdout.splitlines()
    path = {}
    for line in out:
        cols = line.split()
        if len(cols) >= 8:
            path[cols[5]] = cols[4]
    mine = set()
    for line in out:
        cols = line.split()
        if f"pid={os.getpid()}," in line and len(cols) >= 8:
            if path.get(cols[7], "").endswith("docker.sock"):
                mine.add(f"socket:[{cols[5]}]")
    return mine


def _held():  # what the process holds: fds (the engine's connections apart), threads
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    engine = _engine_sockets()
    names = [t.name for t in threading.enumerate()]
    pools = [n for n in names if n.startswith(POOLS)]
    return {
        "other_fds": sorted(f for f in fds if f not in engine),
        "engine_fds": len([f for f in fds if f in engine]),
        "other_threads": sorted(n for n in names if not n.startswith(POOLS)),
        "pool_threads": len(pools),
    }


class Probe:
    def __init__(self, config):
        self.role = getattr(config, "workerinput", {}).get("workerid", "controller")
        self.doc = {"role": self.role, "start": None, "end": None, "items": [], "ends": []}

    def _write(self):  # the whole document again each time: what the last write saw
        path = HERE / f"probe-{os.getpid()}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.doc))
        os.replace(tmp, path)

    def _end(self, where):
        self.doc["end"] = {**_now(), **_held(), "where": where, "t": time.time()}
        self.doc["ends"].append(where)
        self._write()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self):
        self.doc["start"] = {**_now(), **_held(), "t": time.time()}
        self._write()

    def pytest_runtest_logreport(self, report):
        if report.when != "teardown":
            return
        leaks = os.environ.get("SOAK_LEAK", "").split(",")
        if "fd" in leaks:
            KEPT.append(open(os.devnull))
        if "thread" in leaks:
            stop = threading.Event()
            KEPT.append(stop)
            threading.Thread(target=stop.wait, daemon=True).start()
        if "memory" in leaks:
            KEPT.append(bytearray(os.urandom(1 << 20)) * int(os.environ["SOAK_LEAK_MB"]))
        self.doc["items"].append(_now())

    # After pytest-hud's own sessionfinish (which closes its rollouts, substrates and
    # servers) and, in a worker, before xdist tells the controller it finished: past that
    # point the controller's teardown interrupts a worker still running after 5 s and
    # kills it after 10 (execnet), which a loaded machine can reach in unconfigure.
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self):
        self._end("sessionfinish")

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self):  # again after pytest-hud's unconfigure, when it gets there
        self._end("unconfigure")


def pytest_configure(config):
    config.pluginmanager.register(Probe(config), "soak-probe")
"""

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
import os, signal, sys, tempfile, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stopped by terminate(): clean up
end = time.monotonic() + float(sys.argv[1])
parent = os.getppid()  # a hog whose starter died (SIGKILLed by a test's timeout) stops too
fd, path = tempfile.mkstemp(prefix="soak-hog-")
os.close(fd)
n = 0
try:
    while time.monotonic() < end and os.getppid() == parent:  # CPU, 4 MB to disk, fsync'd
        n += sum(i * i for i in range(20000))
        with open(path, "wb") as f:
            f.write(os.urandom(1 << 22)); f.flush(); os.fsync(f.fileno())
finally:
    os.unlink(path)
"""


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (a hog then removes its file), SIGKILL for one still there after 10 s."""
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        try:
            hog.wait(timeout=10)
        except subprocess.TimeoutExpired:
            hog.kill()
            hog.wait()


@dataclass
class Sample:
    t: float
    done: int
    rss_mb: dict[str, float]
    threads: dict[str, int]
    fds: dict[str, int]


@dataclass
class Probe:
    """One process's own measurements (the conftest above)."""

    role: str
    start: dict[str, Any] | None  # at session start
    end: dict[str, Any] | None  # at unconfigure, else at session finish (see PROBE)
    items: list[dict[str, float]]  # rss_mb, fds, threads after each item
    ends: list[str] = field(default_factory=list)  # where it measured its end


@dataclass
class Soak:
    rows: int
    workers: int
    runtime: str
    probes: list[Probe] = field(default_factory=list)
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


def _started(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot); "" once it is gone or a zombie."""
    with contextlib.suppress(OSError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return "" if fields[0] in "ZX" else fields[19]
    return ""


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


def _listeners(
    pids: set[int] | None = None, ips: set[str] | frozenset[str] = frozenset()
) -> set[str]:
    """Listening TCP addresses; with ``pids``, only those of these processes or of a
    docker-proxy publishing a port of a container at one of ``ips`` (the session's: other
    sessions on this machine publish theirs)."""
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=False).stdout
    found = set()
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        owners = {int(x) for x in re.findall(r"pid=(\d+)", line)}
        if pids is None or owners & pids or ("docker-proxy" in line and _proxied(owners) & ips):
            found.add(cols[3])
    return found


def _proxied(pids: set[int]) -> set[str]:
    """The container addresses these docker-proxy processes forward to."""
    found = set()
    for pid in pids:
        with contextlib.suppress(OSError, ValueError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            found.add(argv[argv.index("-container-ip") + 1])
    return found


def _containers(session_id: str) -> list[str]:
    """The session's containers (labelled with its id), running or not."""
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=pytest-hud.session={session_id}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.split()


def _others_ips(session_id: str) -> set[str]:
    """The addresses other sessions' running containers hold now (the engine gives a
    removed container's address to the next one)."""
    out = subprocess.run(["docker", "ps", "-q"], capture_output=True, text=True, check=False)
    mine = set(_containers(session_id))
    return _container_ips([c for c in out.stdout.split() if c not in mine])


def _container_ips(ids: list[str]) -> set[str]:
    if not ids:
        return set()
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
         *ids], capture_output=True, text=True, check=False,
    )  # fmt: skip
    return set(out.stdout.split())


def _settled(check: Callable[[], object], seconds: float = 60.0) -> None:
    """Wait (bounded) until ``check()`` is falsy: what a session ends exits a moment after
    it (a zygote when its lifeline closes; the engine's removal of a container)."""
    deadline = time.monotonic() + seconds
    while check() and time.monotonic() < deadline:
        time.sleep(0.5)


def _lines(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.read_bytes().count(b'"kind":"episode"')
    return 0


def session(
    folder: Path, rows: int, workers: int, runtime: str, every: float, leak: str = "none"
) -> Soak:
    out = Soak(rows, workers, runtime)
    for old in [*folder.glob("probe-*.json"), *folder.glob("probe-*.tmp")]:
        old.unlink()
    ledger = folder / f"{runtime}.ledger.jsonl"
    results = folder / f"{runtime}.json"
    argv = [sys.executable, "-m", "pytest", str(folder / "test_rows.py"), "-q",
            "-p", "no:cacheprovider", f"-n{workers}", f"--hud-runtime={runtime}",
            "--hud-agent=zero", f"--hud-ledger={ledger}", f"--hud-results={results}"]  # fmt: skip
    session_id = uuid.uuid4().hex  # the label of the session's containers
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "bench" / "envs"), str(ROOT)]))
    env["PYTEST_HUD_SESSION"] = session_id
    if leak != "none":
        env.update(SOAK_LEAK=leak, SOAK_LEAK_MB=str(LEAKED_MB))
    before = _listeners()
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    seen: dict[int, str] = {}  # pid -> its start time (a pid reused later is not ours)
    ips: set[str] = set()  # the addresses the session's containers had
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stdout or []), daemon=True)
    reader.start()
    while proc.poll() is None:
        seen.update((p, _started(p)) for p in _tree(proc.pid))
        if runtime.startswith("docker"):
            ips |= _container_ips(_containers(session_id))
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

    def alive() -> list[int]:
        return sorted(p for p, t in seen.items() if p != proc.pid and t and _started(p) == t)

    _settled(alive)
    out.leftover_processes = alive()
    if runtime.startswith("docker"):
        _settled(lambda: _containers(session_id))
        out.leftover_containers = _containers(session_id)
    # the session's processes still alive (on a busy machine a pid of the session's is soon
    # another process's, which may listen) and docker-proxies to addresses its containers
    # had that no other session's container holds now
    others = _others_ips(session_id) if runtime.startswith("docker") else set()
    out.new_listeners = sorted(_listeners(set(alive()), ips - others) - before)
    out.probes = [Probe(**json.loads(p.read_text())) for p in sorted(folder.glob("probe-*.json"))]
    return out


def rss_growth(probe: Probe) -> tuple[float, float] | None:
    """(MB gained from warm-up to the last item, the bound for it); None: too few items."""
    items = [i["rss_mb"] for i in probe.items]
    warm = max(2, len(items) // 4)
    if len(items) <= warm:
        return None
    bound = RSS_BOUND_MB + RSS_PER_ITEM_KB / 1024 * (len(items) - warm)
    return round(items[-1] - items[warm - 1], 1), round(bound, 1)


def slope_per_100(probe: Probe) -> float | None:
    """Least-squares RSS slope over a process's last half of items, MB per 100 items."""
    ys = [i["rss_mb"] for i in probe.items[len(probe.items) // 2 :]]
    if len(ys) < 3:
        return None
    n, mx, my = len(ys), (len(ys) - 1) / 2, sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in range(n))
    return round(100 * sum((x - mx) * (y - my) for x, y in enumerate(ys)) / den, 2)


def measured_itself(soak: Soak) -> bool:
    """The controller and each of the session's workers measured its start and its end,
    whatever share of the items it ran (none included): a worker measures its end before
    xdist hears it finished, so the controller's teardown cannot cut it short."""
    roles = [p.role for p in soak.probes]
    workers = [r for r in roles if r != "controller"]
    return (
        roles.count("controller") == 1
        and len(workers) == len(set(workers)) == soak.workers
        and all(p.start is not None and p.end is not None for p in soak.probes)
    )


def probe_checks(soak: Soak) -> dict[str, bool]:
    """Every process measured itself; RSS flat after warm-up, fds and threads back to
    their start, per process."""
    ran = [p for p in soak.probes if p.start is not None and p.end is not None]
    growth = {p.role: rss_growth(p) for p in ran}
    return {
        "every process measured itself": measured_itself(soak),
        "RSS flat after warm-up": all(g is None or g[0] <= g[1] for g in growth.values())
        and any(g is not None for g in growth.values()),
        "fds back to their start": all(
            len(p.end["other_fds"]) - len(p.start["other_fds"]) <= FD_SLACK
            and p.end["engine_fds"] <= ENGINE_CAP
            for p in ran
            if p.start is not None and p.end is not None
        ),
        "threads back to their start": all(
            len(p.end["other_threads"]) - len(p.start["other_threads"]) <= THREAD_SLACK
            and p.end["pool_threads"] <= POOL_CAP
            for p in ran
            if p.start is not None and p.end is not None
        ),
    }


def left_over(p: Probe) -> str:
    """What a process holds at its end beyond its start (pools apart), for the report."""
    from collections import Counter

    if p.start is None or p.end is None:
        return "its start or end was not measured"
    fds = sorted((Counter(p.end["other_fds"]) - Counter(p.start["other_fds"])).elements())
    threads = sorted(
        (Counter(p.end["other_threads"]) - Counter(p.start["other_threads"])).elements()
    )
    return f"new fds {fds[:6]}, new threads {threads[:6]}" if fds or threads else ""


def print_probes(soak: Soak) -> None:
    print(f"  {soak.runtime}: per process, RSS after warm-up (gained / bound, MB), "
          "slope over the last half (MB per 100 items), fds and threads start -> end")  # fmt: skip
    for p in sorted(soak.probes, key=lambda p: p.role):
        if p.start is None or p.end is None:
            print(f"    {p.role:10s} items {len(p.items):4d}  start or end not measured")
            continue
        g = rss_growth(p)
        first, last = (p.items[0], p.items[-1]) if p.items else ({}, {})
        print(
            f"    {p.role:10s} items {len(p.items):4d}  RSS {first.get('rss_mb', 0):6.1f}"
            f" -> {last.get('rss_mb', 0):6.1f}  gained {g[0] if g else '-'} / "
            f"{g[1] if g else '-'}  slope {slope_per_100(p)}  fds {p.start['fds']:.0f} -> "
            f"{p.end['fds']:.0f} ({p.end['engine_fds']} to the engine)  threads "
            f"{p.start['threads']:.0f} -> {p.end['threads']:.0f} ({p.end['pool_threads']} pooled)"
            f"  end at {p.end['where']}"
        )
        extra = left_over(p)
        if extra:
            print(f"      {extra}")


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
    parser.add_argument(
        "--leak",
        default="none",
        help="leak per item in every process: fd, thread, memory or a comma list of them "
        "(shows the checks catch it)",
    )
    parser.add_argument("--local-only", action="store_true", help="skip the docker session")
    args = parser.parse_args()
    if args.local_only:
        return local_only(args)
    hogs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_rows.py").write_text(TEST.format(rows=args.rows))
        (folder / "conftest.py").write_text(PROBE)
        hogs = [subprocess.Popen([sys.executable, "-c", HOG, "3600"]) for _ in range(args.hogs)]
        try:
            docker = session(folder, args.rows, args.workers, "docker", args.every, args.leak)
        finally:
            stop_hogs(hogs)
        local = session(folder, args.rows, args.workers, "local", args.every, args.leak)
        same = outcomes(folder, "docker") == outcomes(folder, "local")
    checks = {
        "docker session exit 0": docker.exit_code == 0,
        "every item reported": docker.reported == args.rows == local.reported,
        "no process left": not docker.leftover_processes,
        "no container left": not docker.leftover_containers,
        "no listening port left": not docker.new_listeners,
        "same outcomes as local": same,
        **probe_checks(docker),
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
    print_probes(docker)
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


def local_only(args: argparse.Namespace) -> int:
    """The rows under the local runtime alone, with the per-process checks."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_rows.py").write_text(TEST.format(rows=args.rows))
        (folder / "conftest.py").write_text(PROBE)
        local = session(folder, args.rows, args.workers, "local", args.every, args.leak)
    checks = {
        "local session exit 0": local.exit_code == 0,
        "every item reported": local.reported == args.rows,
        **probe_checks(local),
    }
    print(f"soak: {args.rows} rows, -n {args.workers}, local only, leak {args.leak}")
    print_probes(local)
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    if args.json:
        args.json.write_text(json.dumps({"checks": checks, "local": asdict(local)}, indent=1))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
