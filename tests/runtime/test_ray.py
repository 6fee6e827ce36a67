"""RayRuntime on a REAL two-node Ray cluster on this machine, bound to 127.0.0.1.

One cluster per session (tests/helpers/ray_cluster.py): a head plus a second node offering the
custom resource ``libero``, both ``--node-ip-address=127.0.0.1``. The env servers run in
real Ray actors; rollouts cross the real control channel and robot wire to them.
Skipped only when ``ray`` is not importable (a failure under PYTEST_HUD_REQUIRE_ALL=1).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agents import zero_agent
from needs import require
from paths import HELPERS
from ray_cluster import LocalCluster

import pytest_hud
from pytest_hud import LocalRuntime, Shared, Task, Taskset, run
from pytest_hud.robot import RobotClient
from pytest_hud.runtime import rollout
from pytest_hud.runtime.ray import RayRuntime, live_actors

ROOT = Path(__file__).resolve().parents[2]
PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"
LOOPBACK = re.compile(r"^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]|\[::1\]):\d+$")

pytestmark = [pytest.mark.ray, pytest.mark.anyio, pytest.mark.xdist_group("ray")]


def example_rows() -> list[Task]:
    rows = list(Taskset.load(PENDULUM))
    return [t for t in rows if t.env == "pendulum"][:2] + [t for t in rows if t.env == "cartpole"][
        :2
    ]


def outcomes(results: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.task.key, r.error, r.steps, r.total_reward, r.success) for r in results]


def alive_actors() -> list[Any]:
    from ray.util.state import list_actors

    return list_actors(filters=[("state", "!=", "DEAD")], timeout=30)


def libero_node() -> str:
    import ray

    (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "libero" in n["Resources"]]
    return str(node)


def test_every_port_of_the_cluster_is_loopback(cluster: LocalCluster) -> None:
    pids = set(cluster.pids())
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    ours = [
        line for line in out.splitlines() if {int(p) for p in re.findall(r"pid=(\d+)", line)} & pids
    ]
    addresses = [line.split()[3] for line in ours]
    assert (
        f"[::ffff:127.0.0.1]:{cluster.port}" in addresses
        or f"127.0.0.1:{cluster.port}" in addresses
    )
    stray = [line for line in ours if not LOOPBACK.match(line.split()[3])]
    assert not stray, "cluster ports beyond 127.0.0.1:\n" + "\n".join(stray)


async def test_rollouts_through_ray_match_the_local_runtime(cluster: LocalCluster) -> None:
    rows = example_rows()
    local = await run(rows, zero_agent, runtime=LocalRuntime(PENDULUM), max_concurrent=2)
    remote = await run(rows, zero_agent, runtime=RayRuntime(PENDULUM), max_concurrent=2)
    assert all(r.error is None and r.steps for r in remote), outcomes(remote)
    assert outcomes(remote) == outcomes(local)


async def test_the_actor_reports_its_node_and_loopback_ports(cluster: LocalCluster) -> None:
    row = Task("pendulum", "swing_up", {"seed": 0}, runtime_config={"resources": {"libero": 1}})
    async with RayRuntime(PENDULUM)(row) as placed:
        params = placed.params
        assert params["kind"] == "ray" and params["node_id"] == libero_node()
        assert params["host"] == "127.0.0.1" and placed.url.startswith("tcp://127.0.0.1:")
        control_port = int(placed.url.rsplit(":", 1)[1])
        assert ["127.0.0.1", control_port] in params["ports"]
        assert all(ip == "127.0.0.1" for ip, _ in params["ports"]), params["ports"]
        (actor,) = [a for a in alive_actors() if a.actor_id == params["actor"]]
        assert actor.node_id == libero_node() and actor.class_name == "EnvServerActor"
        result = await rollout(row, zero_agent, placed)
        assert (result.error, result.steps) == (None, 200)
    assert params["actor"] not in {a.actor_id for a in alive_actors()}


async def test_the_actor_imports_this_checkout(cluster: LocalCluster) -> None:
    runtime = RayRuntime(PENDULUM)
    substrate = runtime(Task("pendulum", "swing_up", {"seed": 1}))
    async with substrate:
        assert substrate.info["pytest_hud"] == pytest_hud.__file__


async def test_shared_ray_runtime_runs_rows_on_one_actor(cluster: LocalCluster) -> None:
    rows = [Task("pendulum", "swing_up", {"seed": s}) for s in range(3)]
    shared = Shared(RayRuntime(PENDULUM), width=1)  # pendulum serves one robot slot
    results = await run(rows, zero_agent, runtime=shared)
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 3
    assert shared.boots == 1 and not live_actors()


async def test_an_unsatisfiable_request_fails_at_once_with_what_was_asked(
    cluster: LocalCluster,
) -> None:
    row = Task("pendulum", "swing_up", {}, runtime_config={"resources": {"libero": 2}, "gpu": "1"})
    res = await rollout(row, zero_agent, RayRuntime(PENDULUM, boot_timeout=600), timeout=900)
    assert (res.error_type, res.phase) == ("SubstrateError", "place"), res.error
    assert "no node of the Ray cluster can ever hold it" in res.error
    assert "asked {'CPU': 1.0, 'GPU': 1.0, 'libero': 2.0}" in res.error
    assert "'libero': 1.0" in res.error and "available now" in res.error
    assert not live_actors()


async def test_an_actor_killed_mid_episode_is_an_error_naming_node_and_log(
    cluster: LocalCluster,
) -> None:
    import ray

    from pytest_hud.runtime.ray import runtime as ray_runtime

    row = Task("pendulum", "swing_up", {"seed": 2}, runtime_config={"resources": {"libero": 1}})
    runtime = RayRuntime(PENDULUM)

    async def killer_agent(run_: Any) -> dict[str, Any]:
        """Five steps, then the actor is killed; stepping on hits the dead server."""
        async with await RobotClient.connect(run_.robot, token=run_.robot_token) as client:
            obs = await client.get_observation()
            for _ in range(5):
                obs = await client.step(np.zeros(1, np.float32))
            (handle,) = ray_runtime._LIVE.values()  # this rollout's actor
            ray.kill(handle)
            await asyncio.sleep(3)
            while not obs["terminated"]:
                obs = await client.step(np.zeros(1, np.float32))
        return {}

    res = await rollout(row, killer_agent, runtime, timeout=300)
    assert (res.error_type, res.phase) == ("SubstrateError", "agent"), res.error
    assert f"died mid-episode on node {libero_node()}" in res.error
    assert "env server tcp://127.0.0.1:" in res.error  # the actor's own log line
    assert not live_actors()


async def test_a_cancelled_rollout_leaves_no_actor(cluster: LocalCluster) -> None:
    async def slow_agent(run_: Any) -> dict[str, Any]:
        await asyncio.sleep(600)
        return {}

    task = asyncio.ensure_future(
        rollout(Task("pendulum", "swing_up", {}), slow_agent, RayRuntime(PENDULUM))
    )
    for _ in range(600):
        if any(a.class_name == "EnvServerActor" and a.state == "ALIVE" for a in alive_actors()):
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("the actor never came up")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not live_actors()
    assert not alive_actors()


def _driver(address: str, mode: str) -> subprocess.Popen[str]:
    from ray_cluster import cluster_env

    return subprocess.Popen(
        [sys.executable, str(HELPERS / "ray_driver.py"), address, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cluster_env(),
    )


def test_a_ray_client_address_runs_a_rollout(cluster: LocalCluster) -> None:
    proc = _driver(f"ray://127.0.0.1:{cluster.client_port}", "rollout")
    out, _ = proc.communicate(timeout=240)
    last = out.strip().splitlines()[-1]
    assert proc.returncode == 0 and json.loads(last)["error"] is None, out
    assert json.loads(last)["steps"] == 200


def test_ctrl_c_in_a_driver_leaves_no_actor_and_no_server(cluster: LocalCluster) -> None:
    proc = _driver(cluster.address, "hang")
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # bounded by the driver's own boot_timeout and the test timeout
        lines.append(line)
        if line.startswith("READY"):
            break
    else:
        pytest.fail("the driver never got its actor serving:\n" + "".join(lines))
    actor_id = line.split()[1]
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    from ray.util.state import get_actor

    deadline = time.monotonic() + 60
    while (state := get_actor(actor_id, timeout=30).state) != "DEAD":
        assert time.monotonic() < deadline, f"actor {actor_id} still {state} 60 s after Ctrl-C"
        time.sleep(0.5)
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert f"pytest_hud.serve {PENDULUM}" not in out


def test_a_head_whose_port_was_taken_starts_on_another(tmp_path: Path) -> None:
    """The port a head was given is taken by the time ``ray start`` binds it: the start
    is retried on fresh ports instead of failing the session."""
    from pytest_hud.runtime.ray.head import RayHead

    require(importlib.util.find_spec("ray"), "ray", "run scripts/setup --ray")
    short = Path(tempfile.mkdtemp(prefix="hud-ray-", dir="/tmp"))  # AF_UNIX path limit
    with socket.create_server(("127.0.0.1", 0)) as taken:
        head = RayHead(short / "t", port=taken.getsockname()[1], num_cpus=1)
        try:
            head.start()
            assert head.port != taken.getsockname()[1]
            # the GCS listens once `ray start` returns; Ray's client server (on the port the
            # head chose, not Ray's fixed 10001) comes up a moment later: wait, bounded
            listening = ""
            for _ in range(120):
                listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
                if f":{head.client_port} " in listening:
                    break
                time.sleep(0.5)
            assert f":{head.port} " in listening, listening
            assert f":{head.client_port} " in listening, listening
        finally:
            left = head.stop()
            shutil.rmtree(short, ignore_errors=True)
    assert not left, f"head processes survived: {left}"


def test_runtime_specs_name_their_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_hud.errors import PlacementError
    from pytest_hud.runtime.backends import parse

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert parse("ray").cluster is None  # a cluster of our own
    assert parse("ray:127.0.0.1:6379").cluster == "127.0.0.1:6379"
    assert parse("ray://127.0.0.1:10001").cluster == "ray://127.0.0.1:10001"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6380")
    assert parse("ray").cluster == "127.0.0.1:6380"
    assert parse("docker:img").cluster is None  # not a cluster
    with pytest.raises(PlacementError, match="valid forms: local, subprocess"):
        parse("rya:127.0.0.1:6379")


async def test_policy_replicas_serve_rollouts_round_robin(cluster: LocalCluster) -> None:
    from pytest_hud.robot.agent.model import ZeroModel
    from pytest_hud.robot.agent.replicas import PolicyReplicas

    rows = [Task("pendulum", "swing_up", {"seed": s}) for s in range(4)]
    async with PolicyReplicas(ZeroModel, 2, num_cpus=0.5) as replicas:
        assert all(url.startswith("ws://127.0.0.1:") for url in replicas.urls), replicas.urls
        results = await run(rows, replicas.agent(), runtime=RayRuntime(PENDULUM), max_concurrent=4)
        batches = await replicas.batches()
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 4
    assert all(sum(b) >= 2 * 200 for b in batches), [sum(b) for b in batches]  # 2 episodes each
    assert not [a for a in alive_actors() if a.class_name == "PolicyActor"]


async def test_a_delegated_rollout_runs_whole_on_a_worker_and_folds_back(
    cluster: LocalCluster,
) -> None:
    from pytest_hud.robot import RobotAgent
    from pytest_hud.robot.agent.model import ZeroModel
    from pytest_hud.runtime.ray.delegate import delegated_rollout

    row = Task("pendulum", "swing_up", {"seed": 3}, runtime_config={"resources": {"libero": 1}})
    agent = RobotAgent(ZeroModel(), name="zero")
    here = await rollout(row, agent, LocalRuntime(PENDULUM))
    there = await delegated_rollout(row, agent, LocalRuntime(PENDULUM), timeout=300)
    assert there.error is None, there.error
    assert (there.steps, there.total_reward, there.success) == (
        here.steps,
        here.total_reward,
        here.success,
    )
    assert there.agent_info["ray"]["node_id"] == libero_node()
    assert there.agent_info["ray"]["pid"] != os.getpid()


def test_no_actor_or_server_is_left_alive(cluster: LocalCluster) -> None:
    assert not live_actors()
    assert not alive_actors()
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert f"pytest_hud.serve {PENDULUM}" not in out
