"""DockerRuntime against a real Docker engine: rollouts in containers, loopback-only
ports and url rewriting, ownership labels, boot failures, reaping, per-row images,
Shared over a vectorized env, and build_image. Skips only when no engine is reachable
(fails instead under PYTEST_HUD_REQUIRE_ALL=1)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import zero_agent
from docker_helpers import base_image, leftovers

from pytest_hud import DockerRuntime, Shared, Task, run
from pytest_hud.runtime import ControlClient
from pytest_hud.runtime.docker import build_image, reap_containers, session_id
from pytest_hud.runtime.docker import image as docker_image
from pytest_hud.runtime.docker import owners as docker_engine

PENDULUM = Task("pendulum", "swing_up", {"seed": 0})

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def docker_errors():
    import docker

    return docker.errors


async def test_rollouts_run_end_to_end_in_containers(client, image, mark) -> None:
    rows = [PENDULUM, Task("cartpole", "balance", {"seed": 1})]
    results = await run(rows, zero_agent, DockerRuntime(image, labels=mark))
    assert [r.error for r in results] == [None, None]
    assert results[0].steps == 200  # Pendulum-v1 truncates at 200 steps
    assert results[0].total_reward is not None and results[0].success is False
    assert results[1].steps and results[1].steps < 60  # zeros let the pole fall
    assert leftovers(client, mark["pytest-hud.test"]) == []


async def test_ports_are_published_on_loopback_only_and_sim_urls_rewritten(
    client, image, mark
) -> None:
    async with DockerRuntime(image, labels=mark, sim_ports=3)(PENDULUM) as runtime:
        container = client.containers.get(runtime.params["container"])
        wanted = {"8000/tcp", "8001/tcp", "8002/tcp", "8003/tcp"}
        bindings = container.attrs["HostConfig"]["PortBindings"]
        published = container.attrs["NetworkSettings"]["Ports"]
        assert set(bindings) == set(published) == wanted
        for entries in [*bindings.values(), *published.values()]:
            assert entries and all(e["HostIp"] == "127.0.0.1" for e in entries)
        host_port = {k.split("/")[0]: int(v[0]["HostPort"]) for k, v in published.items()}
        assert runtime.url == f"tcp://127.0.0.1:{host_port['8000']}"
        assert runtime.params["host"] == "127.0.0.1"
        assert runtime.params["port_map"] == {p: h for p, h in host_port.items() if p != "8000"}

        # loopback only, shown from the engine's own bindings (above) and from a real
        # connection to 127.0.0.1 (below); no other address of this host is ever dialled
        with socket.create_connection(("127.0.0.1", host_port["8000"]), 5):
            pass

        async with await ControlClient.connect(runtime) as control:
            started = await control.start(PENDULUM)
            # the server says ws://0.0.0.0:800x (its own view); the client maps it here
            url = started.robot["url"]
            sim_port = url.split("/?", 1)[0].rsplit(":", 1)[1]  # the url carries the bridge key
            assert url.startswith("ws://127.0.0.1:") and "/?key=" in url
            assert int(sim_port) in runtime.params["port_map"].values()
            assert (await zero_agent(started))["steps"] == 200
            assert "total_reward" in await control.result(started)


async def test_containers_carry_owner_labels_and_are_removed_on_exit(
    client, image, mark, monkeypatch
) -> None:
    monkeypatch.setenv("PYTEST_HUD_SESSION", "sess-" + mark["pytest-hud.test"])
    monkeypatch.setattr(docker_engine, "_session", None)  # made once per process: remake it
    async with DockerRuntime(image, labels=mark)(PENDULUM) as runtime:
        container = client.containers.get(runtime.params["container"])
        labels = container.labels
        assert container.status == "running"
    assert session_id() == "sess-" + mark["pytest-hud.test"]
    assert labels["pytest-hud"] == "1"
    assert labels["pytest-hud.session"] == session_id()
    assert labels["pytest-hud.pid"] == str(os.getpid())
    assert labels["pytest-hud.host"] == socket.gethostname()
    assert labels["pytest-hud.test"] == mark["pytest-hud.test"]
    assert leftovers(client, mark["pytest-hud.test"]) == []


async def test_container_exiting_at_boot_fails_with_its_log_tail(client, image, mark) -> None:
    runtime = DockerRuntime(image, module="no/such/env.py", labels=mark)
    [result] = await run([PENDULUM], zero_agent, runtime)
    assert result.error_type == "SubstrateError" and result.phase == "place"
    assert "exited with code 1 before its env server answered" in result.error
    assert "env module /app/no/such/env.py does not exist" in result.error  # from its log
    assert leftovers(client, mark["pytest-hud.test"]) == []


async def test_substrate_that_never_answers_times_out_with_its_log(client, image, mark) -> None:
    hang = ["python3", "-c", "print('warming up', flush=True); import time; time.sleep(600)"]
    runtime = DockerRuntime(image, command=hang, boot_timeout=2.0, labels=mark)
    [result] = await run([PENDULUM], zero_agent, runtime)
    assert result.error_type == "SubstrateError" and result.phase == "place"
    assert "did not answer a control ping within boot_timeout=2.0 s" in result.error
    assert "warming up" in result.error
    assert leftovers(client, mark["pytest-hud.test"]) == []


async def test_rollout_timeout_during_boot_removes_the_container(client, image, mark) -> None:
    hang = ["python3", "-c", "import time; time.sleep(600)"]
    runtime = DockerRuntime(image, command=hang, boot_timeout=300.0, labels=mark)
    [result] = await run([PENDULUM], zero_agent, runtime, rollout_timeout=3.0)
    assert result.error_type == "TimeoutError" and result.phase == "place"
    assert leftovers(client, mark["pytest-hud.test"]) == []


def test_reap_removes_only_labelled_containers_of_dead_owners(client, image, mark) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = str(proc.pid)  # reaped: this pid names no process now
    mine = docker_engine.owner_labels()
    host = mine["pytest-hud.host"]

    def make(labels: dict[str, str]):
        return client.containers.create(image, ["python3", "-c", "pass"], labels=labels)

    created = {
        "dead owner": make({**mine, **mark, "pytest-hud.pid": dead}),
        "pid reused": make({**mine, **mark, "pytest-hud.pidstart": "1"}),
        "live owner": make({**mine, **mark}),
        "not ours": make({**mark, "pytest-hud.pid": dead, "pytest-hud.host": host}),
        "other host": make({**mine, **mark, "pytest-hud.pid": dead, "pytest-hud.host": "x"}),
    }
    try:
        removed = reap_containers(client)
        assert all(isinstance(cid, str) for cid in removed)
        labelled = client.containers.list(all=True, filters={"label": "pytest-hud.test"})
        left = {c.id for c in labelled}
        gone = {name for name, c in created.items() if c.id not in left}
        assert gone == {"dead owner", "pid reused"}
        # (another xdist worker may have reaped them first, so only ours can be in `removed`)
        assert {created["live owner"].id, created["not ours"].id}.isdisjoint(removed)
    finally:
        for c in created.values():
            with contextlib.suppress(Exception):
                c.remove(force=True)


def test_reap_skips_a_container_removed_while_it_lists(client, image, mark, monkeypatch) -> None:
    """A container removed between the engine's list and its inspect (another session's exit
    racing the reap; CI saw this as a 404 out of ``containers.list``) is skipped, not raised."""
    mine = docker_engine.owner_labels()
    racing = client.containers.create(image, ["python3", "-c", "pass"], labels={**mine, **mark})
    inspect = client.api.inspect_container

    def removed_first(container_id, *args, **kwargs):
        if container_id == racing.id:
            racing.remove(force=True)
        return inspect(container_id, *args, **kwargs)

    monkeypatch.setattr(client.api, "inspect_container", removed_first)
    try:
        assert racing.id not in reap_containers(client)
    finally:
        with contextlib.suppress(Exception):
            racing.remove(force=True)


async def test_row_image_wins_over_the_providers(client, image, mark) -> None:
    ran: list[list[str]] = []
    runtime = DockerRuntime("pytest-hud-no-such-image:0", labels=mark)

    @contextlib.asynccontextmanager
    async def spy(task):
        async with runtime(task) as rt:
            ran.append(client.containers.get(rt.params["container"]).image.tags)
            yield rt

    row = Task("pendulum", "swing_up", {"seed": 2}, runtime_config={"image": image})
    [result] = await run([row], zero_agent, spy)
    assert result.error is None and result.steps == 200
    assert ran == [[image]]

    [result] = await run([PENDULUM], zero_agent, DockerRuntime(labels=mark))
    assert result.error_type == "SubstrateError"
    assert "runtime_config.image" in result.error and "DockerRuntime(image)" in result.error

    [result] = await run([PENDULUM], zero_agent, runtime)
    assert "'pytest-hud-no-such-image:0' is not on this Docker engine" in result.error
    assert leftovers(client, mark["pytest-hud.test"]) == []


async def test_shared_docker_substrate_serves_a_vectorized_env(client, image, mark) -> None:
    module = "tests/helpers/envs/vector_pendulum.py"
    docker_runtime = DockerRuntime(image, module=module, labels=mark)
    shared = Shared(docker_runtime, width=4)
    rows = [Task("vector_pendulum", "swing_up", {"seed": s}) for s in range(4)]
    results = await run(rows, zero_agent, shared, max_concurrent=4)
    assert [r.error for r in results] == [None] * 4
    assert [r.steps for r in results] == [200] * 4
    assert shared.boots == 1  # four concurrent rollouts, one container
    assert leftovers(client, mark["pytest-hud.test"]) == []


def test_build_image_skips_unchanged_content_and_rebuilds_on_change(
    client, image, tmp_path, monkeypatch
) -> None:
    env = dict(e.split("=", 1) for e in client.images.get(image).attrs["Config"]["Env"])
    assert env["PYTEST_HUD_MODULE"] == "examples/envs/pendulum.py"
    assert env["PYTHONPATH"].split(":") == ["/opt/site", "/app"]

    # a frozen copy of the project, so edits to the checkout meanwhile cannot interfere
    _, parts = docker_image._project()
    frozen = tmp_path / "src"
    frozen.mkdir()
    for part in parts:
        if part.is_dir():
            shutil.copytree(part, frozen / part.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(part, frozen / part.name)
    monkeypatch.setattr(
        docker_image, "_project", lambda: (frozen, [frozen / p.name for p in parts])
    )
    tag = f"pytest-hud-test-frozen:{uuid.uuid4().hex[:8]}"
    try:
        first = client.images.get(build_image(tag))
        second = client.images.get(build_image(tag))
        assert second.id == first.id  # same content hash: nothing rebuilt
        (frozen / "pytest_hud" / "_probe.py").write_text("X = 1\n")
        third = client.images.get(build_image(tag))
        assert third.id != first.id
        assert third.labels["pytest-hud.content"] != first.labels["pytest-hud.content"]
        with pytest.raises(docker_errors().ImageNotFound):  # the replaced image was removed
            client.images.get(first.id)
    finally:
        with contextlib.suppress(Exception):
            client.images.remove(tag, force=True)


def test_failed_build_leaves_no_intermediate_containers(client, tmp_path, mark) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base_image(client)}\nLABEL pytest-hud.test={mark['pytest-hud.test']}\n"
        'RUN ["python3", "-c", "raise SystemExit(3)"]\n'
    )
    with pytest.raises(RuntimeError, match=r"(?s)docker build of .* failed.*code: 3"):
        build_image("pytest-hud-test-broken:0", dockerfile=tmp_path / "Dockerfile", client=client)
    assert leftovers(client, mark["pytest-hud.test"]) == []
    # the last good step stays as an untagged build-cache image, as with `docker build`
    for img in client.images.list(filters={"label": f"pytest-hud.test={mark['pytest-hud.test']}"}):
        client.images.remove(img.id, force=True)


def test_import_works_without_the_docker_sdk() -> None:
    code = (
        "import sys; sys.modules['docker'] = None\n"
        "import pytest_hud\n"
        "try:\n"
        "    pytest_hud.DockerRuntime('img').client()\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'pytest-hud[docker]'" in out.stdout


async def test_container_dying_mid_episode_says_how_with_its_log_tail(client, image, mark) -> None:
    """Issue 12 #14: a container killed mid-episode gave only ``bridge closed the
    connection``; now the rollout names the container, its exit code and its log's tail."""
    import numpy as np

    from pytest_hud.robot import RobotClient
    from pytest_hud.runtime import rollout

    killed: list[str] = []

    async def agent(run_: Any) -> dict[str, Any]:
        async with await RobotClient.connect(run_.robot, token=run_.robot_token) as robot:
            await robot.get_observation()
            await robot.step(np.zeros(1, np.float32))
            filters = {"label": f"pytest-hud.test={mark['pytest-hud.test']}"}
            for container in client.containers.list(filters=filters):
                container.kill()
                killed.append(container.short_id)
            for _ in range(400):  # Pendulum runs 200 steps: the wire breaks first
                await robot.step(np.zeros(1, np.float32))
        return {}

    res = await rollout(PENDULUM, agent, DockerRuntime(image, labels=mark))
    assert len(killed) == 1
    assert res.error_type == "SubstrateError" and res.phase == "agent", res.error
    assert f"container {killed[0]} exited with code 137" in res.error, res.error
    assert "the last lines of its log:" in res.error


