"""PolicyServer and RemoteModel: the openpi policy-server protocol, both ends.

1. openpi-client's real ``WebsocketClientPolicy`` (its own venv, ``tests/helpers/peers/
   openpi_client_drive.py``) drives our PolicyServer: actions, metadata, server_timing,
   the traceback frame, /healthz.
2. RobotAgent(RemoteModel) runs real rollouts (counter, pendulum) through our server.
3. RemoteModel against a server that is not ours: a minimal openpi-style server.
4. Batching: concurrent connections share forwards.
Faults (a failing forward, a server that dies mid-episode, bounded waits):
test_policy_server_faults.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
import traceback
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import websockets
from dtype_spy import spy_on_dtype
from policy_models import StateModel
from policy_wire import array, env_server
from websockets.asyncio.server import serve as ws_serve

from pytest_hud import Runtime, Task, run
from pytest_hud.robot import BatchedAgent, RobotAgent, load_agent
from pytest_hud.robot.agent.policy_server import PolicyServer
from pytest_hud.robot.agent.remote import RemoteModel, RemoteModelError
from pytest_hud.robot.wire.codec import pack, unpack, ws_options

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parents[1] / "helpers"
ROOT = HERE.parents[1]
DRIVE = HERE / "peers" / "openpi_client_drive.py"
COUNTER = HERE / "envs" / "counter_env.py"
PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"
MODELS = HERE / "policy_models.py"
WAIT = 120.0  # bound on any one subprocess wait


def row_from(described: dict[str, Any]) -> dict[str, Any]:
    return {k: array(v) if isinstance(v, dict) else v for k, v in described.items()}


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


# -- issue 52: strangers at a server without a token ------------------------------------------
ROW = {"observation/state": np.arange(4, dtype=np.float32)}


async def _served(url: str) -> np.ndarray | int:
    """One request on a fresh connection: its actions, or the HTTP status it was refused."""
    try:
        async with websockets.connect(url, open_timeout=WAIT, **ws_options()) as ws:
            await ws.recv()  # the metadata
            await ws.send(pack(ROW))
            return np.asarray(unpack(await ws.recv())["actions"])
    except websockets.InvalidStatus as exc:
        return int(exc.response.status_code)


async def test_idle_connections_give_way_to_a_client_that_works() -> None:
    """Issue 52 #6: ``policy-server`` without ``--token`` serves anyone, and every local
    client is the one peer 127.0.0.1: 64 connections that never sent a request filled the
    per-peer cap for good, and the owner got 503. Now, the cap full, a newcomer takes the
    place of the connection idle longest once it has been idle ``idle_s`` (10 s): the
    owner is served, and the stranger is told to try again later (1013)."""
    model = StateModel()
    async with PolicyServer(model) as server:
        idle = [
            await websockets.connect(server.url, open_timeout=WAIT, **ws_options())
            for _ in range(server.max_per_peer)
        ]
        try:
            served = await _served(server.url)
            async with asyncio.timeout(WAIT):
                while isinstance(served, int):
                    assert served == 503  # until the strangers have idled idle_s
                    await asyncio.sleep(0.5)
                    served = await _served(server.url)
            np.testing.assert_array_equal(served, model.expected(ROW))
            async with asyncio.timeout(WAIT):
                while not any(ws.close_code == 1013 for ws in idle):
                    await asyncio.sleep(0.1)
            async with asyncio.timeout(WAIT):  # the owner's closed, the stranger let go
                while server.held() != server.max_per_peer - 1:
                    await asyncio.sleep(0.1)
        finally:
            for ws in idle:
                await ws.close()


async def test_a_structured_dtype_never_freezes_the_servers_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 52 #4 at the server (no token needed): a request whose array names a 768 KiB
    structured dtype was parsed by numpy on the server's loop (about 1.9 s a MiB, every
    client frozen). It is refused now without reaching numpy's parser, in one line, and
    the next client is served."""
    parsed = spy_on_dtype(monkeypatch)
    model = StateModel()
    async with PolicyServer(model) as server:
        bomb = {b"__ndarray__": True, b"data": b"", b"dtype": "f4," * (1 << 18), b"shape": [0]}
        async with websockets.connect(server.url, open_timeout=WAIT, **ws_options()) as ws:
            await ws.recv()
            await ws.send(msgpack.packb({"observation/state": bomb}))
            said = await ws.recv()
        assert isinstance(said, str) and "unknown dtype 'f4,f4," in said, said[:300]
        assert parsed == []
        np.testing.assert_array_equal(await _served(server.url), model.expected(ROW))
