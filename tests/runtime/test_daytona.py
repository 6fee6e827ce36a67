"""DaytonaRuntime against a fake of the Daytona SDK surface (tests/helpers/fake_daytona.py).

Daytona's cloud cannot be reached from this machine, so these tests inject
``FakeDaytona`` through ``DaytonaRuntime(daytona=...)`` and use tests/helpers/fake_ssh.py as
the SSH proxy's client. Neither is a mock: a sandbox's session command really runs
``python -m pytest_hud.serve ...`` as a local process on a loopback address of its own,
and the "ssh" really forwards 127.0.0.1 ports to it over TCP, so rollouts go over the
real control channel and the real robot wire. What stays untested: Daytona's cloud
(image builds, scheduling, Daytona's SSH proxy and the real ssh client's forwarding).
"""

from __future__ import annotations

import json
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agents import zero_agent
from fake_daytona import FAKE_SSH, FakeDaytona

from pytest_hud import Shared, Task, run
from pytest_hud.plumbing.auth import session_secret
from pytest_hud.runtime import rollout
from pytest_hud.runtime.daytona import DaytonaRuntime

ROOT = Path(__file__).resolve().parents[2]
PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake() -> Any:
    """A fresh fake SDK; afterwards every sandbox was deleted and none of its processes lives."""
    fake = FakeDaytona()
    yield fake
    undeleted = [sb.id for sb in fake.sandboxes if not sb.deleted]
    alive = [p.pid for sb in fake.sandboxes for p in sb.processes() if p.poll() is None]
    for sandbox in fake.sandboxes:
        sandbox.kill()
    assert not undeleted, f"sandboxes never deleted: {undeleted}"
    assert not alive, f"sandbox processes left running: {alive}"


def runtime(fake: FakeDaytona, module: Path = PENDULUM, **kwargs: Any) -> DaytonaRuntime:
    return DaytonaRuntime("envs:latest", module=str(module), ssh=FAKE_SSH, daytona=fake, **kwargs)


def rows(n: int, **runtime_config: Any) -> list[Task]:
    return [
        Task("pendulum", "swing_up", {"seed": s}, runtime_config=runtime_config or None)
        for s in range(n)
    ]


async def test_rollouts_through_daytona_sandboxes(fake: FakeDaytona) -> None:
    seen: list[str] = []

    async def agent(run_: Any) -> dict[str, Any]:
        seen.append(run_.robot["url"])
        return await zero_agent(run_)

    results = await run(rows(2), agent, runtime=runtime(fake))
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 2
    assert len(fake.sandboxes) == 2 and len({sb.ip for sb in fake.sandboxes}) == 2
    runs = [r for sb in fake.sandboxes for s in sb.process.sessions.values() for r in s.values()]
    (commands,) = {r.command for r in runs}
    assert commands == (
        f"python -m pytest_hud.serve {PENDULUM} --host 127.0.0.1 --port 8000 "
        "--sim-host 127.0.0.1 --sim-ports 8001-8008"
    )
    # the agent dialled a local forward on 127.0.0.1, never the sandbox's own address
    assert len(seen) == 2 and all(url.startswith("ws://127.0.0.1:") for url in seen), seen
    assert all(not sb.ssh_tokens for sb in fake.sandboxes), "ssh access not revoked"


async def test_runtime_yields_loopback_forwards_and_deletes(fake: FakeDaytona) -> None:
    async with runtime(fake, sim_ports=2)(rows(1)[0]) as placed:
        (sandbox,) = fake.sandboxes
        assert placed.url.startswith("tcp://127.0.0.1:")
        assert placed.params["kind"] == "daytona" and placed.params["sandbox"] == sandbox.id
        assert sorted(placed.params["port_map"]) == ["8001", "8002"]
        out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
        for port in [placed.url.rsplit(":", 1)[1], *map(str, placed.params["port_map"].values())]:
            assert f"127.0.0.1:{port} " in out, f"no loopback forward on {port}:\n{out}"
    assert sandbox.deleted and all(p.poll() is not None for p in sandbox.processes())