def _dead_pid() -> tuple[int, str]:
    """A pid that ran and exited, with its start time (as an intent file names it)."""
    proc = subprocess.Popen(["sleep", "30"])
    start = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    proc.kill()
    proc.wait()
    return proc.pid, start


def test_a_create_finished_after_its_owner_died_is_removed(
    client, mark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26 #1: a worker killed while the engine served its create leaves an intent
    file; the engine completes the create after the reap. settle_intents waits on the
    engine's event stream for that create and removes its container; an intent of a live
    process is left alone, and the dead one's file is gone afterwards."""
    import threading

    from pytest_hud.runtime.docker.intents import INTENT_LABEL, settle_intents

    monkeypatch.setenv("PYTEST_HUD_INTENTS", str(tmp_path))
    folder = tmp_path / "pytest-hud-creates"
    folder.mkdir()
    pid, start = _dead_pid()
    dead = f"{pid}.{start}.deadbeef0001"
    (folder / dead).touch()
    mine = f"{os.getpid()}.0.alive0000001"
    (folder / mine).touch()
    removed: list[str] = []
    settler = threading.Thread(target=lambda: removed.extend(settle_intents(client, timeout=120)))
    settler.start()
    # the engine finishing the dead worker's create, after the settle began
    late = client.containers.create(
        base_image(client), ["sleep", "60"], labels={**mark, INTENT_LABEL: dead}
    )
    settler.join(timeout=180)
    assert not settler.is_alive(), "settle_intents did not return within its bound"
    assert removed == [late.id]
    assert leftovers(client, mark["pytest-hud.test"]) == []
    assert sorted(p.name for p in folder.iterdir()) == [mine]


def test_creates_leave_no_intent_behind(client, mark, tmp_path: Path, monkeypatch) -> None:
    from pytest_hud.runtime.docker.intents import INTENT_LABEL, create_container

    monkeypatch.setenv("PYTEST_HUD_INTENTS", str(tmp_path))
    container = create_container(
        client, {"image": base_image(client), "command": ["true"], "labels": mark}
    )
    try:
        assert container.labels[INTENT_LABEL].startswith(f"{os.getpid()}.")
        assert list((tmp_path / "pytest-hud-creates").iterdir()) == []
    finally:
        container.remove(force=True)
