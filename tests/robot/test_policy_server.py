"""PolicyServer and RemoteModel: the openpi policy-server protocol, both ends.

1. openpi-client's real ``WebsocketClientPolicy`` (its own venv, ``tests/helpers/peers/
   openpi_client_drive.py``) drives our PolicyServer: actions, metadata, server_timing,
   the traceback frame, /healthz.
2. RobotAgent(RemoteModel) runs real rollouts (counter, pendulum) through our server.
3. RemoteModel against a server that is not ours: a minimal openpi-style server.
4. Batching: concurrent connections share forwards.
5. Faults: a failing forward, a server that dies mid-episode (stopped, or killed),
   bounded connect and reply waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from policy_models import StateModel
from websockets.asyncio.server import serve as ws_serve

from pytest_hud import Runtime, Task, run
from pytest_hud.plumbing.loader import load_module
from pytest_hud.robot import BatchedAgent, Contract, RobotAgent, load_agent
from pytest_hud.robot.agent.policy_server import ANNOUNCE, PolicyServer
from pytest_hud.robot.agent.remote import RemoteModel, RemoteModelError
from pytest_hud.robot.wire.codec import pack, unpack, ws_options
from pytest_hud.runtime import EnvServer
from pytest_hud.runtime.modules import module_environments
from pytest_hud.runtime.ports import free_port

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parents[1] / "helpers"
ROOT = HERE.parents[1]
DRIVE = HERE / "peers" / "openpi_client_drive.py"
COUNTER = HERE / "envs" / "counter_env.py"
PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"
MODELS = HERE / "policy_models.py"
WAIT = 120.0  # bound on any one subprocess wait


def array(described: dict[str, Any]) -> np.ndarray:
    """An array back from the drive script's JSON view."""
    d = described["__ndarray__"]
    return np.array(d["values"], dtype=np.dtype(d["dtype"])).reshape(d["shape"])


def row_from(described: dict[str, Any]) -> dict[str, Any]:
    return {k: array(v) if isinstance(v, dict) else v for k, v in described.items()}


@contextlib.asynccontextmanager
async def env_server(path: Path) -> AsyncIterator[EnvServer]:
    server = EnvServer(module_environments(load_module(path, fresh=True)))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class Recorder:
    """An observer factory: every episode's (observation, executed action) pairs."""

    def __init__(self) -> None:
        self.episodes: list[list[tuple[dict[str, np.ndarray], np.ndarray]]] = []

    def __call__(self, run_: Any, spaces: Any) -> Any:
        ticks: list[tuple[dict[str, np.ndarray], np.ndarray]] = []
        self.episodes.append(ticks)

        class Observer:
            def step(self, data: dict[str, Any], action: np.ndarray) -> None:
                ticks.append(({k: np.array(v) for k, v in data.items()}, np.array(action)))

            def end(self, ok: bool) -> dict[str, Any]:
                return {}

        return Observer()


def check_episode(
    model: StateModel, ticks: list[tuple[dict[str, np.ndarray], np.ndarray]], prompt: str
) -> None:
    """Each executed action is the model's chunk for the observation it was inferred on."""
    assert ticks
    for start in range(0, len(ticks), model.chunk):
        chunk = model.expected({**ticks[start][0], "prompt": prompt})
        done = [action for _, action in ticks[start : start + model.chunk]]
        np.testing.assert_allclose(np.stack(done), chunk[: len(done)], rtol=1e-6)


