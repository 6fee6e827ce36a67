"""The watchdog that outlives its owner (pytest_hud/plumbing/reaper.py): real processes, real
signals. An owner that dies without releasing it (SIGKILL here: nothing of the owner runs) has
its guarded process groups, the processes naming its folder, and the folder removed, even a
process that ignores SIGINT and SIGTERM (as Ray's GCS server and monitor do); an owner that
released it leaves everything as it was, and the watchdog exits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import alive
from waiting import wait_for

#: an owner: starts a detached group (its leader exits, as `ray start` does, leaving a
#: daemon that ignores SIGINT and SIGTERM) and a second daemon in a group of its own whose
#: command line names the folder; guards them; prints the pids; then waits to be killed
OWNER = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from pytest_hud.plumbing.reaper import Reaper

    folder = sys.argv[1]
    stubborn = (
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    )
    reaper = Reaper()
    if sys.argv[2] == "late":  # the watchdog runs only after its owner died (a loaded machine)
        os.kill(reaper.pid, signal.SIGSTOP)
    reaper.guard(match=folder, folder=folder)
    launcher = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', sys.argv[1]]); "
         "print(p.pid, flush=True)", stubborn],
        stdout=subprocess.PIPE, start_new_session=True, text=True,
    )
    reaper.guard(group=launcher.pid)
    daemon = int(launcher.stdout.readline())
    launcher.wait()
    named = subprocess.Popen(
        [sys.executable, "-c", stubborn, folder], start_new_session=True
    )
    print(reaper.pid, daemon, named.pid, flush=True)
    if sys.argv[2] == "release":
        for pid in (daemon, named.pid):
            os.kill(pid, 9)
        named.wait()
        reaper.release()
        print("released", flush=True)
    time.sleep(600)
    """
)


@contextlib.contextmanager
def _owner(tmp_path: Path, mode: str) -> Iterator[tuple[subprocess.Popen[str], list[int], Path]]:
    """An owner running OWNER in ``mode``, its watchdog's, daemon's and named process's pids,
    and the folder it guards; whatever of them a test leaves alive is killed after it."""
    folder = tmp_path / "held"
    folder.mkdir()
    (folder / "log").write_text("kept until reaped")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(folder), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert owner.stdout is not None
    pids = [int(p) for p in owner.stdout.readline().split()]
    assert len(pids) == 3, "the owner did not start its processes"
    try:
        yield owner, pids, folder
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if owner.poll() is None:
            owner.kill()


def _assert_reaped(daemon: int, named: int, folder: Path, reaper: int) -> None:
    """What the watchdog guarded is gone once its owner died, and so is the watchdog."""
    assert wait_for(lambda: not alive(daemon) and not alive(named), 60), (
        "a guarded process outlived its owner"
    )
    assert wait_for(lambda: not folder.exists(), 30), "the guarded folder is still there"
    assert wait_for(lambda: not alive(reaper), 30), "the watchdog did not exit"


def test_an_owner_killed_outright_has_its_detached_processes_and_folder_reaped(
    tmp_path: Path,
) -> None:
    with _owner(tmp_path, "keep") as (owner, (reaper, daemon, named), folder):
        assert alive(daemon) and alive(named) and alive(reaper)
        owner.kill()  # SIGKILL: no finally, no atexit runs in the owner
        owner.wait(30)
        _assert_reaped(daemon, named, folder, reaper)


def test_orders_the_watchdog_reads_only_after_its_owner_died_are_kept(tmp_path: Path) -> None:
    """On a loaded machine the watchdog can run only after its owner is gone, the owner's
    orders unread in the pipe: it reads them and reaps all the same (it reaped nothing: the
    owner's death came first, bench/under_load.py found it as the test above failing)."""
    with _owner(tmp_path, "late") as (owner, (reaper, daemon, named), folder):
        owner.kill()
        owner.wait(30)
        os.kill(reaper, signal.SIGCONT)
        _assert_reaped(daemon, named, folder, reaper)


def test_a_released_watchdog_exits_and_touches_nothing(tmp_path: Path) -> None:
    with _owner(tmp_path, "release") as (owner, (reaper, _daemon, _named), folder):
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "released"
        assert not alive(reaper), "release() returned with the watchdog still running"
        owner.kill()
        owner.wait(30)
        assert (folder / "log").read_text() == "kept until reaped"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_watchdog_ignores_what_reaches_its_owners_group(tmp_path: Path, sig: int) -> None:
    """A Ctrl-C or SIGTERM sent to the owner's process group does not end the watchdog (it
    is in a session of its own); the owner's death still ends what it guarded."""
    with _owner(tmp_path, "keep") as (owner, (reaper, daemon, named), folder):
        os.killpg(owner.pid, sig)
        owner.wait(30)
        assert wait_for(lambda: not alive(daemon) and not alive(named), 60)
        assert wait_for(lambda: not folder.exists() and not alive(reaper), 30)
