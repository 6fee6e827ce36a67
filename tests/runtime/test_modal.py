"""ModalRuntime against a fake of the Modal SDK surface (tests/helpers/fake_modal.py).

Modal's cloud cannot be reached from this machine, so these tests inject
``FakeModal`` through ``ModalRuntime(modal=...)``. The fake covers exactly the calls
ModalRuntime makes: ``App.lookup.aio``, ``Image.from_registry``,
``Sandbox.create.aio`` (command, app, image, env, secrets, timeout, gpu, cpu, memory,
unencrypted_ports), ``sandbox.object_id``, ``tunnels.aio`` (``Tunnel.tcp_socket``),
``poll.aio``, ``terminate.aio`` and ``stdout/stderr.read.aio``. It is not a mock: a
sandbox really runs its command (``python -m pytest_hud.serve ...``) as a local process
in a loopback address of its own, behind real TCP forwarders standing in for Modal's
tunnels (each with its own host and port), so rollouts go over the real control
channel and the real robot wire. What stays untested here: Modal's cloud itself
(image builds, scheduling, GPUs, the tunnels' public hosts).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import websockets
from agents import zero_agent
from fake_modal import FakeModal, live_processes

from pytest_hud import ModalRuntime, Shared, Task, Taskset, run
from pytest_hud.plumbing.auth import session_secret
from pytest_hud.plumbing.rpc import AuthError, RpcClient
from pytest_hud.runtime import Run, rollout
from pytest_hud.runtime.control import ControlClient, rewrite_url
from pytest_hud.runtime.task import memory_mib

ROOT = Path(__file__).resolve().parents[2]
PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"
SERVE = ["python", "-m", "pytest_hud.serve"]
PORTS = ["--host", "0.0.0.0", "--port", "8000", "--sim-host", "0.0.0.0"]

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake() -> Any:
    """A fresh fake SDK; afterwards every sandbox is terminated and no process is left."""
    fake = FakeModal()
    yield fake

    def mine() -> list[int]:  # this test's sandboxes only: other workers run fakes too
        return [pid for sb in fake.sandboxes for pid in live_processes(sb.object_id)]

    deadline = time.monotonic() + 30
    while mine() and time.monotonic() < deadline:
        time.sleep(0.05)
    leftover = mine()
    unterminated = [sb.object_id for sb in fake.sandboxes if not sb.terminated]
    for sandbox in fake.sandboxes:
        sandbox.kill()
    assert not unterminated, f"sandboxes never terminated: {unterminated}"
    assert not leftover, f"sandbox processes left running: {leftover}"


def pendulum_rows(n: int, **runtime_config: Any) -> list[Task]:
    return [
        Task("pendulum", "swing_up", {"seed": s}, runtime_config=runtime_config or None)
        for s in range(n)
    ]


async def test_rollouts_through_modal_sandboxes(fake: FakeModal) -> None:
    seen: list[str] = []

    async def agent(run_: Run) -> dict[str, Any]:
        seen.append(run_.robot["url"])
        return await zero_agent(run_)

    runtime = ModalRuntime("envs:latest", module=str(PENDULUM), modal=fake)
    results = await run(pendulum_rows(2), agent, runtime=runtime)
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 2
    assert all(r.total_reward is not None for r in results)
    # one fresh sandbox per rollout, each with its own tunnels
    assert len(fake.sandboxes) == 2 and len({sb.ip for sb in fake.sandboxes}) == 2
    create = fake.creates[0]
    sims = ["--sim-ports", "8001-8008"]
    assert create["args"] == [*SERVE, str(PENDULUM), *PORTS, *sims]
    assert create["unencrypted_ports"] == list(range(8000, 8009))
    assert create["app"].name == "pytest-hud" and create["image"].tag == "envs:latest"
    assert (create["timeout"], create["gpu"], create["memory"]) == (3600, None, None)
    # the robot url the agent dialled is a sim port's tunnel, not the sandbox's own address
    tunnels = {
        f"{t.unencrypted_host}:{t.unencrypted_port}"
        for sb in fake.sandboxes
        for port, t in sb.tunnel_map.items()
        if port != 8000
    }
    assert len(seen) == 2
    for url in seen:
        assert url.split("//", 1)[1].split("/?", 1)[0] in tunnels, url


async def test_runtime_yields_tunnel_addresses_and_terminates(fake: FakeModal) -> None:
    runtime = ModalRuntime("envs:latest", module=str(PENDULUM), sim_ports=2, modal=fake)
    async with runtime(pendulum_rows(1)[0]) as placed:
        (sandbox,) = fake.sandboxes
        control = sandbox.tunnel_map[8000]
        assert placed.url == f"tcp://{control.unencrypted_host}:{control.unencrypted_port}"
        assert placed.params == {
            "kind": "modal",
            "sandbox": sandbox.object_id,
            "host": control.unencrypted_host,
            "port_map": {
                str(p): "{}:{}".format(*sandbox.tunnel_map[p].tcp_socket) for p in (8001, 8002)
            },
        }
        assert sandbox.proc.poll() is None
    assert sandbox.terminated and sandbox.proc.poll() is not None
    assert fake.creates[0]["args"][-2:] == ["--sim-ports", "8001-8002"]


async def test_a_stranger_through_the_public_tunnel_is_refused(fake: FakeModal) -> None:
    """Issue 39 #2: the sandbox binds 0.0.0.0 behind public raw-TCP tunnels. Through the
    control tunnel a peer without the session's secret gets the greeting, then one
    AuthError line and the hang-up (the secret itself never crosses the tunnel: a nonce's
    HMAC does); through a sim's tunnel a WebSocket without the bridge key gets HTTP 403.
    This session's own rollout runs through the same tunnels."""
    runtime = ModalRuntime("envs:latest", module=str(PENDULUM), sim_ports=1, modal=fake)
    async with runtime(pendulum_rows(1)[0]) as placed:
        host, port = placed.url.removeprefix("tcp://").rsplit(":", 1)
        with pytest.raises(AuthError):
            await RpcClient.connect(host, int(port), secret="f" * 64, timeout=30)
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            async with asyncio.timeout(30):
                hello = json.loads(await reader.readline())
                writer.write(b'{"id": 1, "method": "start", "params": {"env": "pendulum"}}\n')
                refusal = json.loads(await reader.readline())
            assert hello["nonce"] and refusal["error"]["type"] == "AuthError"
            assert "traceback" not in refusal["error"]
        finally:
            writer.close()
        control = await ControlClient.connect(placed)
        try:
            started = await control.start(pendulum_rows(1)[0])
            bare = started.robot["url"].split("/?", 1)[0]
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(bare, open_timeout=30)
            assert refused.value.response.status_code == 403
            assert (await zero_agent(started))["steps"] == 200
            await control.result(started)
        finally:
            await control.close()


