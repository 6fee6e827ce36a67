"""Inline sims: a bridge served in this process on this loop (``RobotEndpoint(inline=True)``),
reached in-process by an agent on the same loop and over its WebSocket by any other."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from sims import CounterSim
from websockets.exceptions import ConnectionClosed

from pytest_hud.errors import TransportClosed
from pytest_hud.robot import RobotClient, RobotEndpoint, RobotError, SimError
from pytest_hud.robot.wire import inproc
from pytest_hud.robot.wire.inproc import InprocTransport
from pytest_hud.robot.wire.wsclient import FrameTransport

pytestmark = pytest.mark.anyio


async def drive(url: str, token: str) -> tuple[type, int]:
    """One episode of +1 actions: (the transport's type, ticks seen)."""
    async with await RobotClient.connect(url, token=token) as client:
        kind = type(client._ws)
        obs, ticks = await client.get_observation(), 0
        while not obs["terminated"]:
            obs = await client.step([1.0, 0.0])
            ticks += 1
    return kind, ticks


async def test_an_inline_sim_runs_in_this_process_and_its_agent_needs_no_socket() -> None:
    async with RobotEndpoint(CounterSim, kwargs={"length": 4}) as spawned:
        run = await spawned.reset(seed=3)
        kind, _ = await drive(spawned.url, run["token"])
        want = await spawned.result(run["token"])
    assert kind is FrameTransport
    async with RobotEndpoint(CounterSim, kwargs={"length": 4}, inline=True) as ep:
        assert ep.pid is None and ep.inline
        run = await ep.reset(seed=3)
        kind, ticks = await drive(ep.url, run["token"])
        got = await ep.result(run["token"])
    assert kind is InprocTransport and ticks == 4
    assert got == want and got["total_reward"] == 4.0 and got["seed"] == 3


async def test_an_agent_on_another_loop_reaches_the_inline_sim_over_its_websocket() -> None:
    async with RobotEndpoint(CounterSim, kwargs={"length": 3}, inline=True) as ep:
        run = await ep.reset()
        seen: list[tuple[type, int]] = []
        thread = threading.Thread(
            target=lambda: seen.append(asyncio.run(drive(ep.url, run["token"])))
        )
        thread.start()
        while thread.is_alive():  # this loop serves the bridge meanwhile
            await asyncio.sleep(0.01)
        thread.join()
        assert seen == [(FrameTransport, 3)]
        assert (await ep.result(run["token"]))["ticks"] == 3


async def test_stopping_an_inline_sim_closes_its_live_connection_and_its_url() -> None:
    ep = RobotEndpoint(CounterSim, kwargs={"length": 50}, inline=True)
    await ep.start()
    url = ep.url
    run = await ep.reset()
    client = await RobotClient.connect(url, token=run["token"], timeout=30)
    await client.get_observation()
    await ep.stop()
    with pytest.raises(RobotError, match="closed the connection"):
        for _ in range(3):
            await client.step([1.0, 0.0])
    await client.close()
    assert inproc.dial(url) is None
    with pytest.raises(RobotError, match="cannot connect"):
        await RobotClient.connect(url, open_timeout=5)


async def test_inline_sim_errors_are_sim_errors_and_it_keeps_serving() -> None:
    async with RobotEndpoint(CounterSim, kwargs={"fail_reset": True}, inline=True) as ep:
        for _ in range(2):
            with pytest.raises(SimError, match="reset exploded on purpose"):
                await ep.reset(seed=1)
    async with RobotEndpoint(CounterSim, kwargs={"fail_at": 1}, inline=True) as ep:
        run = await ep.reset()
        with pytest.raises(RobotError):
            await drive(ep.url, run["token"])
        with pytest.raises(SimError, match="unknown or expired slot token"):
            await ep.result("nope")


def test_inline_takes_a_bridge_and_no_pickling() -> None:
    with pytest.raises(TypeError, match="inline=True"):
        RobotEndpoint(argv=["true"], inline=True)
    # a closure cannot travel to a sim process, but an inline sim builds it right here
    RobotEndpoint(lambda: CounterSim(), inline=True)


async def test_the_in_process_pair_ends_like_a_websocket() -> None:
    server: list[inproc.InprocServerEnd] = []
    done = asyncio.Event()

    async def handler(end: inproc.InprocServerEnd) -> None:
        server.append(end)
        await end.send(b"hello")
        try:
            while True:
                await end.send(await end.recv())  # echo
        except ConnectionClosed:
            done.set()

    inproc.register("ws://127.0.0.1:1", handler)
    try:
        client = inproc.dial("ws://127.0.0.1:1")
        assert client is not None and inproc.dial("ws://127.0.0.1:2") is None
        assert await client.recv() == b"hello"
        await client.send(np.arange(3).tobytes())
        assert await client.recv() == np.arange(3).tobytes()
        assert client.take() is None  # nothing queued: no wait, no frame
        await client.send(b"queued")
        await asyncio.sleep(0)  # the echo runs; its frame is queued, not awaited
        for _ in range(100):
            if (frame := client.take()) is not None:
                break
            await asyncio.sleep(0)
        assert frame == b"queued"
        await client.close()
        await asyncio.wait_for(done.wait(), 30)
        assert client.take() is None  # the close marker stays for recv() to raise
        with pytest.raises(TransportClosed):
            await client.recv()
        with pytest.raises(TransportClosed):
            await client.send(b"late")
        with pytest.raises(ConnectionClosed):
            await server[0].send(b"late")
    finally:
        await inproc.unregister("ws://127.0.0.1:1")


async def test_a_second_reader_of_one_in_process_end_is_told_so() -> None:
    """One task receives on a connection at a time, as on a WebSocket: a second reader
    gets an error saying so, and the first still gets its frame."""
    go = asyncio.Event()

    async def handler(end: inproc.InprocServerEnd) -> None:
        await go.wait()
        await end.send(b"first")
        await asyncio.Event().wait()  # held open until the client closes

    inproc.register("ws://127.0.0.1:3", handler)
    try:
        client = inproc.dial("ws://127.0.0.1:3")
        assert client is not None
        reader = asyncio.create_task(client.recv())
        await asyncio.sleep(0)  # the reader's first step: it waits for a frame
        with pytest.raises(RuntimeError, match="two tasks read one connection at once"):
            await client.recv()
        go.set()
        assert await asyncio.wait_for(reader, 30) == b"first"
        await client.close()
    finally:
        await inproc.unregister("ws://127.0.0.1:3")


class ReusingCounter(CounterSim):
    """Writes every observation into the same buffers, as VlaEvalBridge and many sims do."""

    def get_observation(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        data, done = super().get_observation()
        if not hasattr(self, "_rows"):
            self._rows = {k: np.empty_like(v) for k, v in data.items()}
        for key, value in data.items():
            self._rows[key][...] = value
        return self._rows, done


async def test_an_inline_agent_gets_each_observation_as_its_own_read_only_copy() -> None:
    """In-process, messages pass without the codec; the agent must still see what a socket
    would give it: arrays of its own (not the sim's reused buffer), read-only like decoded ones."""
    seen: dict[str, list[np.ndarray]] = {}
    for inline in (False, True):
        async with RobotEndpoint(ReusingCounter, kwargs={"length": 4}, inline=inline) as ep:
            run = await ep.reset()
            async with await RobotClient.connect(ep.url, token=run["token"]) as client:
                assert isinstance(client._ws, InprocTransport) is inline
                obs = await client.get_observation()
                states = [obs["data"]["observation/state"]]
                while not obs["terminated"]:
                    obs = await client.step([1.0, 0.0])
                    states.append(obs["data"]["observation/state"])
            await ep.result(run["token"])
        seen["inline" if inline else "socket"] = states
    counts = [float(s[0]) for s in seen["inline"]]
    assert counts == [0.0, 1.0, 2.0, 3.0, 4.0]
    for a, b in zip(seen["inline"], seen["socket"], strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype and not a.flags.writeable and not b.flags.writeable


class StepTasks(CounterSim):
    """Records the asyncio task each step ran in."""

    def step(self, actions: np.ndarray) -> None:
        self.step_tasks = [*getattr(self, "step_tasks", []), asyncio.current_task()]
        super().step(actions)


async def test_an_inline_agents_action_is_stepped_in_the_agents_own_task() -> None:
    """No hand-off to the connection's task and back: the step runs where the action was
    sent (``InprocServerEnd.direct``), the same episode either way."""
    async with RobotEndpoint(StepTasks, kwargs={"length": 4}, inline=True) as ep:
        run = await ep.reset()
        agent = asyncio.create_task(drive(ep.url, run["token"]))
        assert await agent == (InprocTransport, 4)
        bridge = ep._bridge
        assert isinstance(bridge, StepTasks) and bridge.step_tasks == [agent] * 4
        assert (await ep.result(run["token"]))["total_reward"] == 4.0


class Idle(CounterSim):
    idle_timeout = 3.0


async def test_an_inline_agent_keeps_its_slot_while_it_acts_and_loses_it_when_silent() -> None:
    """Actions handled in the agent's task still feed the bridge's idle timeout."""
    async with RobotEndpoint(Idle, kwargs={"length": 100}, inline=True) as ep:
        run = await ep.reset()
        async with await RobotClient.connect(ep.url, token=run["token"]) as client:
            obs = await client.get_observation()
            for _ in range(20):  # about 4 s of steps, each gap far inside the 3 s timeout
                await asyncio.sleep(0.2)
                obs = await client.step([1.0, 0.0])
            assert not obs["terminated"] and float(obs["data"]["observation/state"][0]) == 20
            with pytest.raises(RobotError, match=r"no action within 3.0 s"):
                await client.get_observation(timeout=120)


async def test_an_inline_agent_beside_a_socket_agent_is_queued_like_a_frame() -> None:
    """A vectorized inline sim with one agent in-process and one over the WebSocket: the
    in-process agent's actions take the connection's task (a socket send may suspend)."""
    async with RobotEndpoint(StepTasks, kwargs={"num_envs": 2, "length": 5}, inline=True) as ep:
        near, far = await ep.reset(), await ep.reset()
        seen: list[tuple[type, int]] = []
        thread = threading.Thread(
            target=lambda: seen.append(asyncio.run(drive(ep.url, far["token"])))
        )
        thread.start()
        agent = asyncio.create_task(drive(ep.url, near["token"]))
        here = await agent
        while thread.is_alive():  # this loop serves the bridge meanwhile
            await asyncio.sleep(0.01)
        thread.join()
        bridge = ep._bridge
        assert here == (InprocTransport, 5) and seen == [(FrameTransport, 5)]
        assert isinstance(bridge, StepTasks) and agent not in bridge.step_tasks


class InPlace(CounterSim):
    """Clips its actions in place, as some sims do: the rows it is handed must be its own."""

    def step(self, actions: np.ndarray) -> None:
        np.clip(actions, -1.0, 1.0, out=actions)
        super().step(actions)


@pytest.mark.parametrize("inline", [False, True])
async def test_a_sim_may_write_into_the_actions_it_is_handed(inline: bool) -> None:
    """A decoded frame's arrays and an inline agent's carried ones are read-only; the one-slot
    barrier still hands the sim writable rows of its own."""
    async with RobotEndpoint(InPlace, kwargs={"length": 3}, inline=inline) as ep:
        run = await ep.reset()
        assert await drive(ep.url, run["token"]) == (
            InprocTransport if inline else FrameTransport,
            3,
        )
        assert (await ep.result(run["token"]))["total_reward"] == 3.0