async def test_the_tunnels_access_token_is_never_on_its_command_line(
    fake: FakeDaytona, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52 (secrets never in argv): Daytona's ssh command is ``ssh TOKEN@HOST``, and the
    tunnel ran it as it is, so the access token (a way into the sandbox, which holds the
    session's secret) was in ssh's argv, which ``ps`` shows every user. Now the login is
    in an ssh config of the user's own (0600, removed with the tunnel); the fake proxy
    refuses a tunnel without a login, so every test here goes through that config."""
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private))
    substrate = runtime(fake)(rows(1)[0])
    async with substrate as placed:
        (sandbox,) = fake.sandboxes
        (token,) = sandbox.ssh_tokens
        assert placed.url.startswith("tcp://127.0.0.1:") and substrate.tunnel is not None
        cmdline = Path(f"/proc/{substrate.tunnel.pid}/cmdline").read_bytes().decode()
        argv = cmdline.split("\0")
        assert token not in cmdline, argv
        login = substrate.login
        assert login is not None and login.is_relative_to(private)
        assert f"User {token}" in login.read_text()
        assert stat.S_IMODE(login.stat().st_mode) == 0o600
        assert argv[argv.index("-F") + 1] == str(login)
    assert not login.exists() and not sandbox.ssh_tokens


async def test_row_runtime_config_reaches_create_params(fake: FakeDaytona) -> None:
    rt = runtime(fake, cpu=1, memory="1Gi")
    tuned = rows(1, image="envs:gpu", gpu="1", cpu=2.5, memory="1536Mi", env={"SCENE": "hard"})
    results = await run([*rows(1), *tuned], zero_agent, runtime=rt, max_concurrent=1)
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 2
    plain, gpu = (sb.params for sb in fake.sandboxes)
    # the session's secret always (the server behind the tunnel serves this session only)
    secret = {"PYTEST_HUD_SECRET": session_secret()}
    assert plain.image == "envs:latest" and plain.env_vars == secret and plain.ephemeral
    assert (plain.resources.cpu, plain.resources.memory, plain.resources.gpu) == (1, 1, None)
    assert gpu.image == "envs:gpu" and gpu.env_vars == {"SCENE": "hard", **secret}
    assert (gpu.resources.cpu, gpu.resources.memory, gpu.resources.gpu) == (3, 2, 1)
    assert plain.labels == {"pytest-hud": "pendulum"} and plain.auto_stop_interval == 60


async def test_server_that_exits_at_boot_names_its_code_and_output(
    fake: FakeDaytona, tmp_path: Path
) -> None:
    bad = tmp_path / "broken_env.py"
    bad.write_text('print("loading the scene")\nraise RuntimeError("boom: no such scene")\n')
    res = await rollout(rows(1)[0], zero_agent, runtime(fake, module=bad))
    assert (res.error_type, res.phase) == ("SubstrateError", "place")
    assert "exited with code 1" in res.error and fake.sandboxes[0].id in res.error
    assert "loading the scene" in res.error and "boom: no such scene" in res.error
    assert fake.sandboxes[0].deleted


async def test_server_that_never_serves_is_a_bounded_wait(
    fake: FakeDaytona, tmp_path: Path
) -> None:
    hang = tmp_path / "hanging_env.py"
    hang.write_text('import time\nprint("warming up", flush=True)\ntime.sleep(600)\n')
    res = await rollout(rows(1)[0], zero_agent, runtime(fake, module=hang, boot_timeout=5))
    assert (res.error_type, res.phase) == ("SubstrateError", "place")
    assert "did not answer a control ping within boot_timeout=5" in res.error
    assert "warming up" in res.error and fake.sandboxes[0].deleted


@pytest.fixture
def taken_ports(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Ports "found free" that another process took before the tunnel bound them: the first
    ``n`` picks are ports held by listening sockets here, later picks are really free."""
    from pytest_hud.runtime import daytona

    held: list[socket.socket] = []
    picks: list[int] = []

    def arm(n: int) -> list[int]:
        real = daytona.free_port

        def pick() -> int:
            if len(picks) < n:
                sock = socket.create_server(("127.0.0.1", 0))
                held.append(sock)
                picks.append(sock.getsockname()[1])
                return picks[-1]
            return real()

        monkeypatch.setattr(daytona, "free_port", pick)
        return picks

    yield arm
    for sock in held:
        sock.close()


async def test_a_tunnel_that_lost_its_port_to_another_process_is_reopened(
    fake: FakeDaytona, taken_ports: Any
) -> None:
    taken = taken_ports(1)  # the control port's first pick is taken before ssh binds it
    results = await run(rows(1), zero_agent, runtime=runtime(fake))
    assert [(r.error, r.steps) for r in results] == [(None, 200)]
    assert len(taken) == 1 and fake.sandboxes[0].deleted


async def test_a_tunnel_that_keeps_losing_its_ports_is_a_bounded_error(
    fake: FakeDaytona, taken_ports: Any
) -> None:
    taken = taken_ports(10_000)  # every pick taken: 1 tunnel and 3 re-opens, 2 ports each
    res = await rollout(rows(1)[0], zero_agent, runtime(fake, sim_ports=1))
    assert (res.error_type, res.phase) == ("SubstrateError", "place")
    assert "ssh tunnel" in res.error and "address already in use" in res.error.lower()
    assert len(taken) == 2 * 4 and fake.sandboxes[0].deleted


async def test_shared_daytona_runtime_boots_one_sandbox(fake: FakeDaytona) -> None:
    results = await run(rows(3), zero_agent, runtime=Shared(runtime(fake), width=1))
    assert [(r.error, r.steps) for r in results] == [(None, 200)] * 3
    assert len(fake.sandboxes) == 1 and fake.sandboxes[0].deleted


def test_a_gpu_type_is_refused_with_the_form_daytona_takes(fake: FakeDaytona) -> None:
    with pytest.raises(ValueError, match=r"GPU count \(gpu=1\), got 'A100'"):
        runtime(fake).create_params(rows(1, gpu="A100")[0])


_REAL_SDK_PROBE = r"""
import inspect, json, dataclasses
import daytona
from daytona import AsyncDaytona, CreateSandboxFromImageParams, Resources, SessionExecuteRequest
from daytona._async.sandbox import AsyncSandbox
from daytona._async.process import AsyncProcess

def params(fn):
    return {k: str(v.kind) for k, v in inspect.signature(fn).parameters.items() if k != "self"}

out = {
    "AsyncDaytona": params(AsyncDaytona.__init__),
    "create": params(AsyncDaytona.create),
    "image_params": sorted(CreateSandboxFromImageParams.model_fields),
    "resources": [f.name for f in dataclasses.fields(Resources)],
    "execute_request": sorted(SessionExecuteRequest.model_fields),
    "create_session": params(AsyncProcess.create_session),
    "execute_session_command": params(AsyncProcess.execute_session_command),
    "get_session_command": params(AsyncProcess.get_session_command),
    "get_session_command_logs": params(AsyncProcess.get_session_command_logs),
    "create_ssh_access": params(AsyncSandbox.create_ssh_access),
    "revoke_ssh_access": params(AsyncSandbox.revoke_ssh_access),
    "delete": params(AsyncSandbox.delete),
    "coroutines": [n for n in ("create_ssh_access", "revoke_ssh_access", "delete")
                   if inspect.iscoroutinefunction(getattr(AsyncSandbox, n))],
}
from daytona_toolbox_api_client_async.models import Command, SessionExecuteResponse
from daytona_api_client_async.models import SshAccessDto
from daytona.common.process import SessionCommandLogsResponse
out["command_fields"] = sorted(Command.model_fields)
out["execute_response_fields"] = sorted(SessionExecuteResponse.model_fields)
out["ssh_fields"] = sorted(SshAccessDto.model_fields)
out["logs_fields"] = [f.name for f in dataclasses.fields(SessionCommandLogsResponse)]
print(json.dumps(out))
"""


def test_fake_matches_the_real_sdk_signatures() -> None:
    """The real SDK (its own venv: its pins clash with ray's) has every call and field the
    runtime uses, with the same parameter kinds as the fake."""
    import inspect

    from fake_daytona import FakeSandbox, _AsyncDaytona, _Process
    from needs import venv_python

    python = venv_python("daytona", "the daytona SDK (daytona==0.226.1)", "daytona")
    out = subprocess.run(
        [python, "-c", _REAL_SDK_PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    real = json.loads(out.stdout)

    def kinds(fn: Any) -> dict[str, str]:
        return {k: str(v.kind) for k, v in inspect.signature(fn).parameters.items() if k != "self"}

    for ours, name in [
        (_AsyncDaytona.create, "create"),
        (_Process.create_session, "create_session"),
        (_Process.execute_session_command, "execute_session_command"),
        (_Process.get_session_command, "get_session_command"),
        (_Process.get_session_command_logs, "get_session_command_logs"),
        (FakeSandbox.create_ssh_access, "create_ssh_access"),
        (FakeSandbox.revoke_ssh_access, "revoke_ssh_access"),
        (FakeSandbox.delete, "delete"),
    ]:
        for param, kind in kinds(ours).items():
            assert real[name].get(param) == kind, (name, param, real[name])
    assert "config" in real["AsyncDaytona"]
    assert set(real["coroutines"]) == {"create_ssh_access", "revoke_ssh_access", "delete"}
    used = {"image", "env_vars", "labels", "resources", "ephemeral", "auto_stop_interval"}
    assert used <= set(real["image_params"])
    assert {"cpu", "memory", "gpu"} <= set(real["resources"])
    assert {"command", "run_async"} <= set(real["execute_request"])
    assert "exit_code" in real["command_fields"] and "cmd_id" in real["execute_response_fields"]
    assert {"token", "ssh_command"} <= set(real["ssh_fields"])
    assert {"output", "stdout", "stderr"} <= set(real["logs_fields"])