async def test_row_runtime_config_reaches_sandbox_create(fake: FakeModal) -> None:
    base = fake.Image.from_registry("envs:cpu")
    runtime = ModalRuntime(base, module=str(PENDULUM), gpu="T4", memory="1Gi", modal=fake)
    rows = [
        *pendulum_rows(1),
        *pendulum_rows(
            1,
            image="envs:gpu",
            gpu="A10G",
            cpu=2,
            memory="2Gi",
            timeout=120.5,
            env={"SCENE": "hard"},
        ),
    ]
    results = await run(rows, zero_agent, runtime=runtime, max_concurrent=1)
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 2
    plain, tuned = fake.creates
    assert plain["image"] is base
    # the session's secret always (the server behind the tunnel serves this session only)
    secret = {"PYTEST_HUD_SECRET": session_secret()}
    assert (plain["gpu"], plain["cpu"], plain["memory"], plain["env"]) == ("T4", None, 1024, secret)
    assert tuned["image"].tag == "envs:gpu"
    assert (tuned["gpu"], tuned["cpu"], tuned["memory"]) == ("A10G", 2.0, 2048)
    assert tuned["timeout"] == 121 and tuned["env"] == {"SCENE": "hard", **secret}


async def test_sandbox_that_exits_at_boot_names_its_exit_code_and_output(
    fake: FakeModal, tmp_path: Path
) -> None:
    bad = tmp_path / "broken_env.py"
    bad.write_text('print("loading the scene")\nraise RuntimeError("boom: no such scene")\n')
    runtime = ModalRuntime("envs:latest", module=str(bad), modal=fake)
    res = await rollout(pendulum_rows(1)[0], zero_agent, runtime)
    assert (res.error_type, res.phase) == ("SubstrateError", "place")
    assert "exited with code 1" in res.error
    assert "loading the scene" in res.error and "boom: no such scene" in res.error
    assert fake.sandboxes[0].object_id in res.error
    assert fake.sandboxes[0].terminated


async def test_sandbox_that_never_gets_ready_is_a_bounded_wait(
    fake: FakeModal, tmp_path: Path
) -> None:
    hang = tmp_path / "hanging_env.py"
    hang.write_text('import time\nprint("warming up", flush=True)\ntime.sleep(600)\n')
    runtime = ModalRuntime("envs:latest", module=str(hang), boot_timeout=5, modal=fake)
    res = await rollout(pendulum_rows(1)[0], zero_agent, runtime)
    assert (res.error_type, res.phase) == ("SubstrateError", "place")
    assert "did not answer a control ping within boot_timeout=5" in res.error
    assert "warming up" in res.error
    (sandbox,) = fake.sandboxes
    assert sandbox.terminated and sandbox.proc.poll() is not None


