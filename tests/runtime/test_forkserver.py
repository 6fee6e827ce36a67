"""The fork server (issue 18): fresh substrates forked from a pre-imported zygote keep the
isolation of a plain spawn, the same error texts, and leave no process behind.

Real sims (CounterSim subclasses over the real wire), real env servers, a real zygote.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents import zero_agent
from procs import live_children_of
from sims import BootFails, BootHangs, CounterSim, LearningSim

from pytest_hud import LocalRuntime, SubprocessRuntime, Task
from pytest_hud.forkserver import client as forkserver
from pytest_hud.forkserver.zygote import compatible
from pytest_hud.robot import RobotEndpoint, SimError
from pytest_hud.runtime import rollout

HERE = Path(__file__).resolve().parents[1] / "helpers"
LEAK = HERE / "envs" / "leak_env.py"
pytestmark = pytest.mark.anyio


def gone(pid: int, seconds: float = 30.0) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def zygote_of(pid: int) -> forkserver._Zygote:
    """The zygote that forked ``pid`` (its parent)."""
    ppid = parent(pid)
    (zygote,) = [z for z in forkserver.zygotes() if z.pid == ppid]
    return zygote


@pytest.fixture
def fork_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``plain`` (PYTEST_HUD_FORK=0), ``fork`` or ``preload`` (the zygote also imports the
    test sims' module, whose classes count in process-global state)."""
    mode = request.param
    monkeypatch.setenv(forkserver.SWITCH, "0" if mode == "plain" else "1")
    # A fresh slate: earlier tests in this worker may have used up the zygote slots, killed
    # zygotes of this environment or taught one a module that started a thread; any of those
    # turns this test's forks into plain spawns.
    forkserver.shutdown()
    monkeypatch.setattr(forkserver, "_deaths", {})
    monkeypatch.setattr(forkserver, "_denied", {})
    monkeypatch.setattr(forkserver, "last_plain", None)
    if mode == "preload":
        monkeypatch.setenv(forkserver.PRELOAD, "sims")
    yield mode


@pytest.mark.parametrize("fork_mode", ["plain", "fork", "preload"], indirect=True)
@pytest.mark.parametrize("runtime", ["local", "subprocess"])
async def test_fresh_rollouts_share_no_state(fork_mode: str, runtime: str) -> None:
    """Every fresh rollout sees a new sim process (never reused) that was built once and
    reset once, and a new env module that ran its template once, forked or not."""
    provider = LocalRuntime(LEAK) if runtime == "local" else SubprocessRuntime(LEAK)
    grades = []
    for seed in range(3):
        result = await rollout(Task("leak", "count", {"seed": seed}), zero_agent, provider)
        assert result.error is None, result.error
        grades.append(result.grade)
    assert [(g["builds"], g["resets"], g["server_runs"]) for g in grades] == [(1, 1, 1)] * 3
    assert len({g["pid"] for g in grades}) == 3, "a sim process served two rollouts"
    forked = {g["comm"] == "hud program" for g in grades}
    assert forked == {fork_mode != "plain"}, (grades, forkserver.last_plain)  # the path ran


@pytest.mark.parametrize("fork_mode", ["plain", "fork"], indirect=True)
async def test_the_zygote_learns_what_its_children_import(fork_mode: str) -> None:
    """A library module the first child imported is loaded before the next one starts."""
    seen, forked = [], []
    for _ in range(2):
        async with RobotEndpoint(LearningSim) as ep:
            assert ep._child is not None
            forked.append(ep._child.forked)
            run = await ep.reset()
            seen.append((await ep.result(run["token"]))["preloaded"])
    assert forked == [fork_mode == "fork"] * 2, forkserver.last_plain
    assert seen == ([False, True] if fork_mode == "fork" else [False, False])


@pytest.mark.parametrize("fork_mode", ["plain", "fork"], indirect=True)
async def test_boot_failures_read_the_same_forked_or_not(fork_mode: str) -> None:
    with pytest.raises(SimError, match=r"(?s)exited with code 3 before serving.*missing GPU"):
        await RobotEndpoint(BootFails).start()
    ep = RobotEndpoint(BootHangs, start_timeout=1.0)
    with pytest.raises(SimError, match="did not announce itself within 1.0 s"):
        await ep.start()
    assert ep.pid is None


