"""Inline sims: a bridge served in this process on this loop (``RobotEndpoint(inline=True)``),
reached in-process by an agent on the same loop and over its WebSocket by any other."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from sims import CounterSim
from websockets.exceptions import ConnectionClosed

from pytest_hud.robot import RobotClient, RobotEndpoint, RobotError, SimError
from pytest_hud.robot.wire import inproc
from pytest_hud.robot.wire.errors import TransportClosed
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
        await client.close()
        await asyncio.wait_for(done.wait(), 30)
        with pytest.raises(TransportClosed):
            await client.recv()
        with pytest.raises(TransportClosed):
            await client.send(b"late")
        with pytest.raises(ConnectionClosed):
            await server[0].send(b"late")
    finally:
        await inproc.unregister("ws://127.0.0.1:1")