async def test_module_none_runs_the_images_cmd(fake: FakeModal) -> None:
    fake.registry["envs:served"] = [*SERVE, str(PENDULUM), *PORTS, "--sim-ports", "8001-8004"]
    runtime = ModalRuntime("envs:served", sim_ports=4, modal=fake)
    (res,) = await run(pendulum_rows(1), zero_agent, runtime=runtime)
    assert (res.error, res.steps) == (None, 200)
    assert fake.creates[0]["args"] == []


async def test_shared_modal_runtime_boots_one_sandbox(fake: FakeModal) -> None:
    # pendulum serves one robot slot: width 1 runs the rows one after another on one sandbox
    runtime = Shared(ModalRuntime("envs:latest", module=str(PENDULUM), modal=fake), width=1)
    results = await run(pendulum_rows(3), zero_agent, runtime=runtime)
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 3
    assert len(fake.sandboxes) == 1 and fake.sandboxes[0].terminated


async def test_taskset_from_file_through_modal(fake: FakeModal) -> None:
    rows = [t for t in Taskset.load(PENDULUM) if t.env == "cartpole"][:1]
    runtime = ModalRuntime("envs:latest", module=str(PENDULUM), modal=fake)
    (res,) = await run(rows, zero_agent, runtime=runtime)
    assert res.error is None and res.steps and res.steps > 0


def test_rewrite_url_accepts_host_port_values() -> None:
    port_map: dict[str, int | str] = {"8001": "r7.tunnel.test:40001", "8002": 40002}
    assert rewrite_url("ws://0.0.0.0:8001", "r1.test", port_map) == "ws://r7.tunnel.test:40001"
    assert rewrite_url("ws://0.0.0.0:8002", "r1.test", port_map) == "ws://r1.test:40002"
    assert rewrite_url("ws://sandbox.test:8001/x", None, port_map) == "ws://r7.tunnel.test:40001/x"


def test_memory_units() -> None:
    assert [memory_mib(v) for v in (None, 512, "512", "512Mi", "2Gi", "2g", "2GB")] == [
        None,
        512,
        512,
        512,
        2048,
        2048,
        2048,
    ]
    with pytest.raises(ValueError, match="memory"):
        memory_mib("lots")


def test_importing_pytest_hud_does_not_import_modal_and_a_missing_sdk_is_clear() -> None:
    code = (
        "import sys\n"
        "import pytest_hud\n"
        "from pytest_hud import ModalRuntime\n"
        "assert 'modal' not in sys.modules, 'pytest_hud imported modal'\n"
        "sys.modules['modal'] = None\n"
        "try:\n"
        "    ModalRuntime('envs:latest', module='envs.py')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'pytest-hud[modal]'" in out.stdout


def test_fake_matches_the_real_sdk_signatures(fake: FakeModal) -> None:
    """When the real SDK is installed, the fake's calls and ModalRuntime's arguments fit it."""
    import importlib
    import importlib.util

    from needs import require

    require(importlib.util.find_spec("modal"), "the modal SDK", "pip install -e '.[dev]'")
    modal = importlib.import_module("modal")
    io_streams = importlib.import_module("modal.io_streams")

    def params(fn: Any) -> dict[str, inspect.Parameter]:
        return {k: v for k, v in inspect.signature(fn).parameters.items() if k != "self"}

    real_create = params(modal.Sandbox.create)
    pairs = [
        (fake.App.lookup.aio, modal.App.lookup),
        (fake.Image.from_registry, modal.Image.from_registry),
        (fake.Sandbox.create.aio, modal.Sandbox.create),
    ]
    sandbox_methods = ("tunnels", "poll", "terminate")
    for ours, theirs in pairs:
        real = params(theirs)
        for name, param in params(ours).items():
            assert name in real and real[name].kind == param.kind, (ours, name)
    for method in sandbox_methods:
        assert hasattr(getattr(modal.Sandbox, method), "aio"), method
    assert hasattr(modal.App.lookup, "aio") and hasattr(modal.Sandbox.create, "aio")
    assert hasattr(io_streams.StreamReader.read, "aio")
    assert {"stdout", "stderr", "object_id"} <= set(dir(modal.Sandbox))
    assert "timeout" in params(modal.Sandbox.tunnels)
    tunnel_fields = {f.name for f in dataclasses.fields(modal.Tunnel)}
    assert {"unencrypted_host", "unencrypted_port"} <= tunnel_fields
    assert isinstance(inspect.getattr_static(modal.Tunnel, "tcp_socket"), property)
    runtime = ModalRuntime("envs:latest", module="envs.py", gpu="T4", memory="1Gi", cpu=1)
    row = pendulum_rows(1, image="envs:gpu", env={"A": "1"}, timeout=60)[0]
    kwargs = runtime.sandbox_kwargs(row)
    assert isinstance(kwargs["image"], modal.Image)
    inspect.signature(modal.Sandbox.create).bind(*runtime.command(), app=None, **kwargs)
    assert set(kwargs) <= set(real_create)
