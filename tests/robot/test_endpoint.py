"""RobotEndpoint: spawning, attaching, lifetimes and sim failures."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from procs import alive
from sims import CounterSim

from pytest_hud.robot import RobotClient, RobotEndpoint, RobotError, SimError
from pytest_hud.robot.sim.bridge import ANNOUNCE

HERE = Path(__file__).resolve().parents[1] / "helpers"
pytestmark = pytest.mark.anyio


def wait_dead(pid: int, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


async def episode(ep: RobotEndpoint, **args) -> dict:
    run = await ep.reset(**args)
    async with await RobotClient.connect(ep.url, token=run["token"]) as client:
        obs = await client.get_observation()
        while not obs["terminated"]:
            obs = await client.step([1.0, 0.0])
    return await ep.result(run["token"])


async def test_spawn_from_a_class_and_stop_reaps_the_process() -> None:
    ep = RobotEndpoint(CounterSim, kwargs={"length": 4})
    await ep.start()
    pid = ep.pid
    assert pid is not None and alive(pid)
    cap = await ep.capability()
    assert cap["protocol"] == "openpi/0" and cap["url"] == ep.url
    assert cap["params"]["contract"]["robot_type"] == "counter"
    grade = await episode(ep, seed=2)
    assert grade["total_reward"] == 4.0 and grade["seed"] == 2
    await ep.stop()
    assert wait_dead(pid, 1.0) or not alive(pid)


async def test_spawn_from_an_instance() -> None:
    async with RobotEndpoint(CounterSim(num_envs=3, length=2)) as ep:
        assert ep.num_envs == 3
        assert (await episode(ep))["ticks"] == 2


async def test_spawn_an_explicit_program() -> None:
    argv = [sys.executable, str(HERE / "sim_program.py"), "2"]
    async with RobotEndpoint(argv=argv) as ep:
        assert ep.num_envs == 2
        assert (await episode(ep))["success"] is True


async def test_attach_to_a_sim_someone_else_runs() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "sim_program.py")],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(ANNOUNCE)
        info = json.loads(line.split(" ", 1)[1])
        ep = RobotEndpoint.attach(info["control"])
        await ep.start()
        assert ep.url == info["url"] and ep.pid is None
        assert (await episode(ep))["ticks"] == 5
        await ep.stop()
        assert proc.poll() is None, "stop() on an attached endpoint must not stop the sim"
    finally:
        proc.kill()
        proc.wait(10)


def test_sim_dies_with_its_parent(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import asyncio, sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from sims import CounterSim\n"
        "from pytest_hud.robot import RobotEndpoint\n"
        "async def main():\n"
        "    ep = RobotEndpoint(CounterSim)\n"
        "    await ep.start()\n"
        "    print(ep.pid, flush=True)\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        sim_pid = int(parent.stdout.readline())
        assert alive(sim_pid)
        parent.send_signal(signal.SIGKILL)  # no cleanup code runs in the parent
        parent.wait(10)
        assert wait_dead(sim_pid), "the sim outlived its parent"
    finally:
        parent.kill()


async def test_sim_that_exits_at_boot_reports_its_output() -> None:
    argv = [sys.executable, "-c", "import sys; print('missing GPU driver'); sys.exit(3)"]
    with pytest.raises(SimError, match=r"(?s)exited with code 3 before serving.*missing GPU"):
        await RobotEndpoint(argv=argv).start()


async def test_sim_that_never_announces_is_a_bounded_wait() -> None:
    ep = RobotEndpoint(
        argv=[sys.executable, "-c", "import time; time.sleep(60)"], start_timeout=0.5
    )
    with pytest.raises(SimError, match="did not announce itself within 0.5 s"):
        await ep.start()
    assert ep.pid is None  # stop() ran and reaped it


async def test_crash_mid_episode_errors_the_agent_and_the_endpoint() -> None:
    async with RobotEndpoint(CounterSim, kwargs={"crash_at": 2}) as ep:
        pid = ep.pid
        run = await ep.reset()
        async with await RobotClient.connect(ep.url, token=run["token"]) as client:
            await client.get_observation()
            with pytest.raises(RobotError, match="closed the connection"):
                for _ in range(5):
                    await client.step(np.array([1.0, 0.0]))
        with pytest.raises(SimError, match="exited with code 17"):
            await ep.result(run["token"])
    assert pid is not None and wait_dead(pid, 5)


async def test_reset_that_raises_is_an_error_and_the_sim_keeps_serving() -> None:
    async with RobotEndpoint(CounterSim, kwargs={"fail_reset": True}) as ep:
        with pytest.raises(SimError, match="reset exploded on purpose"):
            await ep.reset(seed=1)
        with pytest.raises(SimError, match="reset exploded on purpose"):
            await ep.reset(seed=1)  # still answering


async def test_result_with_an_unknown_token() -> None:
    async with RobotEndpoint(CounterSim) as ep:
        with pytest.raises(SimError, match="unknown or expired slot token"):
            await ep.result("nope")


def test_targets_must_be_importable_in_the_sim_process() -> None:
    with pytest.raises(TypeError, match="module-level"):
        RobotEndpoint(lambda: CounterSim())
    with pytest.raises(TypeError, match="exactly one of"):
        RobotEndpoint()