# -- 1. openpi-client drives our PolicyServer ----------------------------------------------
def _openpi_env() -> dict[str, str]:
    """The openpi venv pins numpy<2; keep our venv's paths out of it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def drive(python: Path, url: str, *args: str) -> dict[str, Any]:
    """Run openpi_client_drive.py against ``url``; its JSON summary."""
    cmd = [str(python), str(DRIVE), "--url", url, *args]
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_openpi_env(),
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), WAIT)
    except TimeoutError:
        pytest.fail(f"openpi_client_drive.py did not finish within {WAIT} s: {cmd}")
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        pytest.fail(
            f"openpi_client_drive.py exited {proc.returncode} without a JSON summary\n"
            f"stdout:\n{out.decode(errors='replace')[-3000:]}\n"
            f"stderr:\n{err.decode(errors='replace')[-3000:]}"
        )


@pytest.mark.interop
async def test_openpi_client_drives_policy_server(openpi_python: Path) -> None:
    model = StateModel(action_size=2, chunk=3)
    meta = {"robot": "counter", "action_horizon": 3, "nested": {"a": [1, 2]}, "x": np.arange(3)}
    async with PolicyServer(model, max_wait_s=0.5, metadata=meta) as server:
        got = await drive(openpi_python, server.url, "--clients", "4", "--requests", "3")
        widths = list(server.batched.batches)
    assert got["all_metadata"] == [got["metadata"]] * 4
    assert got["metadata"]["robot"] == "counter" and got["metadata"]["nested"] == {"a": [1, 2]}
    assert got["metadata"]["action_horizon"] == 3
    np.testing.assert_array_equal(array(got["metadata"]["x"]), np.arange(3))
    for records in got["clients"]:
        assert len(records) == 3 and all("reply" in r for r in records), records
        for k, record in enumerate(records):
            reply = record["reply"]
            actions = array(reply["actions"])
            assert actions.dtype == np.float32 and actions.shape == (3, 2)
            np.testing.assert_array_equal(actions, model.expected(row_from(record["obs"])))
            timing = reply["server_timing"]
            assert timing["infer_ms"] >= 0
            assert ("prev_total_ms" in timing) == (k > 0)  # like openpi: from the 2nd request on
    assert sum(widths) == 12 and max(widths) > 1, widths  # 4 clients' requests shared forwards


@pytest.mark.interop
async def test_openpi_client_gets_the_traceback_and_a_1011_close(openpi_python: Path) -> None:
    """With a token, as openpi's server does for its clients: the failing request's
    traceback, then a 1011 close (openpi-client's ``api_key`` is the token)."""
    key = ("--api-key", "t" * 64)
    async with PolicyServer(StateModel(), token="t" * 64) as server:
        got = await drive(openpi_python, server.url, "--requests", "3", "--boom-at", "1", *key)
        other = await drive(openpi_python, server.url, "--requests", "2", *key)  # still serving
    ok, boom, after = got["clients"][0]
    assert "reply" in ok
    assert boom["error"].startswith("RuntimeError: Error in inference server:\nTraceback")
    assert "RuntimeError: the model blew up on purpose" in boom["error"]
    assert "1011" in after["error"] and "Traceback included in previous frame" in after["error"]
    assert all("reply" in r for r in other["clients"][0])


async def test_healthz_and_metadata_defaults() -> None:
    async with PolicyServer(StateModel()) as server:
        http_url = server.url.replace("ws://", "http://") + "/healthz"

        def get() -> tuple[int, str]:
            with urllib.request.urlopen(http_url, timeout=10) as resp:
                return resp.status, resp.read().decode()

        assert await asyncio.to_thread(get) == (200, "OK\n")
        remote = RemoteModel(server.url)
        assert remote.metadata is None
        assert await remote.connect() == {}  # openpi's default metadata: an empty map
        await remote.aclose()


# -- 2. RobotAgent(RemoteModel) rollouts through our PolicyServer ---------------------------
async def test_remote_agent_rollouts_through_policy_server() -> None:
    model = StateModel(action_size=2, chunk=2)
    async with env_server(COUNTER) as envs, PolicyServer(model, metadata={"m": 1}) as server:
        host_port = server.url.removeprefix("ws://")
        agent = load_agent(f"openpi:{host_port}")  # the registry's openpi:HOST:PORT form
        assert isinstance(agent, RobotAgent) and isinstance(agent.model, RemoteModel)
        recorder = Recorder()
        agent.observers.append(recorder)
        tasks = [Task("counter", "count", {"seed": s}) for s in range(4)]
        results = await run(tasks, agent, Runtime(envs.url))
        assert [r.error for r in results] == [None] * 4
        assert all(r.steps == 3 and r.agent_info["inferences"] == 2 for r in results)
        assert agent.model.metadata == {"m": 1}
        # the same rollouts in process give the same grades
        local = await run(tasks, RobotAgent(StateModel(action_size=2, chunk=2)), Runtime(envs.url))
        assert [r.grade for r in results] == [r.grade for r in local]
        for _ in range(100):  # each rollout's connection closed with its task
            if server.batched.live == 0:
                break
            await asyncio.sleep(0.02)
        assert server.batched.live == 0
    assert len(recorder.episodes) == 4
    prompts = {r.prompt for r in results}
    for ticks, result in zip(recorder.episodes, results, strict=True):
        assert result.prompt in prompts
        check_episode(model, ticks, result.prompt)


async def test_remote_model_is_per_row() -> None:
    remote = RemoteModel("ws://127.0.0.1:1")
    with pytest.raises(NotImplementedError, match="per-row.*batch on the server"):
        remote.infer({"observation/state": np.zeros((2, 3))})
    with pytest.raises(NotImplementedError, match="per-row"):
        BatchedAgent(RobotAgent(remote)).model.infer({"x": np.zeros((1, 1))})


# -- 3. RemoteModel against a server that is not ours ---------------------------------------
class OpenPIStyleServer:
    """openpi's WebsocketPolicyServer, re-told with plain websockets and our codec: one
    request at a time per connection, no batching, ``infer`` returns a dict of arrays."""

    def __init__(self, infer: Callable[[dict[str, Any]], dict[str, Any]], metadata: Any) -> None:
        self.infer = infer
        self.metadata = metadata
        self.headers: list[str | None] = []
        self.server: Any = None

    async def handler(self, ws: Any) -> None:
        self.headers.append(ws.request.headers.get("Authorization"))
        await ws.send(pack(self.metadata))
        prev_total = None
        while True:
            try:
                start = time.monotonic()
                obs = unpack(await ws.recv())
                t0 = time.monotonic()
                action = self.infer(obs)
                action["server_timing"] = {"infer_ms": (time.monotonic() - t0) * 1000}
                if prev_total is not None:
                    action["server_timing"]["prev_total_ms"] = prev_total * 1000
                await ws.send(pack(action))
                prev_total = time.monotonic() - start
            except websockets.ConnectionClosed:
                break
            except Exception:
                await ws.send(traceback.format_exc())
                await ws.close(1011, "Internal server error. Traceback included in previous frame.")
                break

    async def __aenter__(self) -> str:
        self.server = await ws_serve(self.handler, "127.0.0.1", 0, **ws_options())
        return f"ws://127.0.0.1:{next(iter(self.server.sockets)).getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()


async def test_remote_model_against_an_openpi_style_server() -> None:
    model = StateModel(action_size=2, chunk=4)

    def infer(obs: dict[str, Any]) -> dict[str, Any]:
        if obs.get("prompt") == "boom":
            raise ValueError("the openpi-style policy refused")
        chunk = model.expected(obs).astype(np.float64)  # openpi policies often return float64
        return {"actions": chunk, "state": obs["observation/state"]}  # an extra key, ignored

    fake = OpenPIStyleServer(infer, {"action_horizon": 4})
    async with fake as url, env_server(COUNTER) as envs:
        remote = RemoteModel(url, api_key="secret")
        rng = np.random.default_rng(0)
        for _ in range(3):
            row = {"observation/state": rng.standard_normal(2).astype(np.float32), "prompt": "p"}
            got = await remote.ainfer(row)
            assert got.dtype == np.float32 and got.shape == (4, 2)
            np.testing.assert_allclose(got, model.expected(row), rtol=1e-6)
        assert remote.metadata == {"action_horizon": 4}
        with pytest.raises(RemoteModelError, match="(?s)failed:\nTraceback.*policy refused"):
            await remote.ainfer({"observation/state": np.zeros(2, np.float32), "prompt": "boom"})
        # the broken connection was dropped; the next request reconnects
        again = await remote.ainfer({"observation/state": np.ones(2, np.float32), "prompt": "p"})
        assert again.shape == (4, 2)
        assert fake.headers == ["Api-Key secret", "Api-Key secret"]
        # and a whole rollout runs against it
        recorder = Recorder()
        agent = RobotAgent(RemoteModel(url))
        agent.observers.append(recorder)
        (result,) = await run([Task("counter", "count", {"seed": 2})], agent, Runtime(envs.url))
        assert result.error is None and result.steps == 3
        check_episode(model, recorder.episodes[0], result.prompt)
        await remote.aclose()


# -- 4. batching --------------------------------------------------------------------------
async def test_concurrent_connections_share_forwards() -> None:
    model = StateModel(action_size=3, chunk=2, delay=0.02)
    async with PolicyServer(model, max_wait_s=0.2) as server:
        remotes = [RemoteModel(server.url) for _ in range(8)]
        rng = np.random.default_rng(1)
        rows = [
            [{"observation/state": rng.standard_normal(4).astype(np.float32)} for _ in range(5)]
            for _ in range(8)
        ]

        async def episode(remote: RemoteModel, mine: list[dict[str, Any]]) -> list[np.ndarray]:
            return [await remote.ainfer(row) for row in mine]

        outs = await asyncio.gather(*(episode(r, m) for r, m in zip(remotes, rows, strict=True)))
        widths = list(server.batched.batches)
        for mine, got in zip(rows, outs, strict=True):
            for row, chunk in zip(mine, got, strict=True):
                np.testing.assert_array_equal(chunk, model.expected(row))
        assert sum(widths) == 40 and max(widths) > 1, widths
        assert widths.count(8) >= 3, widths  # lockstep clients: mostly full-width forwards

        # one RemoteModel shared by 8 concurrent tasks: one connection per task, so batched too
        shared = RemoteModel(server.url)
        before = len(server.batched.batches)
        await asyncio.gather(*(episode(shared, m) for m in rows))
        assert max(server.batched.batches[before:]) > 1
        for remote in [*remotes, shared]:
            await remote.aclose()


@pytest.mark.interop
async def test_openpi_client_without_the_token_is_refused_before_the_socket_opens(
    openpi_python: Path,
) -> None:
    """openpi-client with no ``api_key`` against a server started with a token: its
    connect fails on HTTP 403 (it never gets the metadata frame); with the key it is served."""
    async with PolicyServer(StateModel(), token="t" * 64) as server:
        refused = await drive(openpi_python, server.url, "--requests", "1")
        assert server.batched.batches == []  # nothing reached the model
        got = await drive(openpi_python, server.url, "--requests", "1", "--api-key", "t" * 64)
    [[record]] = refused["clients"]
    assert "HTTP 403" in record["error"] and refused["metadata"] is None, refused
    assert "reply" in got["clients"][0][0]


# -- 5. faults ------------------------------------------------------------------------------
async def test_failing_forward_fails_only_its_requests() -> None:
    model = StateModel(action_size=1, chunk=1)
    async with PolicyServer(model, max_wait_s=0.25, token="t" * 64) as server:
        a, b, c, d = (RemoteModel(server.url, api_key="t" * 64) for _ in range(4))
        go = asyncio.Event()

        def row(prompt: str, x: float = 0.5) -> dict[str, Any]:
            return {"observation/state": np.full(2, x, np.float32), "prompt": prompt}

        async def first(remote: RemoteModel, prompt: str) -> Any:
            await remote.connect()
            await go.wait()
            try:
                return await remote.ainfer(row(prompt))
            except RemoteModelError as exc:
                return exc

        async def later(remote: RemoteModel) -> np.ndarray:
            await remote.connect()
            await go.wait()
            await asyncio.sleep(0.8)  # after the failing forward
            return await remote.ainfer(row("fine", 0.25))

        tasks = [first(a, "boom"), first(b, "fine"), later(c), later(d)]
        waiter = asyncio.gather(*tasks)
        for _ in range(100):  # all four connected before anyone sends
            if server.batched.live == 4:
                break
            await asyncio.sleep(0.01)
        go.set()
        got_a, got_b, got_c, got_d = await waiter
        # a and b shared the forward that raised: only a, whose row raised, got its traceback
        # (issue 12 #9: b got a's error and a 1011 close too; the rows are now rerun alone)
        assert isinstance(got_a, RemoteModelError), got_a
        assert "failed:\nTraceback" in str(got_a) and "model blew up on purpose" in str(got_a)
        np.testing.assert_array_equal(got_b, model.expected(row("fine")))
        assert 2 in server.batched.batches, "a and b were not batched together"
        # c and d came later: served normally
        np.testing.assert_array_equal(got_c, model.expected(row("fine", 0.25)))
        np.testing.assert_array_equal(got_d, got_c)
        # a and b reconnect and are served again
        np.testing.assert_array_equal(await a.ainfer(row("fine")), model.expected(row("fine")))
        np.testing.assert_array_equal(await b.ainfer(row("fine")), model.expected(row("fine")))
        for remote in (a, b, c, d):
            await remote.aclose()


async def test_policy_server_stopped_mid_episode() -> None:
    dying = PolicyServer(StateModel(action_size=1, chunk=1, delay=0.005))
    living = PolicyServer(StateModel(action_size=1, chunk=1, delay=0.005))
    async with env_server(PENDULUM) as envs, env_server(PENDULUM) as envs2, dying, living:
        task = Task("pendulum", "swing_up", {"seed": 0})

        async def kill_soon() -> None:
            while len(dying.batched.batches) < 10:
                await asyncio.sleep(0.01)
            await dying.stop()

        killer = asyncio.ensure_future(kill_soon())
        (lost,), (fine,) = await asyncio.gather(
            run([task], RobotAgent(RemoteModel(dying.url)), Runtime(envs.url)),
            run([task], RobotAgent(RemoteModel(living.url)), Runtime(envs2.url)),
        )
        await killer
    assert lost.error is not None and lost.phase == "agent"
    assert "policy server connection was lost" in lost.error and "1001" in lost.error
    assert fine.error is None and fine.steps == 200


async def _start_policy_server(port: int) -> tuple[asyncio.subprocess.Process, str]:
    """``python -m pytest_hud policy-server`` on ``port`` (0: any), once it serves;
    the process and its url. A server that never announces itself is killed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest_hud",
        "policy-server",
        "--agent",
        f"{MODELS}:state_agent",
        "--port",
        str(port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(WAIT):
            while True:
                line = (await proc.stdout.readline()).decode()
                assert line, f"the policy server exited ({await proc.wait()}) before serving"
                if line.startswith(ANNOUNCE):
                    return proc, json.loads(line[len(ANNOUNCE) :])["url"]
    except BaseException:
        await _kill(proc)
        raise


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def test_policy_server_process_killed_mid_episode() -> None:
    """The CLI serves a model from a spec; SIGKILL it while a rollout runs."""
    proc, url = await _start_policy_server(0)
    try:
        agent = load_agent(f"openpi:{url.removeprefix('ws://')}")
        assert (await agent.model.connect())["agent"].endswith("policy_models.py:state_agent")
        steps = 0

        class KillAt:
            def step(self, data: Any, action: Any) -> None:
                nonlocal steps
                steps += 1
                if steps == 20:
                    os.killpg(proc.pid, signal.SIGKILL)

            def end(self, ok: bool) -> dict[str, Any]:
                return {}

        agent.observers.append(lambda run_, spaces: KillAt())
        async with env_server(PENDULUM) as envs:
            (res,) = await run([Task("pendulum", "swing_up", {})], agent, Runtime(envs.url))
        assert res.error is not None and "policy server connection was lost" in res.error
        assert 20 <= steps < 200
    finally:
        await _kill(proc)


async def test_connect_and_reply_waits_are_bounded() -> None:
    async def silent(ws: Any) -> None:  # the handshake, then nothing at all
        await ws.wait_closed()

    async def metadata_then_silent(ws: Any) -> None:
        await ws.send(pack({}))
        await ws.wait_closed()

    async with (
        ws_serve(silent, "127.0.0.1", 0, **ws_options()) as s1,
        ws_serve(metadata_then_silent, "127.0.0.1", 0, **ws_options()) as s2,
    ):
        port1 = next(iter(s1.sockets)).getsockname()[1]
        port2 = next(iter(s2.sockets)).getsockname()[1]
        row = {"observation/state": np.zeros(2, np.float32)}
        # the waits end by themselves (the messages name the bound that ended them)
        with pytest.raises(RemoteModelError, match=r"sent no metadata frame within 0.3 s"):
            await RemoteModel(f"ws://127.0.0.1:{port1}", connect_timeout=0.3).ainfer(row)
        with pytest.raises(RemoteModelError, match=r"sent no action chunk within 0.3 s"):
            await RemoteModel(f"127.0.0.1:{port2}", reply_timeout=0.3).ainfer(row)
        s1.close(close_connections=True)
        s2.close(close_connections=True)
    with pytest.raises(RemoteModelError, match="cannot connect to the policy server"):
        await RemoteModel(f"ws://127.0.0.1:{port1}", connect_timeout=5).ainfer(row)


async def test_policy_server_rejects_garbage_frames() -> None:
    async with PolicyServer(StateModel()) as server:
        async with websockets.connect(server.url, **ws_options()) as ws:
            assert unpack(await ws.recv()) == {}
            await ws.send("hello")
            text = await ws.recv()
            assert isinstance(text, str) and "got a text frame" in text
            with pytest.raises(websockets.ConnectionClosed) as info:
                await ws.recv()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1011
        # and it keeps serving
        out = await RemoteModel(server.url).ainfer({"observation/state": np.ones(3, np.float32)})
        assert out.shape == (3, 2)


async def test_contract_binds_models_that_size_actions_from_the_action_space(
    tmp_path: Path,
) -> None:
    # the openpi protocol carries no contract: without one, random answers with size 1
    contract = Contract.from_dict(
        {
            "features": {
                "observation/state": {"role": "observation", "shape": [2]},
                "action": {"role": "action", "shape": [3]},
            }
        }
    )
    path = contract.save(tmp_path / "contract.json")
    row = {"observation/state": np.zeros(2, np.float32)}
    async with PolicyServer(load_agent("random:0").model) as server:
        remote = RemoteModel(server.url)
        assert (await remote.ainfer(row)).shape[-1] == 1
        await remote.aclose()
    for given in (path, contract, contract.to_dict()):
        async with PolicyServer(load_agent("random:0").model, contract=given) as server:
            remote = RemoteModel(server.url)
            chunk = await remote.ainfer(row)
            assert chunk.shape[-1] == 3 and np.abs(chunk).max() <= 1.0
            await remote.aclose()


class _Reconnects(logging.Handler):
    """Counts RemoteModel's "reconnecting" warnings; set() once the first arrives."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "reconnecting" in record.getMessage():
            self.count += 1
            self.seen.set()


async def test_a_restarted_policy_server_is_reconnected() -> None:
    """Issue 26 #3: the rollout in flight when the server dies is an ERROR; a rollout that
    starts while it is down waits (bounded, logged) and runs once it is back; a server that
    stays away past ``reconnect`` fails each later rollout at its first refused connect."""
    port = free_port()
    handler = _Reconnects()
    logging.getLogger("pytest_hud.robot.agent.remote").addHandler(handler)
    procs = [(await _start_policy_server(port))[0]]
    try:
        agent = load_agent(f"openpi:127.0.0.1:{port}")
        steps = 0

        class KillAt:
            def step(self, data: Any, action: Any) -> None:
                nonlocal steps
                steps += 1
                if steps == 20:
                    os.killpg(procs[-1].pid, signal.SIGKILL)

            def end(self, ok: bool) -> dict[str, Any]:
                return {}

        task = [Task("pendulum", "swing_up", {})]
        async with env_server(PENDULUM) as envs:
            (first,) = await run(task, agent, Runtime(envs.url))
            assert first.error is None and first.steps == 200, first.error
            agent.observers.append(lambda run_, spaces: KillAt())
            (lost,) = await run(task, agent, Runtime(envs.url))
            assert lost.error is not None and "connection was lost" in lost.error
            agent.observers.clear()
            await procs[-1].wait()

            later = asyncio.ensure_future(run(task, agent, Runtime(envs.url)))
            async with asyncio.timeout(WAIT):
                await handler.seen.wait()  # it is retrying against the dead port
            procs.append((await _start_policy_server(port))[0])
            async with asyncio.timeout(WAIT):
                (back,) = await later
            assert back.error is None and back.steps == 200, back.error

            agent.model.reconnect = 0.5
            os.killpg(procs[-1].pid, signal.SIGKILL)
            await procs[-1].wait()
            (gone,) = await run(task, agent, Runtime(envs.url))
            assert gone.error is not None and "did not come back within" in gone.error
            assert f"127.0.0.1:{port}" in gone.error
            retries = handler.count
            (still,) = await run(task, agent, Runtime(envs.url))
            assert still.error is not None and "did not come back within" in still.error
            assert handler.count == retries  # past the window: one attempt, no retries
        await agent.model.aclose()
    finally:
        logging.getLogger("pytest_hud.robot.agent.remote").removeHandler(handler)
        for proc in procs:
            await _kill(proc)


async def test_a_server_never_reached_fails_at_once() -> None:
    """No retry for a url that never answered: a typo must not wait out the window."""
    handler = _Reconnects()
    logging.getLogger("pytest_hud.robot.agent.remote").addHandler(handler)
    try:
        model = RemoteModel(f"127.0.0.1:{free_port()}", reconnect=60.0)
        with pytest.raises(RemoteModelError, match="cannot connect to the policy server"):
            await model.ainfer({"observation/state": np.zeros(2, np.float32)})
        assert handler.count == 0
    finally:
        logging.getLogger("pytest_hud.robot.agent.remote").removeHandler(handler)
