"""The policy server's faults: a failing forward, a server stopped or killed mid-episode,
bounded waits, garbage frames, a restarted server reconnected, one never reached. The
protocol, openpi-client interop and batching: test_policy_server.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from policy_models import StateModel
from policy_wire import env_server
from websockets.asyncio.server import serve as ws_serve

from pytest_hud import Runtime, Task, run
from pytest_hud.robot import Contract, RobotAgent, load_agent
from pytest_hud.robot.agent.policy_server import ANNOUNCE, PolicyServer
from pytest_hud.robot.agent.remote import RemoteModel, RemoteModelError
from pytest_hud.robot.wire.codec import pack, unpack, ws_options
from pytest_hud.runtime.ports import free_port

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parents[1] / "helpers"
ROOT = HERE.parents[1]
PENDULUM = ROOT / "examples" / "envs" / "pendulum.py"
MODELS = HERE / "policy_models.py"
WAIT = 120.0  # bound on any one subprocess wait


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