@pytest.mark.parametrize("fork_mode", ["fork"], indirect=True)
async def test_a_variable_a_preload_sets_keeps_forks_forked(
    fork_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gymnasium sets PYGAME_HIDE_SUPPORT_PROMPT when imported, so the zygote's preload sets
    it; a requester whose environment lacks it (a test removed it after its own import) is
    still forked: the zygote compares requests with the environment it was started with.
    (CI found every fork turned plain: 'environment differs in PYGAME_HIDE_SUPPORT_PROMPT'.)"""
    monkeypatch.delenv("PYGAME_HIDE_SUPPORT_PROMPT", raising=False)
    async with RobotEndpoint(CounterSim) as ep:
        assert ep._child is not None and ep._child.forked, forkserver.last_plain


@pytest.mark.parametrize("fork_mode", ["fork"], indirect=True)
async def test_a_crashed_child_is_reaped_and_the_zygote_serves_on(fork_mode: str) -> None:
    async with RobotEndpoint(CounterSim, kwargs={"crash_at": 0}) as ep:
        pid = ep.pid
        assert pid is not None and ep._child is not None and ep._child.forked, forkserver.last_plain
        zygote = zygote_of(pid)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SimError, match="exited with code -9|killed by signal SIGKILL"):
            await ep.reset()
    assert gone(pid)
    assert zygote.pid is not None and live_children_of(zygote.pid) == set()
    async with RobotEndpoint(CounterSim) as again:  # the zygote still forks
        assert again._child is not None and again._child.forked, forkserver.last_plain


@pytest.mark.parametrize("fork_mode", ["fork"], indirect=True)
async def test_a_dead_zygote_means_plain_spawns_never_a_hang(fork_mode: str) -> None:
    async with RobotEndpoint(CounterSim) as before:
        assert before._child is not None and before._child.forked, forkserver.last_plain
        assert before.pid is not None
        zygote = zygote_of(before.pid)
        assert zygote.popen is not None
        os.kill(zygote.popen.pid, signal.SIGKILL)
        zygote.popen.wait(10)
        async with asyncio.timeout(60):
            async with RobotEndpoint(CounterSim) as after:
                assert after._child is not None and not after._child.forked
        sim = before.pid
    assert sim is not None and gone(sim)  # its lifeline still ended it
    async with RobotEndpoint(CounterSim) as later:  # a new zygote took the dead one's place
        assert later._child is not None and later._child.forked, forkserver.last_plain
        assert later.pid is not None and zygote_of(later.pid) is not zygote


def test_a_path_entry_that_would_shadow_a_preloaded_module_is_refused(tmp_path: Path) -> None:
    """A test folder on PYTHONPATH forks; another checkout of a preloaded package does not."""
    env = {"PYTHONPATH": str(tmp_path), "A": "1"}
    loaded = {"numpy", "pytest_hud"}
    (tmp_path / "my_env.py").write_text("")
    assert compatible(env, "/", {"A": "1"}, sys.path, loaded) is None
    (tmp_path / "numpy").mkdir()
    why = compatible(env, "/", {"A": "1"}, sys.path, loaded)
    assert why is not None and "['numpy']" in why
    assert "differs in A" in (compatible(env, "/", {"A": "2"}, sys.path, loaded) or "")


def test_shutdown_leaves_no_zygote_and_no_child(tmp_path: Path) -> None:
    """A separate process owns a zygote and two forked sims, then exits normally: the
    zygote (atexit + lifeline) and every child are gone; with SIGKILL, the lifelines.
    Either way the zygote's socket folder goes with it."""
    script = tmp_path / "owner.py"
    script.write_text(
        "import asyncio, sys, time\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from sims import CounterSim\n"
        "from pytest_hud.forkserver import client\n"
        "from pytest_hud.robot import RobotEndpoint\n"
        "async def main():\n"
        "    eps = [RobotEndpoint(CounterSim) for _ in range(2)]\n"
        "    for ep in eps: await ep.start()\n"
        "    print(client.zygotes()[0].dir, flush=True)\n"
        "    print(client.zygotes()[0].pid, *[ep.pid for ep in eps], flush=True)\n"
        "    if sys.argv[1] == 'hold': time.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    import subprocess

    for how in ("exit", "hold"):
        owner = subprocess.Popen(
            [sys.executable, str(script), how], stdout=subprocess.PIPE, text=True
        )
        try:
            assert owner.stdout is not None
            folder = Path(owner.stdout.readline().strip())
            pids = [int(p) for p in owner.stdout.readline().split()]
            assert len(pids) == 3, pids
            if how == "hold":
                owner.send_signal(signal.SIGKILL)
            owner.wait(60)
            left = [p for p in pids if not gone(p, 40)]
            assert left == [], f"owner {how}: processes left {left} of zygote+sims {pids}"
            assert folder.name.startswith("pytest-hud-zygote-")
            assert not folder.exists(), f"owner {how}: {sorted(os.listdir(folder))} left"
        finally:
            owner.kill()
            owner.wait(10)
